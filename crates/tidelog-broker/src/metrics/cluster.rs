//! Scrape-time state: each hosted partition's offsets, size and segments; the
//! partition-health counts an operator alerts on; open file descriptors. Nothing here
//! is kept between scrapes: every figure is read from the logs and the metadata image
//! when Prometheus asks.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use super::NodeView;
use crate::topic_config;

/// One hosted partition's log, read at one instant.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct PartitionStats {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) log_start_offset: i64,
    pub(crate) log_end_offset: i64,
    pub(crate) high_watermark: i64,
    pub(crate) size_bytes: u64,
    pub(crate) segments: usize,
    pub(crate) producer_ids: usize,
}

/// Partition counts as this node's metadata image shows them.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub(crate) struct PartitionHealth {
    /// Partitions in the cluster.
    pub(crate) partitions: usize,
    /// Partitions this node leads.
    pub(crate) leader_partitions: usize,
    /// Led here, with fewer in-sync replicas than replicas.
    pub(crate) under_replicated_partitions: usize,
    /// Led here, with fewer in-sync replicas than the topic's min.insync.replicas:
    /// acks=all produces are refused.
    pub(crate) under_min_isr_partitions: usize,
    /// Anywhere in the cluster, without a live leader: unreadable and unwritable.
    pub(crate) offline_partitions: usize,
}

/// Reads every hosted partition's log. Partitions closed meanwhile are skipped.
pub(crate) fn partition_stats(node: &NodeView) -> Vec<PartitionStats> {
    let mut out: Vec<PartitionStats> = node
        .replicas
        .all()
        .iter()
        .filter_map(|p| {
            p.with_log(|log| {
                Ok(PartitionStats {
                    topic: p.topic.clone(),
                    partition: p.index,
                    log_start_offset: log.log_start_offset(),
                    log_end_offset: log.log_end_offset(),
                    high_watermark: log.high_watermark(),
                    size_bytes: log.size_bytes(),
                    segments: log.segment_count(),
                    producer_ids: log.producer_state().len(),
                })
            })
            .ok()
        })
        .collect();
    out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    out
}

/// The health counts over the topics `counted` lets through.
pub(crate) fn partition_health(node: &NodeView, counted: &dyn Fn(&str) -> bool) -> PartitionHealth {
    let image = node.metadata.image();
    let me = node.node_id;
    let live = image.live_broker_ids();
    let mut health = PartitionHealth::default();
    // Under the dynamic configs in force (a cluster default min.insync.replicas).
    let broker = crate::dynamic_config::resolve(&node.config, &image);
    for topic in image.topics().filter(|t| counted(&t.name)) {
        let min_isr = topic_config::effective(&broker, &topic.configs)
            .get("min.insync.replicas")
            .and_then(|(v, _)| v.trim().parse::<usize>().ok())
            .unwrap_or(1);
        for p in topic.partitions.values() {
            health.partitions += 1;
            if p.leader < 0 || !live.contains(&p.leader) {
                health.offline_partitions += 1;
            }
            if p.leader == me {
                health.leader_partitions += 1;
                if p.isr.len() < p.replicas.len() {
                    health.under_replicated_partitions += 1;
                }
                if p.isr.len() < min_isr {
                    health.under_min_isr_partitions += 1;
                }
            }
        }
    }
    health
}

/// Open file descriptors and the soft limit, from /proc (Linux); `None` elsewhere.
fn file_descriptors() -> Option<(u64, Option<u64>)> {
    let open = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    let limit = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            limits
                .lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3))
                .and_then(|v| v.parse().ok())
        });
    Some((open, limit))
}

pub(super) struct ClusterCollector {
    node: Arc<NodeView>,
}

impl ClusterCollector {
    pub(super) fn new(node: Arc<NodeView>) -> Self {
        ClusterCollector { node }
    }
}

impl fmt::Debug for ClusterCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClusterCollector")
    }
}

/// Writes one gauge without labels.
pub(super) fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: i64,
) -> fmt::Result {
    let metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(value).encode(metric)
}

/// Writes one gauge family; `labels` names the label keys, each row gives their values.
pub(super) fn gauge_family<'a, V: prometheus_client::encoding::EncodeGaugeValue + Copy>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl Iterator<Item = (Vec<(&'static str, Cow<'a, str>)>, V)>,
) -> fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in rows {
        let series = metric.encode_family(&labels)?;
        ConstGauge::new(value).encode(series)?;
    }
    Ok(())
}

impl Collector for ClusterCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        if let Some((open, limit)) = file_descriptors() {
            gauge(
                &mut encoder,
                "open_file_descriptors",
                "File descriptors the process holds open (segments, indexes, sockets)",
                i64::try_from(open).unwrap_or(i64::MAX),
            )?;
            if let Some(limit) = limit {
                gauge(
                    &mut encoder,
                    "max_file_descriptors",
                    "The process's soft limit on open file descriptors",
                    i64::try_from(limit).unwrap_or(i64::MAX),
                )?;
            }
        }
        let health = partition_health(&self.node, &|_| true);
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        for (name, help, value) in [
            ("partitions", "Partitions in the cluster, as this node's metadata shows", health.partitions),
            ("leader_partitions", "Partitions this node leads", health.leader_partitions),
            ("under_replicated_partitions", "Partitions led here whose ISR is smaller than their replica set", health.under_replicated_partitions),
            ("under_min_isr_partitions", "Partitions led here whose ISR is smaller than min.insync.replicas (acks=all produces fail)", health.under_min_isr_partitions),
            ("offline_partitions", "Partitions without a live leader", health.offline_partitions),
        ] {
            gauge(&mut encoder, name, help, count(value))?;
        }
        let stats = partition_stats(&self.node);
        fn labels(s: &PartitionStats) -> Vec<(&'static str, Cow<'_, str>)> {
            vec![
                ("topic", Cow::Borrowed(s.topic.as_str())),
                ("partition", Cow::Owned(s.partition.to_string())),
            ]
        }
        type Field = fn(&PartitionStats) -> i64;
        let fields: [(&str, &str, Field); 5] = [
            (
                "partition_log_start_offset",
                "First offset still in the log",
                |s| s.log_start_offset,
            ),
            (
                "partition_log_end_offset",
                "Offset the next appended record gets",
                |s| s.log_end_offset,
            ),
            (
                "partition_high_watermark",
                "Offset up to which records are committed and readable",
                |s| s.high_watermark,
            ),
            (
                "partition_size_bytes",
                "Bytes of segment files on disk",
                |s| i64::try_from(s.size_bytes).unwrap_or(i64::MAX),
            ),
            ("partition_segments", "Segments in the log", |s| {
                i64::try_from(s.segments).unwrap_or(i64::MAX)
            }),
        ];
        for (name, help, field) in fields {
            gauge_family(
                &mut encoder,
                name,
                help,
                stats.iter().map(|s| (labels(s), field(s))),
            )?;
        }
        gauge(
            &mut encoder,
            "producer_state_entries",
            "Idempotent producers tracked across hosted partitions (deduplication state)",
            count(stats.iter().map(|s| s.producer_ids).sum()),
        )
    }
}
