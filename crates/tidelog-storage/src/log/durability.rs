//! Durability: flush policy, checkpoints, rolling, clean shutdown.
//!
//! With a [`BackgroundFlusher`] attached, nothing here fsyncs on the caller's thread
//! except [`Log::flush`], truncation and [`Log::close`]: a roll, a due `flush.ms` and a
//! checkpoint request queue the log for a flusher pass. Without one, that same pass runs
//! on the caller's thread.

use super::checkpoint_files::Staged;
use super::{FlushObserver, Log};
use crate::error::StorageError;
use crate::flusher::BackgroundFlusher;
use crate::segment::Segment;

impl Log {
    /// fsync of everything up to the log end on this thread (rolled segments waiting for
    /// the flusher included); then the recovery point, high watermark, log start offset
    /// and epochs are checkpointed.
    pub fn flush(&mut self) -> Result<(), StorageError> {
        self.flush_data()?;
        self.stage_checkpoints();
        self.durability.write_checkpoints()
    }

    /// Flushes when `flush.ms` has passed since the last flush and data is pending (with
    /// a background flusher: asks it to).
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
            if self.flusher.is_some() {
                self.unflushed_records = 0;
                self.durability.request_active_flush();
                self.checkpoint_in_background()?;
            } else {
                self.flush()?;
            }
            self.last_flush_ms = Some(now_ms);
        }
        Ok(())
    }

    /// fsync on this thread of everything written: rolled segments still waiting for
    /// theirs, then the active segment's data.
    pub(super) fn flush_data(&mut self) -> Result<(), StorageError> {
        self.unflushed_records = 0;
        self.durability.sync_pending(true)
    }

    /// Persists recovery point, log start offset, high watermark and epoch cache; a file
    /// whose value is unchanged since it was last read or written is not rewritten. With
    /// a background flusher attached the flusher writes them (this only hands the values
    /// over); [`crate::DurabilityHandle::write_checkpoints`] writes them on the calling
    /// thread.
    pub fn write_checkpoints(&mut self) -> Result<(), StorageError> {
        self.checkpoint_in_background()
    }

    /// After a clean open from its log directory's list of logs closed cleanly, the
    /// recovery-point and epochs files still hold the pair an earlier pass wrote (the
    /// close wrote the list entry instead): has a pass write them, on the background
    /// flusher once one is attached. A crash before then only rescans more. Does nothing
    /// for any other log, or the second time; returns whether it asked for a pass.
    pub fn checkpoint_if_stale(&mut self) -> Result<bool, StorageError> {
        if !std::mem::take(&mut self.checkpoints_behind) {
            return Ok(false);
        }
        self.checkpoint_in_background().map(|()| true)
    }

    /// The values the next checkpoint write persists.
    pub(super) fn stage_checkpoints(&mut self) {
        self.durability.stage(Staged {
            log_start: self.log_start_offset,
            epochs: self.epochs.pairs(),
        });
    }

    /// A new leader epoch starts in this log. Its entry is not needed on disk before the
    /// data is: recovery rebuilds the epochs of what it rescans (each batch carries its
    /// epoch), so no pass is asked for, and the first partition write of every new epoch
    /// costs no fsync (two per partition when a whole broker's partitions change
    /// leaders). It is staged at once, so that every checkpoint write from now on, which
    /// may move the recovery point past its start, writes the epochs file with it first.
    pub(super) fn epoch_started(&mut self) {
        self.stage_checkpoints();
    }

    /// Stages the checkpoints and has the flusher do a pass (the pending syncs, then the
    /// files); without a flusher, or once it stopped, the pass runs here.
    pub(super) fn checkpoint_in_background(&mut self) -> Result<(), StorageError> {
        self.stage_checkpoints();
        if let Some(flusher) = &self.flusher {
            if flusher.schedule(&self.durability) {
                return Ok(());
            }
        }
        self.durability.background_pass()
    }

    /// Stages the checkpoints and writes them on this thread, for changes that must be
    /// on disk before the log changes further (truncation lowers the recovery point
    /// before new data may land below the old one).
    pub(super) fn write_checkpoints_now(&mut self) -> Result<(), StorageError> {
        self.stage_checkpoints();
        self.durability.write_checkpoints()
    }

    /// Hands this log's durability work (the fsyncs of rolled segments, `flush.ms`,
    /// checkpoints) to `flusher`, or with `None` back to the callers' threads.
    pub fn set_background_flusher(&mut self, flusher: Option<BackgroundFlusher>) {
        self.flusher = flusher;
    }

    pub(super) fn segment_ms_due(&self, now_ms: i64) -> bool {
        let Ok(active) = self.active() else {
            return false;
        };
        let roll_after = self.config.roll_after_ms(active.base_offset());
        active.size() > 0
            && active
                .first_append_ms()
                .is_some_and(|t| now_ms.saturating_sub(t) >= roll_after)
    }

    /// Installs (or removes) the observer told the duration of every fsync pass.
    pub fn set_flush_observer(&mut self, observer: Option<FlushObserver>) {
        self.durability.set_observer(observer);
    }

    /// Installs (or removes) the observer told of every failed fsync pass of this log,
    /// on whichever thread it ran (a producer's wait, the background flusher, a close):
    /// a failed fsync leaves what is on disk unknown.
    pub fn set_sync_failure_observer(&mut self, observer: Option<crate::FlushFailureObserver>) {
        self.durability.set_failure_observer(observer);
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
    ///
    /// What stays on the caller's thread: trimming the closing segment's indexes,
    /// creating the new segment's files (a create and a sparse preallocation, no fsync)
    /// and writing the producer snapshot into the page cache; what does not: every
    /// fsync (the closed segment's data and indexes, the snapshot, the directory) and
    /// the recovery-point checkpoint, which the background pass does in that order. Until
    /// then the recovery point stays below the closed segment's end, so a crash rescans
    /// it: a rolled segment is never lost, only rescanned.
    pub(super) fn roll_at(&mut self, base: i64) -> Result<(), StorageError> {
        self.mark_dirty()?;
        let closed = if self.active()?.size() == 0 {
            if self.active()?.base_offset() == base {
                return Ok(());
            }
            // An empty active segment is replaced (after its successor exists).
            None
        } else {
            self.active_mut()?.seal()?;
            let active = self.active()?;
            Some((active.base_offset(), active.next_offset()))
        };
        let replaced_empty = match closed {
            None => Some(self.active()?.base_offset()),
            Some(_) => None,
        };
        let segment = Segment::create(&self.dir, base, self.index_params())?;
        let file = segment.shared_file();
        self.segments.insert(base, segment);
        self.durability.rolled(closed, file, base);
        self.producers.write_snapshot_unsynced(&self.dir, base)?;
        self.durability.note_snapshot(base);
        if let Some(old) = replaced_empty.and_then(|b| self.segments.remove(&b)) {
            old.delete_files()?;
        }
        if self.segments.len() == 1 {
            self.log_start_offset = self.log_start_offset.max(base);
        }
        self.prune_snapshots()?;
        self.checkpoint_in_background()
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

    /// Flush, checkpoints, producer snapshot, trimmed indexes, clean-shutdown marker,
    /// all on this thread (many logs close at once on a few threads: `close_logs`).
    pub fn close(mut self) -> Result<(), StorageError> {
        self.close_data()?;
        self.durability.close()
    }

    /// What `close` does before the checkpoint files and the clean-shutdown marker:
    /// the data synced, the active segment sealed, the producer snapshot written, the
    /// checkpoint values staged. `close_logs` runs it for many logs with fsyncs deferred.
    pub(crate) fn close_data(&mut self) -> Result<(), StorageError> {
        if self.durability.clean_shutdown_marker_present() {
            // Opened clean and never changed: the files are as the last close left them.
            self.stage_checkpoints();
            return Ok(());
        }
        self.flush_data()?;
        self.durability.detach_file();
        self.active_mut()?.seal()?;
        self.active()?.sync()?;
        let end = self.log_end_offset();
        self.producers.write_snapshot(&self.dir, end)?;
        self.prune_snapshots()?;
        self.stage_checkpoints();
        Ok(())
    }
}
