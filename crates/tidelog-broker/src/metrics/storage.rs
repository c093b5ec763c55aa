//! The storage probe: how long fsync takes, what retention and compaction removed, and
//! background storage failures. Every log the node opens reports its fsync passes here
//! through [`StorageProbe::flush_observer`].

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tidelog_storage::{CompactionStats, FlushFailureObserver, FlushObserver};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: &'static str,
}

/// A background storage task that can fail.
#[derive(Debug, Clone, Copy)]
pub(crate) enum StorageOperation {
    /// Segment roll by segment.ms, retention, flush by flush.ms.
    Housekeeping,
    /// Compaction of a `cleanup.policy=compact` partition.
    Compaction,
    /// A producer's append failing for a storage reason (KAFKA_STORAGE_ERROR).
    Append,
    /// A background flusher pass (the fsyncs of rolled segments, flush.ms, checkpoints).
    Flush,
}

impl StorageOperation {
    fn label(self) -> &'static str {
        match self {
            StorageOperation::Housekeeping => "housekeeping",
            StorageOperation::Compaction => "compaction",
            StorageOperation::Append => "append",
            StorageOperation::Flush => "flush",
        }
    }
}

pub(crate) struct StorageProbe {
    flush_seconds: Histogram,
    retention_deleted_segments: Counter,
    compaction_runs: Counter,
    compaction_reclaimed_bytes: Counter,
    compaction_removed_records: Counter,
    errors: Family<OperationLabels, Counter>,
}

impl StorageProbe {
    pub(super) fn register(registry: &mut Registry) -> StorageProbe {
        let probe = StorageProbe {
            // 50 µs to ~26 s: page-cache hits to a disk in trouble.
            flush_seconds: Histogram::new(exponential_buckets(0.000_05, 2.0, 20)),
            retention_deleted_segments: Counter::default(),
            compaction_runs: Counter::default(),
            compaction_reclaimed_bytes: Counter::default(),
            compaction_removed_records: Counter::default(),
            errors: Family::default(),
        };
        registry.register(
            "log_flush_seconds",
            "Duration of each fsync pass of a partition log (its count's rate is the flush rate)",
            probe.flush_seconds.clone(),
        );
        registry.register(
            "retention_deleted_segments",
            "Segments deleted by the retention pass (retention.ms, retention.bytes, or wholly below the log start offset)",
            probe.retention_deleted_segments.clone(),
        );
        registry.register(
            "compaction_runs",
            "Compaction passes that rewrote at least one segment",
            probe.compaction_runs.clone(),
        );
        registry.register(
            "compaction_reclaimed_bytes",
            "Bytes freed by compaction",
            probe.compaction_reclaimed_bytes.clone(),
        );
        registry.register(
            "compaction_removed_records",
            "Records dropped by compaction (superseded values and expired tombstones)",
            probe.compaction_removed_records.clone(),
        );
        registry.register(
            "storage_errors",
            "Storage failures, by operation",
            probe.errors.clone(),
        );
        // Series exist from the start, so `increase()` sees the first failure.
        for op in [
            StorageOperation::Housekeeping,
            StorageOperation::Compaction,
            StorageOperation::Append,
            StorageOperation::Flush,
        ] {
            let _ = probe.errors.get_or_create(&OperationLabels {
                operation: op.label(),
            });
        }
        probe
    }

    /// The observer to install on every log this node opens.
    pub(crate) fn flush_observer(self: &Arc<Self>) -> FlushObserver {
        let probe = Arc::clone(self);
        Arc::new(move |took| probe.flush_seconds.observe(took.as_secs_f64()))
    }

    /// The observer to install on the node's background flusher.
    pub(crate) fn flush_failure_observer(self: &Arc<Self>) -> FlushFailureObserver {
        let probe = Arc::clone(self);
        Arc::new(move |_, _| probe.failed(StorageOperation::Flush))
    }

    pub(crate) fn retention_deleted(&self, segments: usize) {
        self.retention_deleted_segments.inc_by(segments as u64);
    }

    pub(crate) fn compacted(&self, stats: &CompactionStats) {
        if stats.segments_cleaned == 0 {
            return;
        }
        self.compaction_runs.inc();
        self.compaction_reclaimed_bytes
            .inc_by(stats.bytes_before.saturating_sub(stats.bytes_after));
        self.compaction_removed_records
            .inc_by(stats.records_removed);
    }

    pub(crate) fn failed(&self, operation: StorageOperation) {
        self.errors
            .get_or_create(&OperationLabels {
                operation: operation.label(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io_error() -> tidelog_storage::StorageError {
        std::io::Error::other("disk gone").into()
    }

    #[test]
    fn observer_feeds_the_histogram_and_compaction_counts_reclaimed_bytes() {
        let mut registry = Registry::with_prefix("tidelog");
        let probe = Arc::new(StorageProbe::register(&mut registry));
        let observe = probe.flush_observer();
        observe(std::time::Duration::from_millis(2));
        observe(std::time::Duration::from_millis(4));
        probe.compacted(&CompactionStats::default());
        probe.compacted(&CompactionStats {
            segments_cleaned: 2,
            records_removed: 7,
            bytes_before: 1000,
            bytes_after: 400,
            horizon: 10,
        });
        probe.failed(StorageOperation::Compaction);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("tidelog_log_flush_seconds_count 2\n"),
            "{text}"
        );
        assert!(text.contains("tidelog_log_flush_seconds_sum 0.006\n"));
        assert!(text.contains("tidelog_compaction_runs_total 1\n"));
        assert!(text.contains("tidelog_compaction_reclaimed_bytes_total 600\n"));
        assert!(text.contains("tidelog_compaction_removed_records_total 7\n"));
        assert!(text.contains("tidelog_storage_errors_total{operation=\"compaction\"} 1\n"));
        assert!(text.contains("tidelog_storage_errors_total{operation=\"append\"} 0\n"));
        probe.flush_failure_observer()(std::path::Path::new("t-0"), &io_error());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("tidelog_storage_errors_total{operation=\"flush\"} 1\n"));
    }
}
