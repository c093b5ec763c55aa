//! Lag per partition: two samples `window` apart of the committed offsets and the log
//! ends give the consumed rate, d(lag)/dt, and lag in seconds at the consumed rate;
//! the oldest unread record's timestamp plus `retention.ms` gives the retention headroom.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::error::Result;
use crate::fetch::{FetchOptions, OffsetSpec};

/// Lag of one partition for one group.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionLag {
    pub topic: String,
    pub partition: i32,
    /// The next offset the group will read; -1 when it never committed.
    pub committed: i64,
    pub log_start: i64,
    pub log_end: i64,
    /// Messages between the committed offset and the log end.
    pub lag: i64,
    /// Committed offsets per second over the sampling window.
    pub consume_rate: f64,
    /// d(lag)/dt in messages per second: positive means falling behind.
    pub trend: f64,
    /// Seconds to catch up at the consumed rate; `None` while not consuming with lag.
    pub lag_seconds: Option<f64>,
    /// Ms until retention may delete the oldest unread record (negative: overdue;
    /// `None`: nothing unread or no time retention).
    pub retention_left_ms: Option<i64>,
    /// Whether records the group never read were already deleted.
    pub lost: bool,
    /// The member the partition is assigned to.
    pub owner: Option<String>,
}

impl Client {
    /// Lag per partition the group has committed or been assigned, sampled twice
    /// `window` apart (see the module docs).
    pub async fn group_lag(&mut self, group: &str, window: Duration) -> Result<Vec<PartitionLag>> {
        let description = self.describe_group(group).await?;
        let mut owners: BTreeMap<(String, i32), String> = BTreeMap::new();
        for m in &description.members {
            for (topic, partitions) in &m.assignment {
                for p in partitions {
                    owners.insert((topic.clone(), *p), m.member_id.clone());
                }
            }
        }
        let first = self.lag_sample(group, &owners).await?;
        let started = Instant::now();
        tokio::time::sleep(window).await;
        let second = self.lag_sample(group, &owners).await?;
        let seconds = started.elapsed().as_secs_f64().max(1e-3);
        let now_ms = crate::producer::now_ms();
        let mut retention: BTreeMap<String, Option<i64>> = BTreeMap::new();
        let mut out = Vec::with_capacity(second.len());
        for (key, (committed, log_start, log_end)) in &second {
            let (c0, _, e0) = first
                .get(key)
                .copied()
                .unwrap_or((*committed, *log_start, *log_end));
            let lag = lag_of(*committed, *log_start, *log_end);
            let consume_rate = (committed.max(&0) - c0.max(0)) as f64 / seconds;
            let trend = (lag - lag_of(c0, *log_start, e0)) as f64 / seconds;
            let lag_seconds = match (lag, consume_rate > 0.0) {
                (0, _) => Some(0.0),
                (_, true) => Some(lag as f64 / consume_rate),
                (_, false) => None,
            };
            let lost = *committed >= 0 && *committed < *log_start;
            let retention_left_ms = if lag == 0 {
                None
            } else {
                if !retention.contains_key(&key.0) {
                    let ms = self.retention_ms(&key.0).await?;
                    retention.insert(key.0.clone(), ms);
                }
                match retention.get(&key.0).copied().flatten() {
                    None => None,
                    Some(ms) => {
                        let oldest = (*committed).max(*log_start);
                        self.timestamp_at(&key.0, key.1, oldest)
                            .await?
                            .map(|ts| ts.saturating_add(ms).saturating_sub(now_ms))
                    }
                }
            };
            out.push(PartitionLag {
                topic: key.0.clone(),
                partition: key.1,
                committed: *committed,
                log_start: *log_start,
                log_end: *log_end,
                lag,
                consume_rate,
                trend,
                lag_seconds,
                retention_left_ms,
                lost,
                owner: owners.get(key).cloned(),
            });
        }
        Ok(out)
    }

    /// (committed, log start, log end) per partition.
    async fn lag_sample(
        &mut self,
        group: &str,
        owners: &BTreeMap<(String, i32), String>,
    ) -> Result<BTreeMap<(String, i32), (i64, i64, i64)>> {
        let committed = self.committed_offsets(group).await?;
        let keys: BTreeSet<(String, i32)> =
            committed.keys().chain(owners.keys()).cloned().collect();
        let mut partitions: BTreeMap<String, i32> = BTreeMap::new();
        let mut out = BTreeMap::new();
        for key in keys {
            if !partitions.contains_key(&key.0) {
                // A deleted topic's committed offsets have no lag to show.
                let count = match self.topic(&key.0, false).await {
                    Ok(t) => t.partition_count(),
                    Err(_) => 0,
                };
                partitions.insert(key.0.clone(), count);
            }
            if key.1 >= partitions.get(&key.0).copied().unwrap_or(0) {
                continue;
            }
            let start = self
                .list_offsets(&key.0, key.1, OffsetSpec::Earliest)
                .await?;
            let end = self.list_offsets(&key.0, key.1, OffsetSpec::Latest).await?;
            let c = committed.get(&key).copied().unwrap_or(-1);
            out.insert(key, (c, start, end));
        }
        Ok(out)
    }

    async fn retention_ms(&mut self, topic: &str) -> Result<Option<i64>> {
        let configs = self.describe_topic_configs(topic).await?;
        Ok(configs
            .iter()
            .find(|c| c.name == "retention.ms")
            .and_then(|c| c.value.as_deref())
            .and_then(|v| v.parse::<i64>().ok())
            .filter(|ms| *ms >= 0))
    }

    async fn timestamp_at(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<Option<i64>> {
        let options = FetchOptions {
            max_wait: Duration::from_millis(0),
            max_bytes: 64 * 1024,
            partition_max_bytes: 64 * 1024,
            ..FetchOptions::default()
        };
        let fetched = self.fetch(topic, partition, offset, &options).await?;
        Ok(fetched
            .records
            .iter()
            .find(|r| r.offset >= offset)
            .map(|r| r.timestamp))
    }
}

fn lag_of(committed: i64, log_start: i64, log_end: i64) -> i64 {
    // Without a commit the group would start at the log start (earliest reset).
    let from = if committed < 0 {
        log_start
    } else {
        committed.max(log_start)
    };
    (log_end - from).max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_counts_from_the_log_start_when_nothing_was_committed() {
        assert_eq!(lag_of(-1, 10, 25), 15);
        assert_eq!(lag_of(20, 10, 25), 5);
        assert_eq!(lag_of(5, 10, 25), 15); // committed offset already deleted
        assert_eq!(lag_of(30, 10, 25), 0);
    }
}
