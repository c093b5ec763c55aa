//! The share probe: per share partition (group, topic, partition) this node led, its
//! records in flight, acquired and behind (lag) as last seen, and the records it
//! delivered again, gave up on (archived) and copied to the group's KIP-1191
//! dead-letter topic. The series are bounded by the share partitions a node keeps
//! (`share::MAX_SHARE_PARTITIONS`) over its life.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::share::partition::{ShareGauges, ShareTransitions};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SharePartitionLabels {
    group: String,
    topic: String,
    partition: i32,
}

pub(crate) struct ShareProbe {
    in_flight: Family<SharePartitionLabels, Gauge>,
    acquired: Family<SharePartitionLabels, Gauge>,
    lag: Family<SharePartitionLabels, Gauge>,
    redelivered: Family<SharePartitionLabels, Counter>,
    archived: Family<SharePartitionLabels, Counter>,
    dead_lettered: Family<SharePartitionLabels, Counter>,
}

fn labels(group: &str, topic: &str, partition: i32) -> SharePartitionLabels {
    SharePartitionLabels {
        group: group.to_string(),
        topic: topic.to_string(),
        partition,
    }
}

fn gauge_value(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl ShareProbe {
    pub(super) fn register(registry: &mut Registry) -> ShareProbe {
        let probe = ShareProbe {
            in_flight: Family::default(),
            acquired: Family::default(),
            lag: Family::default(),
            redelivered: Family::default(),
            archived: Family::default(),
            dead_lettered: Family::default(),
        };
        registry.register(
            "share_partition_in_flight_records",
            "Records between a share partition's start and end offsets not finished with (available, acquired, or on their way to the dead-letter topic), as last seen by this node while leading it",
            probe.in_flight.clone(),
        );
        registry.register(
            "share_partition_acquired_records",
            "Records of a share partition acquired by a member (under an acquisition lock), as last seen by this node while leading it",
            probe.acquired.clone(),
        );
        registry.register(
            "share_partition_lag",
            "Offsets of a share partition between its start offset and the high watermark not yet finished with (acknowledged or archived), as last seen by this node while leading it",
            probe.lag.clone(),
        );
        registry.register(
            "share_partition_redelivered_records",
            "Records of a share partition acquired again (released, or their lock ran out), per share partition",
            probe.redelivered.clone(),
        );
        registry.register(
            "share_partition_archived_records",
            "Records of a share partition the group gave up on (REJECT or delivery limit), with or without a dead-letter copy, per share partition",
            probe.archived.clone(),
        );
        registry.register(
            "share_partition_dead_lettered_records",
            "Records a share group gave up on (REJECT or delivery limit) copied to its dead-letter topic (KIP-1191), per share partition",
            probe.dead_lettered.clone(),
        );
        probe
    }

    /// The share partition of `group` on `topic`-`partition` as it is now (`gauges`,
    /// and the log's `high_watermark`) and what happened to it since it was last
    /// observed (`transitions`).
    pub(crate) fn observe(
        &self,
        (group, topic, partition): (&str, &str, i32),
        start_offset: i64,
        high_watermark: i64,
        gauges: ShareGauges,
        transitions: ShareTransitions,
    ) {
        let key = labels(group, topic, partition);
        self.in_flight
            .get_or_create(&key)
            .set(gauge_value(gauges.in_flight));
        self.acquired
            .get_or_create(&key)
            .set(gauge_value(gauges.acquired));
        let behind = high_watermark.saturating_sub(start_offset).max(0);
        let lag = behind.saturating_sub(gauge_value(gauges.finished_above_start));
        self.lag.get_or_create(&key).set(lag.max(0));
        if transitions.redelivered > 0 {
            self.redelivered
                .get_or_create(&key)
                .inc_by(transitions.redelivered);
        }
        if transitions.archived > 0 {
            self.archived
                .get_or_create(&key)
                .inc_by(transitions.archived);
        }
    }

    /// `records` records of `group` on `topic`-`partition` went to its dead-letter topic.
    pub(crate) fn dead_lettered(&self, group: &str, topic: &str, partition: i32, records: usize) {
        self.dead_lettered
            .get_or_create(&labels(group, topic, partition))
            .inc_by(u64::try_from(records).unwrap_or(u64::MAX));
    }
}
