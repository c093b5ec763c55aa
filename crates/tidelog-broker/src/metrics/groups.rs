//! The consumer-group probe: the seed's silent failures made visible. Per group and
//! partition: lag in messages, time lag (age of the oldest unread record), drain time
//! (lag / consumed rate), the trend d(lag)/dt, and the seconds left before retention
//! deletes what the group has not read; per group: members,
//! generation and rebalances (a generation rising every few minutes is a rebalance
//! loop).
//!
//! # Where the figures come from
//! The group coordinator (`crate::group`) owns groups and committed offsets; it is
//! read only through [`GroupLagSource`] (implemented for it in `group_source.rs`), a
//! copy taken under its lock. Everything else (high watermarks, record timestamps,
//! retention) is read here from the partitions, so the coordinator reports only what
//! it alone knows.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::MetricType;
use tidelog_storage::{BatchHeader, BATCH_HEADER_LEN};

use super::cluster::gauge_family;
use super::labels::escaped;
use super::remote_logs::RemoteLogs;
use super::trend::{Observation, TrendTracker};
use super::NodeView;
use crate::config::BrokerConfig;
use crate::context::now_ms;
use crate::group::consumer::stats::ConsumerGroupStats;
use crate::group::member_summary::MemberSummary;
use crate::poison::LockTolerant;
use crate::replica::Partition;
use tidelog_controller::MetadataImage;

/// What the group coordinator knows of one group.
#[derive(Debug, Clone, Default)]
pub(crate) struct GroupStatus {
    pub(crate) group_id: String,
    /// Kafka's state name: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead.
    pub(crate) state: String,
    /// "consumer" for consumer groups, empty for offsets-only groups.
    pub(crate) protocol_type: String,
    /// `classic`, or `consumer` for a KIP-848 group; empty for offsets-only groups.
    pub(crate) group_type: String,
    pub(crate) generation: i32,
    pub(crate) members: usize,
    /// The members, described (at most `member_summary::MAX_MEMBERS_SHOWN`).
    pub(crate) member_list: Vec<MemberSummary>,
    pub(crate) committed: Vec<CommittedOffset>,
}

/// One committed offset: the next offset the group will read.
#[derive(Debug, Clone)]
pub(crate) struct CommittedOffset {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) offset: i64,
}

/// What the probe needs from a group coordinator; see the module docs.
pub(crate) trait GroupLagSource: Send + Sync {
    /// Every group this node coordinates. Called per scrape and per `/v1/groups`
    /// request, off the async runtime; keep it a copy out of the coordinator's state.
    fn groups(&self) -> Vec<GroupStatus>;
}

/// One group as the metrics and `/v1/groups` show it.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct GroupLag {
    pub(crate) group: String,
    /// `classic`, or `consumer` for a KIP-848 group; empty for offsets-only groups.
    pub(crate) group_type: String,
    pub(crate) state: String,
    pub(crate) protocol_type: String,
    pub(crate) generation: i32,
    pub(crate) members: usize,
    /// Generation increases this node has seen since it started.
    pub(crate) rebalances: u64,
    /// Each member: who it is, its epoch and its partitions (`members` counts them
    /// all; at most `member_summary::MAX_MEMBERS_SHOWN` are described).
    pub(crate) member_details: Vec<MemberSummary>,
    /// Per partition with a committed offset (a share group's: its share-partition
    /// start offset, see [`share_start_offsets`]) hosted here, its lag.
    pub(crate) partitions: Vec<PartitionLag>,
}

/// A share group's read positions on the share partitions this node leads: each one's
/// start offset (KIP-932's SPSO), below which every record is acknowledged, so the
/// records from it up to the high watermark are what the group has yet to finish.
fn share_start_offsets(node: &NodeView, group: &str) -> Vec<CommittedOffset> {
    let image = node.metadata.image();
    node.shares
        .start_offsets(group)
        .into_iter()
        .filter_map(|(topic_id, partition, offset)| {
            Some(CommittedOffset {
                topic: image.topic_by_id(&topic_id)?.name.clone(),
                partition,
                offset,
            })
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct PartitionLag {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) committed_offset: i64,
    pub(crate) high_watermark: i64,
    pub(crate) log_start_offset: i64,
    /// Committed records the group has not read: high watermark minus committed offset.
    pub(crate) lag_messages: i64,
    /// Time lag: age of the batch holding the first unread record; 0 when nothing is
    /// unread.
    pub(crate) time_lag_seconds: f64,
    /// The same figure under its first name, kept because `/v1/groups` field names are
    /// stable (docs/operations.md); it was ambiguous next to the CLI's drain time.
    pub(crate) lag_seconds: f64,
    /// Drain time: lag / consumed rate, the rate measured between the first and last
    /// commit observed (see `trend.rs`); 0 when nothing is unread, None while fewer
    /// than two commits were observed.
    pub(crate) drain_time_seconds: Option<f64>,
    /// d(lag)/dt in messages per second over recent observations; positive = falling behind.
    pub(crate) lag_trend_per_second: f64,
    /// Seconds until retention deletes the segment holding the first unread record (0
    /// when it already did): by `retention.ms`, its newest timestamp + retention.ms;
    /// by `retention.bytes`, when the bytes appended after it reach the limit at the
    /// partition's current append rate; the sooner of the two. None when nothing is
    /// unread, or neither bound applies (unbounded, or no bytes arriving).
    pub(crate) retention_headroom_seconds: Option<f64>,
}

/// What the log says about one partition, for the lag arithmetic.
#[derive(Debug, Clone, Copy)]
pub(super) struct LogView {
    pub(super) log_start: i64,
    pub(super) high_watermark: i64,
    /// Timestamp of the batch holding the first unread record, if it could be read.
    pub(super) first_unread_ts: Option<i64>,
    /// Largest timestamp of the segment holding the first unread record.
    pub(super) segment_max_ts: Option<i64>,
    /// retention.ms when time retention deletes this topic's segments.
    pub(super) retention_ms: Option<i64>,
    /// retention.bytes when size retention deletes this topic's segments.
    pub(super) retention_bytes: Option<i64>,
    /// Bytes of the segments after the one holding the first unread record: that
    /// segment goes once they reach retention.bytes.
    pub(super) bytes_after_unread_segment: Option<u64>,
    /// Bytes appended per second, measured across looks (`trend.rs`).
    pub(super) append_bytes_per_second: Option<f64>,
}

/// The lag arithmetic, free of I/O so it can be tested exactly.
pub(super) fn lag_figures(committed: i64, log: &LogView, now_ms: i64) -> (i64, f64, Option<f64>) {
    let lag = lag_of(committed, log.high_watermark);
    if lag == 0 {
        return (0, 0.0, None);
    }
    let seconds = log
        .first_unread_ts
        .map_or(0.0, |ts| now_ms.saturating_sub(ts).max(0) as f64 / 1000.0);
    let bounded = log.retention_ms.is_some() || log.retention_bytes.is_some();
    let headroom = if !bounded {
        None
    } else if committed < log.log_start {
        Some(0.0)
    } else {
        let by_time = log.retention_ms.and_then(|retention| {
            log.segment_max_ts.map(|max_ts| {
                let deleted_at = max_ts.saturating_add(retention);
                deleted_at.saturating_sub(now_ms).max(0) as f64 / 1000.0
            })
        });
        match (by_time, size_headroom(log)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    };
    (lag, seconds, headroom)
}

/// Seconds until `retention.bytes` deletes the segment holding the first unread
/// record: it goes once the bytes after it reach the limit (0 when they already
/// have: the next retention pass deletes it); the bytes still to come, at the
/// append rate. None without a size bound or while nothing is appended.
pub(super) fn size_headroom(log: &LogView) -> Option<f64> {
    let limit = log.retention_bytes?;
    let ahead = i64::try_from(log.bytes_after_unread_segment?).unwrap_or(i64::MAX);
    let to_come = limit.saturating_sub(ahead);
    if to_come <= 0 {
        return Some(0.0);
    }
    match log.append_bytes_per_second {
        Some(rate) if rate > 0.0 => Some(to_come as f64 / rate),
        _ => None,
    }
}

/// Committed records the group has not read.
fn lag_of(committed: i64, high_watermark: i64) -> i64 {
    high_watermark.saturating_sub(committed).max(0)
}

/// Lag / consumed rate, in seconds: how long the group needs to read what is unread now
/// at the rate it reads (records still arriving make catching up take longer).
pub(super) fn drain_time(lag: i64, consume_rate: Option<f64>) -> Option<f64> {
    match (lag, consume_rate) {
        (0, _) => Some(0.0),
        (_, Some(rate)) if rate > 0.0 => Some(lag as f64 / rate),
        _ => None,
    }
}

/// Reads what [`lag_figures`] needs from one partition.
fn log_view(p: &Partition, committed: i64) -> Option<(LogView, u64)> {
    let (mut view, slice, log_bytes) = p
        .with_log(|log| {
            let start = log.log_start_offset();
            let hw = log.high_watermark();
            let from = committed.max(start);
            let config = log.config();
            let deletes = config.cleanup_policy.delete;
            let view = LogView {
                log_start: start,
                high_watermark: hw,
                first_unread_ts: None,
                segment_max_ts: log.segment_max_timestamp_at(from).map(|(ts, _)| ts),
                retention_ms: (deletes && config.retention_ms >= 0).then_some(config.retention_ms),
                retention_bytes: (deletes && config.retention_bytes >= 0)
                    .then_some(config.retention_bytes),
                bytes_after_unread_segment: log.bytes_after_segment_at(from),
                append_bytes_per_second: None,
            };
            let slice = if from < hw {
                log.read(from, 1, hw).ok().and_then(|r| r.slice)
            } else {
                None
            };
            Ok((view, slice, log.size_bytes()))
        })
        .ok()?;
    // The header read happens outside the partition lock.
    if let Some(slice) = slice.filter(|s| s.len >= BATCH_HEADER_LEN as u64) {
        let mut head = [0u8; BATCH_HEADER_LEN];
        if slice.file.read_exact_at(&mut head, slice.position).is_ok() {
            let h = BatchHeader::from_array(&head);
            view.first_unread_ts = Some(if h.is_log_append_time() {
                h.max_timestamp()
            } else {
                h.base_timestamp()
            });
        }
    }
    Some((view, log_bytes))
}

/// The probe: what must be remembered between looks.
#[derive(Default)]
pub(crate) struct GroupProbe {
    /// What the leaders of partitions this node holds no replica of last said.
    pub(crate) remote: RemoteLogs,
    trends: Mutex<TrendTracker>,
    /// Per group: the last generation seen and the increases counted.
    generations: Mutex<HashMap<String, (i32, u64)>>,
}

impl GroupProbe {
    pub(super) fn new() -> GroupProbe {
        GroupProbe::default()
    }

    /// A partition this node holds no replica of, as its leader last described it
    /// (see `remote_logs`): no bytes are known, and the retention edge counts from the
    /// first unread record's timestamp.
    fn remote_view(
        &self,
        image: &MetadataImage,
        defaults: &BrokerConfig,
        c: &CommittedOffset,
    ) -> Option<(LogView, u64)> {
        let remote = self.remote.view(&c.topic, c.partition, c.offset)?;
        let configs = image
            .topic(&c.topic)
            .map(|t| t.configs.clone())
            .unwrap_or_default();
        let config = crate::topic_config::log_config(defaults, &configs);
        let deletes = config.cleanup_policy.delete;
        let first_unread_ts = remote.first_unread.map(|(_, ts)| ts);
        let view = LogView {
            log_start: remote.log_start,
            high_watermark: remote.high_watermark,
            first_unread_ts,
            segment_max_ts: first_unread_ts,
            retention_ms: (deletes && config.retention_ms >= 0).then_some(config.retention_ms),
            retention_bytes: None,
            bytes_after_unread_segment: None,
            append_bytes_per_second: None,
        };
        Some((view, 0))
    }

    /// Every group this node coordinates, with its lag figures. Blocking: reads batch
    /// headers from disk.
    pub(crate) fn snapshot(&self, node: &NodeView) -> Vec<GroupLag> {
        self.snapshot_from(&*node.groups, node)
    }

    pub(super) fn snapshot_from(
        &self,
        source: &dyn GroupLagSource,
        node: &NodeView,
    ) -> Vec<GroupLag> {
        let mut groups = source.groups();
        groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        let now = Instant::now();
        let now_ms = now_ms();
        let mut trends = self.trends.locked();
        let mut generations = self.generations.locked();
        let mut alive = HashSet::new();
        let mut out = Vec::with_capacity(groups.len());
        let image = node.metadata.image();
        // The topic defaults as this node applies them (dynamic configs included).
        let defaults = crate::dynamic_config::resolve(&node.config, &image);
        for mut g in groups {
            if g.group_type == "share" {
                g.committed = share_start_offsets(node, &g.group_id);
            }
            let entry = generations
                .entry(g.group_id.clone())
                .or_insert((g.generation, 0));
            if g.generation > entry.0 {
                entry.1 += u64::try_from(g.generation - entry.0).unwrap_or(0);
            }
            entry.0 = g.generation;
            let rebalances = entry.1;
            let mut partitions = Vec::with_capacity(g.committed.len());
            for c in &g.committed {
                let local = node.replicas.get(&c.topic, c.partition);
                let found = match local {
                    Some(p) => log_view(&p, c.offset),
                    None => self.remote_view(&image, &defaults, c),
                };
                let Some((mut view, log_bytes)) = found else {
                    continue;
                };
                let key = (g.group_id.clone(), c.topic.clone(), c.partition);
                let seen = Observation {
                    at: now,
                    lag: lag_of(c.offset, view.high_watermark),
                    committed: c.offset,
                    log_bytes,
                };
                let rates = trends.observe(key.clone(), seen);
                view.append_bytes_per_second = rates.append_bytes_per_second;
                let (lag, seconds, headroom) = lag_figures(c.offset, &view, now_ms);
                alive.insert(key);
                partitions.push(PartitionLag {
                    topic: c.topic.clone(),
                    partition: c.partition,
                    committed_offset: c.offset,
                    high_watermark: view.high_watermark,
                    log_start_offset: view.log_start,
                    lag_messages: lag,
                    time_lag_seconds: seconds,
                    lag_seconds: seconds,
                    drain_time_seconds: drain_time(lag, rates.consume_rate),
                    lag_trend_per_second: rates.trend,
                    retention_headroom_seconds: headroom,
                });
            }
            partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
            out.push(GroupLag {
                group: g.group_id,
                group_type: g.group_type,
                state: g.state,
                protocol_type: g.protocol_type,
                generation: g.generation,
                members: g.members,
                rebalances,
                member_details: g.member_list.iter().map(|m| m.named(&image)).collect(),
                partitions,
            });
        }
        trends.retain(&alive);
        generations.retain(|group, _| out.iter().any(|g| &g.group == group));
        out
    }
}

pub(super) struct GroupCollector {
    node: Arc<NodeView>,
    probe: Arc<GroupProbe>,
}

impl GroupCollector {
    pub(super) fn new(node: Arc<NodeView>, probe: Arc<GroupProbe>) -> Self {
        GroupCollector { node, probe }
    }
}

impl fmt::Debug for GroupCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GroupCollector")
    }
}

impl Collector for GroupCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let groups = self.probe.snapshot(&self.node);
        let group_label = |g: &GroupLag| vec![("group", escaped(&g.group).into_owned().into())];
        type GroupField = fn(&GroupLag) -> i64;
        let per_group: [(&str, &str, GroupField); 2] = [
            ("group_members", "Members of the group", |g| {
                i64::try_from(g.members).unwrap_or(i64::MAX)
            }),
            (
                "group_generation",
                "The group's generation; rising every few minutes is a rebalance loop",
                |g| i64::from(g.generation),
            ),
        ];
        for (name, help, field) in per_group {
            gauge_family(
                &mut encoder,
                name,
                help,
                groups.iter().map(|g| (group_label(g), field(g))),
            )?;
        }
        gauge_family(
            &mut encoder,
            "group_state",
            "1 for the group's current state",
            groups.iter().map(|g| {
                let mut labels = group_label(g);
                labels.push(("state", g.state.clone().into()));
                (labels, 1i64)
            }),
        )?;
        {
            let mut metric = encoder.encode_descriptor(
                "group_rebalances",
                "Rebalances (generation increases) this node has seen since it started",
                None,
                MetricType::Counter,
            )?;
            for g in &groups {
                let labels = group_label(g);
                ConstCounter::new(g.rebalances).encode(metric.encode_family(&labels)?)?;
            }
        }
        encode_consumer_protocol(
            &mut encoder,
            &groups,
            &self.node.groups.config.consumer_stats,
        )?;
        let rows = || {
            groups.iter().flat_map(|g| {
                g.partitions.iter().map(move |p| {
                    let labels = vec![
                        ("group", escaped(&g.group).into_owned().into()),
                        ("topic", p.topic.clone().into()),
                        ("partition", p.partition.to_string().into()),
                    ];
                    (labels, p)
                })
            })
        };
        gauge_family(
            &mut encoder,
            "group_committed_offset",
            "The group's committed offset (next offset it reads)",
            rows().map(|(l, p)| (l, p.committed_offset)),
        )?;
        gauge_family(
            &mut encoder,
            "group_lag_messages",
            "Committed records the group has not read",
            rows().map(|(l, p)| (l, p.lag_messages)),
        )?;
        gauge_family(
            &mut encoder,
            "group_time_lag_seconds",
            "Time lag: age of the oldest unread batch; 0 when caught up",
            rows().map(|(l, p)| (l, p.time_lag_seconds)),
        )?;
        gauge_family(
            &mut encoder,
            "group_drain_time_seconds",
            "Drain time: lag / consumed rate between observed commits; absent until two commits were observed",
            rows().filter_map(|(l, p)| p.drain_time_seconds.map(|s| (l, s))),
        )?;
        gauge_family(
            &mut encoder,
            "group_lag_trend_messages_per_second",
            "d(lag)/dt over recent observations; positive means the group falls behind",
            rows().map(|(l, p)| (l, p.lag_trend_per_second)),
        )?;
        gauge_family(
            &mut encoder,
            "group_retention_headroom_seconds",
            "Seconds until retention (retention.ms, or retention.bytes at the current append rate) deletes the oldest unread record (0: already deleted); absent when caught up or retention is unbounded",
            rows().filter_map(|(l, p)| p.retention_headroom_seconds.map(|s| (l, s))),
        )
    }
}

/// Kafka's states of a KIP-848 group.
const CONSUMER_GROUP_STATES: [&str; 4] = ["Empty", "Assigning", "Reconciling", "Stable"];

/// The KIP-848 groups of this node by state, and what their steps counted: group
/// epoch bumps, partitions members were asked to revoke, reconciliation time.
fn encode_consumer_protocol(
    encoder: &mut DescriptorEncoder,
    groups: &[GroupLag],
    stats: &ConsumerGroupStats,
) -> fmt::Result {
    gauge_family(
        encoder,
        "consumer_groups",
        "KIP-848 consumer groups this node coordinates, by state",
        CONSUMER_GROUP_STATES.iter().map(|state| {
            let n = groups
                .iter()
                .filter(|g| g.group_type == "consumer" && g.state == *state)
                .count();
            (
                vec![("state", (*state).into())],
                i64::try_from(n).unwrap_or(i64::MAX),
            )
        }),
    )?;
    let counters = [
        (
            "consumer_group_rebalances",
            "Group epoch bumps of KIP-848 groups this node coordinated since it started",
            stats.rebalances(),
        ),
        (
            "consumer_group_revocations",
            "Partitions members of KIP-848 groups were asked to revoke since this node started",
            stats.revocations(),
        ),
    ];
    for (name, help, value) in counters {
        let metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
        ConstCounter::new(value).encode(metric)?;
    }
    let metric = encoder.encode_descriptor(
        "consumer_group_reconciliation_seconds",
        "From a member's first heartbeat behind its group's assignment epoch to the one that finds it there with nothing left to revoke",
        None,
        MetricType::Histogram,
    )?;
    stats.reconciliation().encode(metric)
}

#[cfg(test)]
#[path = "groups_tests.rs"]
mod tests;
