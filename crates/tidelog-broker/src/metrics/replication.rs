//! The replication probe: ISR changes, leader elections and log truncations, bumped
//! where each happens in `replica/`: ISR shrink/expand when the controller accepts the
//! leader's AlterPartition, an election on the node that becomes leader (unclean when
//! it was not in the ISR it last knew), a truncation when a follower cuts its log to
//! the leader's diverging epoch (and the records below its old high watermark that it
//! cut). On a cluster of one none happen; the series exist at 0 from the start.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ElectionLabels {
    kind: &'static str,
}

pub(crate) struct ReplicationProbe {
    isr_shrinks: Counter,
    isr_expands: Counter,
    elections: Family<ElectionLabels, Counter>,
    truncations: Counter,
    unclean_truncated_records: Counter,
}

impl ReplicationProbe {
    pub(super) fn register(registry: &mut Registry) -> ReplicationProbe {
        let probe = ReplicationProbe {
            isr_shrinks: Counter::default(),
            isr_expands: Counter::default(),
            elections: Family::default(),
            truncations: Counter::default(),
            unclean_truncated_records: Counter::default(),
        };
        registry.register(
            "isr_shrinks",
            "Times a follower was removed from a partition's in-sync replicas",
            probe.isr_shrinks.clone(),
        );
        registry.register(
            "isr_expands",
            "Times a caught-up follower rejoined a partition's in-sync replicas",
            probe.isr_expands.clone(),
        );
        registry.register(
            "leader_elections",
            "Partition leader elections; kind=unclean when the new leader was outside the ISR (acknowledged records may be lost)",
            probe.elections.clone(),
        );
        registry.register(
            "log_truncations",
            "Times a replica truncated its log to match a new leader",
            probe.truncations.clone(),
        );
        registry.register(
            "unclean_truncated_records",
            "Records below a replica's old high watermark cut when it truncated to a new leader (acknowledged data lost to an unclean election)",
            probe.unclean_truncated_records.clone(),
        );
        for kind in ["clean", "unclean"] {
            let _ = probe.elections.get_or_create(&ElectionLabels { kind });
        }
        probe
    }
}

impl ReplicationProbe {
    pub(crate) fn isr_shrunk(&self) {
        self.isr_shrinks.inc();
    }

    pub(crate) fn isr_expanded(&self) {
        self.isr_expands.inc();
    }

    pub(crate) fn leader_elected(&self, unclean: bool) {
        let kind = if unclean { "unclean" } else { "clean" };
        self.elections.get_or_create(&ElectionLabels { kind }).inc();
    }

    pub(crate) fn truncated(&self) {
        self.truncations.inc();
    }

    pub(crate) fn unclean_truncated_records(&self, records: i64) {
        self.unclean_truncated_records
            .inc_by(u64::try_from(records).unwrap_or(0));
    }
}
