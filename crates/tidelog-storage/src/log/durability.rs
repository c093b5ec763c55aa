//! Durability: flush policy, checkpoints, rolling, clean shutdown.

use super::{FlushObserver, Log};
use crate::checkpoint;
use crate::error::StorageError;
use crate::segment::Segment;

/// The checkpoint values known to be on disk (`None`: unknown or absent), so that
/// [`Log::write_checkpoints`] rewrites only what changed: each rewrite costs a file and a
/// directory fsync, and a broker checkpoints every partition periodically.
#[derive(Debug, Default, Clone)]
pub(crate) struct Checkpointed {
    pub(crate) recovery_point: Option<i64>,
    pub(crate) log_start: Option<i64>,
    pub(crate) high_watermark: Option<i64>,
    pub(crate) epochs: Option<Vec<(i32, i64)>>,
}

impl Log {
    /// fsync of everything up to the log end; advances and checkpoints the recovery point
    /// (and the high watermark and log start offset).
    pub fn flush(&mut self) -> Result<(), StorageError> {
        self.flush_data()?;
        self.write_checkpoints()
    }

    /// Flushes when `flush.ms` has passed since the last flush and data is pending.
    pub fn flush_if_due(&mut self, now_ms: i64) -> Result<(), StorageError> {
        self.last_now_ms = self.last_now_ms.max(now_ms);
        let Some(last) = self.last_flush_ms else {
            self.last_flush_ms = Some(now_ms);
            return Ok(());
        };
        if self.unflushed_records == 0 {
            self.last_flush_ms = Some(now_ms);
            return Ok(());
        }
        let elapsed = u64::try_from(now_ms.saturating_sub(last)).unwrap_or(0);
        if elapsed >= self.config.flush_ms {
            self.flush()?;
            self.last_flush_ms = Some(now_ms);
        }
        Ok(())
    }

    pub(super) fn flush_data(&mut self) -> Result<(), StorageError> {
        let started = std::time::Instant::now();
        let result = self.sync_unflushed();
        if let Some(observer) = &self.flush_observer {
            observer(started.elapsed());
        }
        result
    }

    fn sync_unflushed(&mut self) -> Result<(), StorageError> {
        let from = self
            .segments
            .range(..=self.recovery_point)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        let last = self
            .segments
            .keys()
            .next_back()
            .copied()
            .unwrap_or(i64::MIN);
        for (base, segment) in self.segments.range(from..) {
            if *base == last {
                segment.sync_log()?;
            } else {
                segment.sync()?;
            }
        }
        self.recovery_point = self.log_end_offset();
        self.unflushed_records = 0;
        self.durability.note_synced(self.recovery_point);
        Ok(())
    }

    /// Persists recovery point, log start offset, high watermark and epoch cache; a file
    /// whose value is unchanged since it was last read or written is not rewritten.
    /// The recovery point first catches up with what group-commit waiters synced.
    pub fn write_checkpoints(&mut self) -> Result<(), StorageError> {
        let durable = self.durability.durable_offset().min(self.log_end_offset());
        self.recovery_point = self.recovery_point.max(durable);
        let dir = &self.dir;
        let ck = &mut self.checkpointed;
        for (name, value, known) in [
            (
                checkpoint::RECOVERY_POINT,
                self.recovery_point,
                &mut ck.recovery_point,
            ),
            (
                checkpoint::LOG_START,
                self.log_start_offset,
                &mut ck.log_start,
            ),
            (
                checkpoint::HIGH_WATERMARK,
                self.high_watermark,
                &mut ck.high_watermark,
            ),
        ] {
            if *known != Some(value) {
                *known = None;
                checkpoint::write_offset(dir, name, value)?;
                *known = Some(value);
            }
        }
        self.write_epochs_checkpoint()
    }

    /// Persists the leader-epoch cache unless the file already holds it.
    pub(super) fn write_epochs_checkpoint(&mut self) -> Result<(), StorageError> {
        let pairs = self.epochs.pairs();
        if self.checkpointed.epochs.as_ref() != Some(&pairs) {
            self.checkpointed.epochs = None;
            checkpoint::write_epochs(&self.dir, &pairs)?;
            self.checkpointed.epochs = Some(pairs);
        }
        Ok(())
    }

    /// Persists the recovery point alone (segment roll, truncation).
    pub(super) fn write_recovery_checkpoint(&mut self) -> Result<(), StorageError> {
        if self.checkpointed.recovery_point != Some(self.recovery_point) {
            self.checkpointed.recovery_point = None;
            checkpoint::write_offset(&self.dir, checkpoint::RECOVERY_POINT, self.recovery_point)?;
            self.checkpointed.recovery_point = Some(self.recovery_point);
        }
        Ok(())
    }

    /// Persists the log start offset alone (retention, DeleteRecords).
    pub(super) fn write_log_start_checkpoint(&mut self) -> Result<(), StorageError> {
        if self.checkpointed.log_start != Some(self.log_start_offset) {
            self.checkpointed.log_start = None;
            checkpoint::write_offset(&self.dir, checkpoint::LOG_START, self.log_start_offset)?;
            self.checkpointed.log_start = Some(self.log_start_offset);
        }
        Ok(())
    }

    pub(super) fn segment_ms_due(&self, now_ms: i64) -> bool {
        let Ok(active) = self.active() else {
            return false;
        };
        active.size() > 0
            && active
                .first_append_ms()
                .is_some_and(|t| now_ms.saturating_sub(t) >= self.config.segment_ms)
    }

    /// Installs (or removes) the observer told the duration of every fsync pass.
    pub fn set_flush_observer(&mut self, observer: Option<FlushObserver>) {
        self.durability.set_observer(observer.clone());
        self.flush_observer = observer;
    }

    /// Rolls the active segment when `segment.ms` has passed since its first append.
    pub fn roll_if_due(&mut self, now_ms: i64) -> Result<(), StorageError> {
        self.last_now_ms = self.last_now_ms.max(now_ms);
        if self.segment_ms_due(now_ms) {
            let end = self.log_end_offset();
            self.roll_at(end)?;
        }
        Ok(())
    }

    /// Closes the active segment and starts a new one at `base` (if it has data).
    pub(super) fn roll_at(&mut self, base: i64) -> Result<(), StorageError> {
        self.mark_dirty()?;
        let replaced_empty = if self.active()?.size() == 0 {
            if self.active()?.base_offset() == base {
                return Ok(());
            }
            // An empty active segment is replaced (after its successor exists).
            Some(self.active()?.base_offset())
        } else {
            // The closing segment is made durable so recovery never rescans it; this costs
            // a few fsyncs per segment.bytes of data.
            self.flush_data()?;
            self.active_mut()?.seal()?;
            self.active()?.sync()?;
            self.write_recovery_checkpoint()?;
            None
        };
        let segment = Segment::create(&self.dir, base, self.index_params())?;
        let file = segment.log_file()?;
        self.segments.insert(base, segment);
        // Everything before the new segment is synced (or there was nothing).
        self.durability
            .switch_file(file, self.recovery_point.min(base));
        // Its directory fsync also makes the new segment's file names durable.
        self.producers.write_snapshot(&self.dir, base)?;
        if let Some(old) = replaced_empty.and_then(|b| self.segments.remove(&b)) {
            old.delete_files()?;
        }
        if self.segments.len() == 1 {
            self.log_start_offset = self.log_start_offset.max(base);
        }
        self.prune_snapshots()
    }

    /// Keeps the snapshots at segment bases (truncation may need them) and the newest one.
    fn prune_snapshots(&self) -> Result<(), StorageError> {
        let snaps = super::open::list_bases(&self.dir, "snapshot")?;
        let newest = snaps.last().copied();
        for snap in snaps {
            if Some(snap) != newest && !self.segments.contains_key(&snap) {
                std::fs::remove_file(self.dir.join(crate::segment::file_name(snap, "snapshot")))?;
            }
        }
        Ok(())
    }

    /// Flush, checkpoints, producer snapshot, trimmed indexes, clean-shutdown marker.
    pub fn close(mut self) -> Result<(), StorageError> {
        if self.clean_marker {
            // Opened clean and never changed: the files are as the last close left them.
            self.durability.detach();
            return self.write_checkpoints();
        }
        self.flush_data()?;
        self.durability.detach();
        self.active_mut()?.seal()?;
        self.active()?.sync()?;
        let end = self.log_end_offset();
        self.producers.write_snapshot(&self.dir, end)?;
        self.prune_snapshots()?;
        self.write_checkpoints()?;
        checkpoint::write_atomic(&self.dir, checkpoint::CLEAN_SHUTDOWN, b"")?;
        Ok(())
    }
}
