//! Lag per partition: committed offsets and log ends sampled through a window give the
//! consumed rate and d(lag)/dt between the commits observed (`rates.rs`), and from them
//! the drain time; the oldest unread record's timestamp gives the time lag, and with
//! `retention.ms` the retention headroom.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::rates::{CommitRates, Sample};
use crate::client::Client;
use crate::error::Result;
use crate::fetch::{FetchOptions, OffsetSpec};

/// How long to watch a group, and how often to look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LagWindow {
    pub window: Duration,
    pub interval: Duration,
}

impl LagWindow {
    /// About 30 looks through the window, 0.2 to 1 s apart: often enough to place each
    /// commit within a second, rarely enough to stay a light load.
    pub fn new(window: Duration) -> LagWindow {
        let interval = (window / 30).clamp(Duration::from_millis(200), Duration::from_secs(1));
        LagWindow { window, interval }
    }
}

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
    /// Time lag: ms since the oldest unread record's timestamp; 0 when nothing is
    /// unread, `None` when that record could not be read.
    pub time_lag_ms: Option<i64>,
    /// Commits seen in the window, and the rates between them.
    pub rates: CommitRates,
    /// Drain time: seconds to read the current lag at the consumed rate; 0 when nothing
    /// is unread, `None` without a rate.
    pub drain_time_seconds: Option<f64>,
    /// Ms until retention may delete the oldest unread record (negative: overdue;
    /// `None`: nothing unread or no time retention).
    pub retention_left_ms: Option<i64>,
    /// Whether records the group never read were already deleted.
    pub lost: bool,
    /// The member the partition is assigned to.
    pub owner: Option<String>,
}

type Key = (String, i32);

impl Client {
    /// Lag per partition the group has committed or been assigned, sampled through
    /// `watch.window`; `progress` hears the time elapsed after each look.
    pub async fn group_lag(
        &mut self,
        group: &str,
        watch: LagWindow,
        mut progress: impl FnMut(Duration),
    ) -> Result<Vec<PartitionLag>> {
        let description = self.describe_group(group).await?;
        let mut owners: BTreeMap<Key, String> = BTreeMap::new();
        for m in &description.members {
            for (topic, partitions) in &m.assignment {
                for p in partitions {
                    owners.insert((topic.clone(), *p), m.member_id.clone());
                }
            }
        }
        let started = Instant::now();
        let mut series: BTreeMap<Key, Vec<Sample>> = BTreeMap::new();
        loop {
            for (key, sample) in self.lag_sample(group, &owners).await? {
                series.entry(key).or_default().push(sample);
            }
            let elapsed = started.elapsed();
            progress(elapsed);
            if elapsed >= watch.window {
                break;
            }
            tokio::time::sleep(watch.interval.min(watch.window - elapsed)).await;
        }
        let now_ms = crate::producer::now_ms();
        let mut retention: BTreeMap<String, Option<i64>> = BTreeMap::new();
        let mut out = Vec::with_capacity(series.len());
        for (key, samples) in series {
            let Some(last) = samples.last().copied() else {
                continue;
            };
            let rates = CommitRates::from_samples(&samples);
            let lag = last.lag();
            let drain_time_seconds = match (lag, rates.consume_rate) {
                (0, _) => Some(0.0),
                (_, Some(rate)) if rate > 0.0 => Some(lag as f64 / rate),
                _ => None,
            };
            let (time_lag_ms, retention_left_ms) = if lag == 0 {
                (Some(0), None)
            } else {
                let oldest = last.committed.max(last.log_start);
                let ts = self.timestamp_at(&key.0, key.1, oldest).await?;
                if !retention.contains_key(&key.0) {
                    let ms = self.retention_ms(&key.0).await?;
                    retention.insert(key.0.clone(), ms);
                }
                let retention_ms = retention.get(&key.0).copied().flatten();
                (
                    ts.map(|ts| now_ms.saturating_sub(ts).max(0)),
                    retention_ms
                        .and_then(|ms| ts.map(|ts| ts.saturating_add(ms).saturating_sub(now_ms))),
                )
            };
            out.push(PartitionLag {
                owner: owners.get(&key).cloned(),
                topic: key.0,
                partition: key.1,
                committed: last.committed,
                log_start: last.log_start,
                log_end: last.log_end,
                lag,
                time_lag_ms,
                rates,
                drain_time_seconds,
                retention_left_ms,
                lost: last.committed >= 0 && last.committed < last.log_start,
            });
        }
        Ok(out)
    }

    /// One look at every partition the group committed or is assigned.
    async fn lag_sample(
        &mut self,
        group: &str,
        owners: &BTreeMap<Key, String>,
    ) -> Result<BTreeMap<Key, Sample>> {
        let committed = self.committed_offsets(group).await?;
        let keys: BTreeSet<Key> = committed.keys().chain(owners.keys()).cloned().collect();
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
            let log_start = self
                .list_offsets(&key.0, key.1, OffsetSpec::Earliest)
                .await?;
            let log_end = self.list_offsets(&key.0, key.1, OffsetSpec::Latest).await?;
            let sample = Sample {
                at: Instant::now(),
                committed: committed.get(&key).copied().unwrap_or(-1),
                log_start,
                log_end,
            };
            out.insert(key, sample);
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
