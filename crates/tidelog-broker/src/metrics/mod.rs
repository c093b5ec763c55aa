//! Prometheus metrics: one probe per subsystem, all registered on one explicit
//! [`Registry`] owned by [`Metrics`] (no process-wide state, so a test can start two
//! nodes in one process and read each one's figures).
//!
//! Two kinds of figure live here:
//! - *event* counters and histograms, bumped where the event happens: `requests`
//!   (connections and every request), `quotas` (client quota throttling), `topics` (bytes in/out per topic), `shares`
//!   (per share partition: redelivered, archived and dead-lettered records, and the
//!   in-flight, acquired and lag gauges its leader sets at each fetch and
//!   acknowledgement), `storage`
//!   (fsync latency, retention, compaction), `replication` (ISR changes, elections);
//! - *state* gauges, computed when `/metrics` is scraped from what the node already
//!   knows: `cluster` (per-partition offsets, size, segments; under-replicated,
//!   offline and under-min-ISR counts; open file descriptors) and `groups` (consumer
//!   lag in messages and seconds, its trend, retention headroom, generations).
//!
//! `lag_history` keeps those group figures over time (sampled by a task of its own)
//! for the console's lag chart and at-risk banner.
//!
//! `docs/operations.md` lists every metric; keep it in step with the probes.

mod cluster;
mod group_source;
mod groups;
mod labels;
pub(crate) mod lag_history;
mod node_view;
mod quotas;
pub(crate) mod remote_logs;
mod replication;
mod requests;
mod shares;
mod storage;
pub(crate) mod tail;
mod topics;
mod trend;
pub(crate) mod views;

use std::sync::Arc;

use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

pub(crate) use groups::GroupProbe;
pub(crate) use labels::error_name;
pub(crate) use lag_history::LagHistory;
pub(crate) use node_view::{connect_to_node, NodeView};
pub(crate) use quotas::QuotaProbe;
pub(crate) use replication::ReplicationProbe;
pub(crate) use requests::{RequestProbe, RequestTiming};
pub(crate) use shares::ShareProbe;
pub(crate) use storage::{StorageOperation, StorageProbe};
pub(crate) use topics::TopicProbe;

/// Every probe of one node, and the registry they are registered on.
pub(crate) struct Metrics {
    registry: Registry,
    pub(crate) requests: RequestProbe,
    pub(crate) topics: TopicProbe,
    pub(crate) storage: Arc<StorageProbe>,
    pub(crate) replication: Arc<ReplicationProbe>,
    pub(crate) groups: Arc<GroupProbe>,
    /// Lag over time per group, filled by the lag-history sampler task.
    pub(crate) lag_history: Arc<LagHistory>,
    pub(crate) quotas: QuotaProbe,
    pub(crate) shares: ShareProbe,
}

impl Metrics {
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::with_prefix("tidelog");
        let requests = RequestProbe::register(&mut registry);
        let topics = TopicProbe::register(&mut registry);
        let storage = Arc::new(StorageProbe::register(&mut registry));
        let replication = Arc::new(ReplicationProbe::register(&mut registry));
        let groups = Arc::new(GroupProbe::new());
        let quotas = QuotaProbe::register(&mut registry);
        let shares = ShareProbe::register(&mut registry);
        registry.register(
            "build",
            "The running tidelog version",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        Metrics {
            registry,
            requests,
            topics,
            storage,
            replication,
            groups,
            lag_history: Arc::new(LagHistory::new()),
            quotas,
            shares,
        }
    }

    /// Every metric in the Prometheus text format (ends with `# EOF`): the event
    /// figures, and with `node` the gauges computed from its state. Blocking: those
    /// take partition locks and may read a batch header from disk.
    pub(crate) fn render(&self, node: Option<&Arc<NodeView>>) -> String {
        if let Some(node) = node {
            self.topics.forget_deleted(&node.metadata.image());
        }
        let mut out = String::with_capacity(16 * 1024);
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!(error = %e, "encoding metrics failed");
        }
        let Some(node) = node else { return out };
        // The state gauges are a registry of their own, built for this scrape around
        // the node's view, appended before the one `# EOF`.
        let mut state = Registry::with_prefix("tidelog");
        state.register_collector(Box::new(cluster::ClusterCollector::new(Arc::clone(node))));
        state.register_collector(Box::new(groups::GroupCollector::new(
            Arc::clone(node),
            Arc::clone(&self.groups),
        )));
        let mut gauges = String::with_capacity(16 * 1024);
        if let Err(e) = prometheus_client::encoding::text::encode(&mut gauges, &state) {
            tracing::error!(error = %e, "encoding metrics failed");
            return out;
        }
        if let Some(events) = out.strip_suffix(EOF) {
            let mut joined = String::with_capacity(events.len() + gauges.len());
            joined.push_str(events);
            joined.push_str(&gauges);
            out = joined;
        }
        out
    }
}

const EOF: &str = "# EOF\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_without_a_node_lists_the_event_metrics_and_ends_with_eof() {
        let metrics = Metrics::new();
        metrics.topics.produced("orders", 100, 3);
        let text = metrics.render(None);
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(text.contains("tidelog_topic_bytes_in_total{topic=\"orders\"} 100\n"));
        assert!(text.contains("tidelog_topic_messages_in_total{topic=\"orders\"} 3\n"));
        assert!(text.contains("# TYPE tidelog_log_flush_seconds histogram\n"));
        assert!(text.contains("tidelog_connections_active 0\n"));
        let version = env!("CARGO_PKG_VERSION");
        assert!(
            text.contains(&format!("tidelog_build_info{{version=\"{version}\"}} 1\n")),
            "{text}"
        );
    }
}
