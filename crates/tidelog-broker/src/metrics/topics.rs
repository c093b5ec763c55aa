//! The topic probe: record bytes and messages produced, and record bytes fetched, per
//! topic. Series of deleted topics are dropped at the next scrape, so the label set
//! stays bounded by the topics that exist.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::poison::LockTolerant;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tidelog_controller::quorum::BrokerTraffic;
use tidelog_controller::MetadataImage;
use tidelog_storage::BatchHeader;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TopicLabels {
    topic: String,
}

pub(crate) struct TopicProbe {
    bytes_in: Family<TopicLabels, Counter>,
    messages_in: Family<TopicLabels, Counter>,
    bytes_out: Family<TopicLabels, Counter>,
    /// Every topic a series was made for, so deleted ones can be found without
    /// walking the families.
    seen: std::sync::Mutex<HashSet<String>>,
    /// The node's totals over every topic (deleted ones too), for the console's rates.
    node_bytes_in: AtomicU64,
    node_bytes_out: AtomicU64,
    /// Every broker's totals as the controller leader last told them (each broker's
    /// heartbeat carries its own; the leader's reply carries all).
    cluster: Mutex<BTreeMap<i32, BrokerTraffic>>,
}

impl TopicProbe {
    pub(super) fn register(registry: &mut Registry) -> TopicProbe {
        let probe = TopicProbe {
            bytes_in: Family::default(),
            messages_in: Family::default(),
            bytes_out: Family::default(),
            seen: std::sync::Mutex::new(HashSet::new()),
            node_bytes_in: AtomicU64::new(0),
            node_bytes_out: AtomicU64::new(0),
            cluster: Mutex::new(BTreeMap::new()),
        };
        registry.register(
            "topic_bytes_in",
            "Record-batch bytes appended by producers, per topic",
            probe.bytes_in.clone(),
        );
        registry.register(
            "topic_messages_in",
            "Records appended by producers, per topic",
            probe.messages_in.clone(),
        );
        registry.register(
            "topic_bytes_out",
            "Record-batch bytes sent in Fetch responses, per topic",
            probe.bytes_out.clone(),
        );
        probe
    }

    fn labels(&self, topic: &str) -> TopicLabels {
        let mut seen = self.seen.locked();
        if !seen.contains(topic) {
            seen.insert(topic.to_string());
        }
        TopicLabels {
            topic: topic.to_string(),
        }
    }

    /// A producer's append of `bytes` holding `records` records.
    pub(crate) fn produced(&self, topic: &str, bytes: usize, records: u32) {
        let labels = self.labels(topic);
        self.bytes_in.get_or_create(&labels).inc_by(bytes as u64);
        self.node_bytes_in
            .fetch_add(bytes as u64, Ordering::Relaxed);
        self.messages_in
            .get_or_create(&labels)
            .inc_by(u64::from(records));
    }

    /// A producer's record batches for one partition, as received: counted before the
    /// append, so a refused or duplicate batch counts too (it crossed the network).
    pub(crate) fn produced_batches(&self, topic: &str, batches: &[u8]) {
        let mut records: u32 = 0;
        let mut at = 0;
        while let Some(h) = batches.get(at..).and_then(|b| BatchHeader::new(b).ok()) {
            records = records.saturating_add(u32::try_from(h.record_count()).unwrap_or(0));
            match h.total_size() {
                Some(size) if size > 0 => at = at.saturating_add(size),
                _ => break,
            }
        }
        self.produced(topic, batches.len(), records);
    }

    /// Record bytes of one partition put into a Fetch response.
    pub(crate) fn fetched(&self, topic: &str, bytes: u64) {
        if bytes > 0 {
            self.bytes_out
                .get_or_create(&self.labels(topic))
                .inc_by(bytes);
            self.node_bytes_out.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Record-batch bytes produced to and fetched from this node since it started.
    pub(crate) fn node_totals(&self) -> (u64, u64) {
        (
            self.node_bytes_in.load(Ordering::Relaxed),
            self.node_bytes_out.load(Ordering::Relaxed),
        )
    }

    /// This node's totals as a heartbeat reports them, sampled now.
    pub(crate) fn node_traffic(&self) -> BrokerTraffic {
        let (bytes_in, bytes_out) = self.node_totals();
        BrokerTraffic {
            bytes_in,
            bytes_out,
            sampled_at_ms: crate::context::now_ms(),
        }
    }

    /// Every broker's totals, from the latest heartbeat reply.
    pub(crate) fn set_cluster_traffic(&self, traffic: BTreeMap<i32, BrokerTraffic>) {
        *self.cluster.locked() = traffic;
    }

    /// Every broker's totals as last heard (this node's among them, as it reported
    /// them at its last heartbeat).
    pub(crate) fn cluster_traffic(&self) -> BTreeMap<i32, BrokerTraffic> {
        self.cluster.locked().clone()
    }

    /// Drops the series of topics that no longer exist.
    pub(super) fn forget_deleted(&self, image: &MetadataImage) {
        let mut seen = self.seen.locked();
        seen.retain(|topic| {
            if image.topic(topic).is_some() {
                return true;
            }
            let labels = TopicLabels {
                topic: topic.clone(),
            };
            self.bytes_in.remove(&labels);
            self.messages_in.remove(&labels);
            self.bytes_out.remove(&labels);
            false
        });
    }
}
