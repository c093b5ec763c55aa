//! One fetch round for the consumer: every fetchable partition, of any topic, grouped
//! into one Fetch per leader, all leaders in flight at once (so long polls do not add up),
//! at the consumer's isolation level. Under read_committed the records of aborted
//! transactions are dropped here, as Kafka's fetcher does: the broker sends records up to
//! the last stable offset and the list of aborted transactions that overlap them.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::AbortedTransaction;
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::config::IsolationLevel;
use crate::client::{is_leadership_error, Client};
use crate::error::{ClientError, Result};
use crate::fetch::FetchOptions;
use crate::partition_admin::TopicPartition;
use crate::records::{decode_fetched, ConsumedRecord};

/// What one partition of a fetch round returned.
#[derive(Debug)]
pub(crate) struct PartitionFetch {
    pub(crate) tp: TopicPartition,
    pub(crate) fetch_offset: i64,
    pub(crate) error: Option<ResponseError>,
    pub(crate) high_watermark: i64,
    pub(crate) last_stable_offset: i64,
    pub(crate) records: Vec<ConsumedRecord>,
    pub(crate) next_offset: i64,
}

/// Fetches `positions` (partition → offset to fetch from).
pub(crate) async fn fetch_round(
    client: &mut Client,
    positions: &[(TopicPartition, i64)],
    options: &FetchOptions,
    isolation: IsolationLevel,
) -> Result<Vec<PartitionFetch>> {
    let mut by_leader: BTreeMap<i32, Vec<(TopicPartition, i64)>> = BTreeMap::new();
    let mut out = Vec::new();
    for (tp, offset) in positions {
        match client.leader_of(&tp.0, tp.1).await {
            Ok(leader) => by_leader
                .entry(leader)
                .or_default()
                .push((tp.clone(), *offset)),
            Err(e) if crate::client::needs_metadata_refresh(&e) => {
                client.invalidate_topic(&tp.0);
                out.push(PartitionFetch {
                    tp: tp.clone(),
                    fetch_offset: *offset,
                    error: Some(ResponseError::LeaderNotAvailable),
                    high_watermark: -1,
                    last_stable_offset: -1,
                    records: Vec::new(),
                    next_offset: *offset,
                });
            }
            Err(e) => return Err(e),
        }
    }
    let limit = client.config().connection.request_timeout + options.max_wait;
    let mut in_flight = tokio::task::JoinSet::new();
    for (leader, parts) in by_leader {
        let mut conn = client.take_connection(leader).await?;
        let request = request(&parts, options, isolation);
        in_flight.spawn(async move {
            let response = conn.send_with_timeout(&request, limit).await;
            (leader, conn, parts, response)
        });
    }
    let mut answers = Vec::new();
    while let Some(joined) = in_flight.join_next().await {
        let (leader, conn, parts, response) =
            joined.map_err(|e| ClientError::Protocol(format!("fetch task failed: {e}")))?;
        client.return_connection(leader, conn);
        answers.push((parts, response));
    }
    for (parts, response) in answers {
        let response = response?;
        ClientError::check(response.error_code, None, || "fetch".to_string())?;
        for t in response.responses {
            for p in t.partitions {
                let tp = (t.topic.0.to_string(), p.partition_index);
                let Some((_, offset)) = parts.iter().find(|(asked, _)| *asked == tp) else {
                    continue;
                };
                let error = ResponseError::try_from_code(p.error_code);
                if error.is_some_and(is_leadership_error) {
                    client.invalidate_topic(&tp.0);
                }
                let (records, next_offset) = match (&error, p.records) {
                    (None, Some(bytes)) => {
                        let decoded = decode_fetched(bytes, tp.1, *offset)?;
                        let records = match (isolation, &p.aborted_transactions) {
                            (IsolationLevel::ReadCommitted, Some(aborted))
                                if !aborted.is_empty() =>
                            {
                                drop_aborted(decoded.records, &decoded.control_batches, aborted)
                            }
                            _ => decoded.records,
                        };
                        (records, decoded.next_offset.max(*offset))
                    }
                    _ => (Vec::new(), *offset),
                };
                out.push(PartitionFetch {
                    tp,
                    fetch_offset: *offset,
                    error,
                    high_watermark: p.high_watermark,
                    last_stable_offset: p.last_stable_offset,
                    records,
                    next_offset,
                });
            }
        }
    }
    Ok(out)
}

/// Drops the records of aborted transactions: a record of producer P at or after the
/// first offset of one of P's aborted transactions belongs to it until P's next control
/// batch (the abort marker) closes it.
fn drop_aborted(
    records: Vec<ConsumedRecord>,
    control_batches: &[(i64, i64)],
    aborted: &[AbortedTransaction],
) -> Vec<ConsumedRecord> {
    let mut starts: Vec<(i64, i64)> = aborted
        .iter()
        .map(|a| (a.first_offset, a.producer_id.0))
        .collect();
    starts.sort_unstable();
    let mut starts = starts.into_iter().peekable();
    let mut markers = control_batches.iter().copied().peekable();
    let mut open: BTreeSet<i64> = BTreeSet::new();
    let mut kept = Vec::with_capacity(records.len());
    for record in records {
        // Starts and markers up to this record, in offset order: a marker that closed
        // an earlier transaction of P must not close an aborted one of P opened after it.
        loop {
            let start = starts.peek().copied().filter(|s| s.0 <= record.offset);
            let marker = markers.peek().copied().filter(|m| m.1 <= record.offset);
            match (start, marker) {
                (Some((first, _)), Some((producer, at))) if at < first => {
                    open.remove(&producer);
                    markers.next();
                }
                (Some((_, producer)), _) => {
                    open.insert(producer);
                    starts.next();
                }
                (None, Some((producer, _))) => {
                    open.remove(&producer);
                    markers.next();
                }
                (None, None) => break,
            }
        }
        if !open.contains(&record.producer_id) {
            kept.push(record);
        }
    }
    kept
}

fn request(
    parts: &[(TopicPartition, i64)],
    options: &FetchOptions,
    isolation: IsolationLevel,
) -> FetchRequest {
    let mut by_topic: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
    for ((topic, partition), offset) in parts {
        by_topic.entry(topic).or_default().push(
            FetchPartition::default()
                .with_partition(*partition)
                .with_current_leader_epoch(-1)
                .with_fetch_offset(*offset)
                .with_last_fetched_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(options.partition_max_bytes),
        );
    }
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(i32::try_from(options.max_wait.as_millis()).unwrap_or(i32::MAX))
        .with_min_bytes(options.min_bytes)
        .with_max_bytes(options.max_bytes)
        .with_isolation_level(isolation.wire())
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(
            by_topic
                .into_iter()
                .map(|(topic, partitions)| {
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
                        .with_partitions(partitions)
                })
                .collect(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::ProducerId;

    fn record(offset: i64, producer_id: i64) -> ConsumedRecord {
        ConsumedRecord {
            partition: 0,
            offset,
            timestamp: 0,
            log_append_time: false,
            key: None,
            value: None,
            headers: Vec::new(),
            producer_id,
        }
    }

    #[test]
    fn aborted_transaction_records_are_dropped_up_to_their_marker() {
        // Producer 7: offsets 0-1 aborted (marker at 2), then 3-4 committed (marker at 5).
        // Producer 8 interleaves at 1 and 4 and is never aborted.
        let records = vec![record(0, 7), record(1, 8), record(3, 7), record(4, 8)];
        let markers = [(7, 2), (7, 5)];
        let aborted = [AbortedTransaction::default()
            .with_producer_id(ProducerId(7))
            .with_first_offset(0)];
        let kept: Vec<i64> = drop_aborted(records, &markers, &aborted)
            .iter()
            .map(|r| r.offset)
            .collect();
        assert_eq!(kept, vec![1, 3, 4]);
    }

    #[test]
    fn an_abort_after_a_commit_of_the_same_producer_is_dropped() {
        // Producer 7: 0-1 committed (marker at 2), 3-4 aborted (marker at 5), 6 committed
        // (marker at 7). The commit marker at 2 must not close the abort opened at 3.
        let records = vec![
            record(0, 7),
            record(1, 7),
            record(3, 7),
            record(4, 7),
            record(6, 7),
        ];
        let markers = [(7, 2), (7, 5), (7, 7)];
        let aborted = [AbortedTransaction::default()
            .with_producer_id(ProducerId(7))
            .with_first_offset(3)];
        let kept: Vec<i64> = drop_aborted(records, &markers, &aborted)
            .iter()
            .map(|r| r.offset)
            .collect();
        assert_eq!(kept, vec![0, 1, 6]);
    }
}
