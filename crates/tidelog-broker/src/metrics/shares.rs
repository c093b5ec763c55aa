//! The share probe: per share partition (group, topic, partition) this node led, the
//! records copied to the group's KIP-1191 dead-letter topic. The series are bounded by
//! the share partitions a node keeps (`share::MAX_SHARE_PARTITIONS`) over its life.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SharePartitionLabels {
    group: String,
    topic: String,
    partition: i32,
}

pub(crate) struct ShareProbe {
    dead_lettered: Family<SharePartitionLabels, Counter>,
}

impl ShareProbe {
    pub(super) fn register(registry: &mut Registry) -> ShareProbe {
        let probe = ShareProbe {
            dead_lettered: Family::default(),
        };
        registry.register(
            "share_partition_dead_lettered_records",
            "Records a share group gave up on (REJECT or delivery limit) copied to its dead-letter topic (KIP-1191), per share partition",
            probe.dead_lettered.clone(),
        );
        probe
    }

    /// `records` records of `group` on `topic`-`partition` went to its dead-letter topic.
    pub(crate) fn dead_lettered(&self, group: &str, topic: &str, partition: i32, records: usize) {
        self.dead_lettered
            .get_or_create(&SharePartitionLabels {
                group: group.to_string(),
                topic: topic.to_string(),
                partition,
            })
            .inc_by(u64::try_from(records).unwrap_or(u64::MAX));
    }
}
