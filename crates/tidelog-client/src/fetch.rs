//! Reading: Fetch (with long poll) and ListOffsets.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::client::{is_leadership_error, needs_metadata_refresh, Client};
use crate::error::{ClientError, Result};
use crate::records::{decode_fetched, ConsumedRecord};

/// Where [`Client::list_offsets`] looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The log end offset (high watermark): where the next record will go.
    Latest,
    /// The first offset whose timestamp is at or after this many ms since the epoch.
    Timestamp(i64),
}

impl OffsetSpec {
    fn wire_timestamp(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::Timestamp(ms) => ms,
        }
    }
}

/// Limits of one fetch.
#[derive(Debug, Clone)]
pub struct FetchOptions {
    /// How long the broker may hold the request when fewer than `min_bytes` are available.
    pub max_wait: Duration,
    /// Bytes that make the broker answer before `max_wait`.
    pub min_bytes: i32,
    /// Response size limit (the broker still returns at least one batch).
    pub max_bytes: i32,
    /// Per-partition size limit.
    pub partition_max_bytes: i32,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions {
            max_wait: Duration::from_millis(500),
            min_bytes: 1,
            max_bytes: 50 * 1024 * 1024,
            partition_max_bytes: 1024 * 1024,
        }
    }
}

/// What one partition of a fetch returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPartition {
    /// Partition index.
    pub partition: i32,
    /// The broker's error for this partition, if any (records are then empty).
    pub error: Option<ResponseError>,
    /// High watermark: the end of what consumers may read.
    pub high_watermark: i64,
    /// Last stable offset (read_committed bound).
    pub last_stable_offset: i64,
    /// First offset still in the log.
    pub log_start_offset: i64,
    /// Data records at or after the requested offset.
    pub records: Vec<ConsumedRecord>,
    /// Where the next fetch of this partition should start.
    pub next_offset: i64,
}

impl Client {
    /// Fetches one partition from `offset`, retrying after leader changes. A partition
    /// error (e.g. OFFSET_OUT_OF_RANGE) is returned as [`ClientError::Broker`].
    pub async fn fetch(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        options: &FetchOptions,
    ) -> Result<FetchedPartition> {
        let mut attempt = 0;
        loop {
            let result = self
                .fetch_many(topic, &[(partition, offset)], options)
                .await
                .and_then(|mut v| {
                    v.pop().ok_or_else(|| {
                        ClientError::Protocol(format!("fetch response lacks {topic}-{partition}"))
                    })
                })
                .and_then(|p| match p.error {
                    None => Ok(p),
                    Some(error) => Err(ClientError::Broker {
                        context: format!("fetch {topic}-{partition} at offset {offset}"),
                        error,
                        message: None,
                    }),
                });
            match result {
                Err(e) if needs_metadata_refresh(&e) && attempt < self.config().retries => {
                    attempt += 1;
                    self.backoff_and_forget(topic).await;
                }
                other => return other,
            }
        }
    }

    /// Fetches several partitions of one topic, one request per leader. Partitions whose
    /// leader moved come back with their error (and the topic's metadata is forgotten, so
    /// the next call finds the new leader).
    pub async fn fetch_many(
        &mut self,
        topic: &str,
        positions: &[(i32, i64)],
        options: &FetchOptions,
    ) -> Result<Vec<FetchedPartition>> {
        let mut by_leader: BTreeMap<i32, Vec<(i32, i64)>> = BTreeMap::new();
        for &(partition, offset) in positions {
            let leader = self.leader_of(topic, partition).await?;
            by_leader
                .entry(leader)
                .or_default()
                .push((partition, offset));
        }
        // One request per leader, all in flight at once, so long polls do not add up.
        let limit = self.config().connection.request_timeout + options.max_wait;
        let mut in_flight = tokio::task::JoinSet::new();
        for (leader, parts) in by_leader {
            let mut conn = self.take_connection(leader).await?;
            let request = fetch_request(topic, &parts, options);
            in_flight.spawn(async move {
                let response = conn.send_with_timeout(&request, limit).await;
                (leader, conn, parts, response)
            });
        }
        let mut answers = Vec::new();
        while let Some(joined) = in_flight.join_next().await {
            let (leader, conn, parts, response) =
                joined.map_err(|e| ClientError::Protocol(format!("fetch task failed: {e}")))?;
            self.return_connection(leader, conn);
            answers.push((parts, response));
        }
        let mut out = Vec::with_capacity(positions.len());
        for (parts, response) in answers {
            let response = response?;
            ClientError::check(response.error_code, None, || format!("fetch {topic}"))?;
            for t in response.responses {
                if t.topic.0.as_str() != topic {
                    continue;
                }
                for p in t.partitions {
                    let Some(&(_, offset)) = parts.iter().find(|(i, _)| *i == p.partition_index)
                    else {
                        continue;
                    };
                    let error = ResponseError::try_from_code(p.error_code);
                    if error.is_some_and(is_leadership_error) {
                        self.invalidate_topic(topic);
                    }
                    let decoded = match (&error, p.records) {
                        (None, Some(bytes)) => decode_fetched(bytes, p.partition_index, offset)?,
                        _ => Default::default(),
                    };
                    out.push(FetchedPartition {
                        partition: p.partition_index,
                        error,
                        high_watermark: p.high_watermark,
                        last_stable_offset: p.last_stable_offset,
                        log_start_offset: p.log_start_offset,
                        records: decoded.records,
                        next_offset: decoded.next_offset.max(offset),
                    });
                }
            }
        }
        Ok(out)
    }

    /// The offset `spec` names in one partition (-1 when a timestamp is past every record).
    pub async fn list_offsets(
        &mut self,
        topic: &str,
        partition: i32,
        spec: OffsetSpec,
    ) -> Result<i64> {
        let mut attempt = 0;
        loop {
            match self.list_offsets_once(topic, partition, spec).await {
                Err(e) if needs_metadata_refresh(&e) && attempt < self.config().retries => {
                    attempt += 1;
                    self.backoff_and_forget(topic).await;
                }
                other => return other,
            }
        }
    }

    async fn list_offsets_once(
        &mut self,
        topic: &str,
        partition: i32,
        spec: OffsetSpec,
    ) -> Result<i64> {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(spec.wire_timestamp())])]);
        let response = self
            .leader_connection(topic, partition)
            .await?
            .send(&request)
            .await?;
        let p = response
            .topics
            .into_iter()
            .filter(|t| t.name.0.as_str() == topic)
            .flat_map(|t| t.partitions)
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| {
                ClientError::Protocol(format!("list offsets response lacks {topic}-{partition}"))
            })?;
        ClientError::check(p.error_code, None, || {
            format!("list offsets of {topic}-{partition}")
        })?;
        Ok(p.offset)
    }
}

fn fetch_request(topic: &str, parts: &[(i32, i64)], options: &FetchOptions) -> FetchRequest {
    let partitions = parts
        .iter()
        .map(|&(partition, offset)| {
            FetchPartition::default()
                .with_partition(partition)
                .with_current_leader_epoch(-1)
                .with_fetch_offset(offset)
                .with_last_fetched_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(options.partition_max_bytes)
        })
        .collect();
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(i32::try_from(options.max_wait.as_millis()).unwrap_or(i32::MAX))
        .with_min_bytes(options.min_bytes)
        .with_max_bytes(options.max_bytes)
        .with_isolation_level(0)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partitions(partitions)])
}
