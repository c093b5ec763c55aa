//! A lighter reference consumer built on the workspace's own protocol code (not
//! librdkafka): one Fetch in flight per connection, like librdkafka's, but the response
//! is only walked for its batch headers (to know where the next fetch starts) and the
//! record bytes are dropped unread. It shows what the broker serves when the client
//! costs almost nothing; the librdkafka figure stays the target's value.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::{BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use tidelog_client::Client;

use crate::stats::mb_per_s;

/// Reads every partition of `topic` from offset 0 to the high watermark its first
/// response reports; returns record-batch MB/s (batch headers included).
pub(crate) fn consume(bootstrap: &str, topic: &str, timeout: Duration) -> anyhow::Result<f64> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(consume_async(bootstrap, topic, timeout))
}

async fn consume_async(bootstrap: &str, topic: &str, timeout: Duration) -> anyhow::Result<f64> {
    let mut client = Client::connect_to(bootstrap).await?;
    let meta = client.topic(topic, false).await?;
    let mut next: BTreeMap<i32, i64> = meta.partitions.iter().map(|p| (p.partition, 0)).collect();
    let mut end: BTreeMap<i32, i64> = BTreeMap::new();
    let leader = client.leader_of(topic, 0).await?;
    let conn = client.broker_connection(leader).await?;
    let start = Instant::now();
    let mut bytes = 0u64;
    loop {
        if start.elapsed() > timeout {
            bail!("native consume of {topic} did not finish in {timeout:?}");
        }
        let partitions = next
            .iter()
            .filter(|(p, offset)| end.get(p).is_none_or(|e| **offset < *e))
            .map(|(p, offset)| {
                FetchPartition::default()
                    .with_partition(*p)
                    .with_fetch_offset(*offset)
                    .with_partition_max_bytes(10 << 20)
            })
            .collect::<Vec<_>>();
        if partitions.is_empty() && end.len() == next.len() {
            break;
        }
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(100)
            .with_min_bytes(1)
            .with_max_bytes(50 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_topic_id(meta.topic_id)
                .with_partitions(partitions)]);
        let response = conn.send(&request).await?;
        for data in response.responses.iter().flat_map(|t| t.partitions.iter()) {
            if data.error_code != 0 {
                bail!(
                    "fetch {topic}-{}: error {}",
                    data.partition_index,
                    data.error_code
                );
            }
            end.entry(data.partition_index)
                .or_insert(data.high_watermark);
            let records = data.records.as_deref().unwrap_or_default();
            let (walked, last) = walk_batches(records);
            bytes += walked as u64;
            if let (Some(last), Some(offset)) = (last, next.get_mut(&data.partition_index)) {
                *offset = last + 1;
            }
        }
    }
    let elapsed = start.elapsed();
    if bytes == 0 {
        return Err(anyhow!("native consume of {topic} read nothing"));
    }
    Ok(mb_per_s(bytes, elapsed))
}

/// (bytes of the complete batches, last offset of the last complete batch). A batch cut
/// short by the fetch size is left for the next fetch.
fn walk_batches(mut records: &[u8]) -> (usize, Option<i64>) {
    let mut walked = 0;
    let mut last = None;
    while records.len() >= 27 {
        let base = i64::from_be_bytes(records[0..8].try_into().unwrap_or_default());
        let length = i32::from_be_bytes(records[8..12].try_into().unwrap_or_default());
        let delta = i32::from_be_bytes(records[23..27].try_into().unwrap_or_default());
        let Some(total) = usize::try_from(length).ok().and_then(|l| l.checked_add(12)) else {
            break;
        };
        if total > records.len() {
            break;
        }
        walked += total;
        last = Some(base + i64::from(delta));
        records = &records[total..];
    }
    (walked, last)
}

#[cfg(test)]
mod tests {
    use super::walk_batches;

    fn batch(base: i64, delta: i32, body: usize) -> Vec<u8> {
        let mut b = base.to_be_bytes().to_vec();
        b.extend_from_slice(&i32::try_from(15 + body).unwrap().to_be_bytes());
        b.extend_from_slice(&[0u8; 11]);
        b.extend_from_slice(&delta.to_be_bytes());
        b.extend(std::iter::repeat_n(7u8, body));
        b
    }

    #[test]
    fn complete_batches_count_and_a_cut_one_waits() {
        let mut bytes = batch(0, 9, 100);
        bytes.extend(batch(10, 4, 50));
        let whole = bytes.len();
        bytes.extend(&batch(15, 0, 80)[..40]);
        assert_eq!(walk_batches(&bytes), (whole, Some(14)));
        assert_eq!(walk_batches(&[]), (0, None));
    }
}
