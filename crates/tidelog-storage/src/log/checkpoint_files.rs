//! The checkpoint files and the clean-shutdown marker of one log, written outside the
//! owner's lock by whoever gets there: the log itself (truncation, close), the
//! background flusher, or the owner ([`DurabilityHandle::write_checkpoints`] after a
//! DeleteRecords). One writer at a time: two would clobber each other's `.tmp` file, and
//! an earlier value could land after a later one.

use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

use super::handle::DurabilityHandle;
use crate::checkpoint;
use crate::error::StorageError;

/// The checkpoint values a writer is to persist, copied from the log under its owner's
/// lock ([`crate::Log`] stages them; the recovery point comes from the sync state).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Staged {
    pub(crate) log_start: i64,
    pub(crate) epochs: Vec<(i32, i64)>,
}

/// The checkpoint values known to be on disk (`None`: unknown or absent), so that only
/// what changed is rewritten: each rewrite costs a file and a directory fsync.
#[derive(Debug, Default, Clone)]
pub(crate) struct Checkpointed {
    pub(crate) recovery_point: Option<i64>,
    pub(crate) log_start: Option<i64>,
    pub(crate) epochs: Option<Vec<(i32, i64)>>,
    /// A per-partition high-watermark file of an earlier release is still there: the
    /// first checkpoint write removes it (the high watermarks of a log directory are
    /// one file now, [`crate::HIGH_WATERMARKS_FILE`], written by the owner of the logs).
    pub(crate) legacy_high_watermark: bool,
}

/// Which checkpoint files a write may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    All,
    LogStart,
}

pub(super) struct FilesOnDisk {
    pub(super) known: Checkpointed,
    /// The log was closed, deleted or dropped: nothing may write its files any more.
    pub(super) detached: bool,
}

impl DurabilityHandle {
    pub(super) fn lock_files(&self) -> MutexGuard<'_, FilesOnDisk> {
        // A writer that panicked left at worst a `.tmp` file, which the next write
        // replaces; the known values were cleared before each write.
        self.shared
            .files
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes the staged checkpoint values and the recovery point to the files that
    /// do not hold them yet, on this thread (file + directory fsync per file written).
    /// Writers of one log take turns; a closed log's files are left alone.
    pub fn write_checkpoints(&self) -> Result<(), StorageError> {
        let mut files = self.lock_files();
        if files.detached {
            return Ok(());
        }
        self.write_checkpoints_locked(&mut files, Written::All)
    }

    fn write_checkpoints_locked(
        &self,
        files: &mut FilesOnDisk,
        written: Written,
    ) -> Result<(), StorageError> {
        // Read under the files lock: a truncation lowers these before it takes that
        // lock to write them, so whatever is written last is the newest value.
        let (recovery_point, staged) = {
            let state = self.lock();
            (state.recovery_point(), state.staged.clone())
        };
        let dir = &self.shared.dir;
        let known = &mut files.known;
        // The epochs first: recovery rebuilds the epochs of what it rescans (from the
        // recovery point on), so the file must hold every epoch that starts below the
        // recovery point on disk before that point may move past it.
        if written == Written::All && known.epochs.as_ref() != Some(&staged.epochs) {
            known.epochs = None;
            checkpoint::write_epochs(dir, &staged.epochs)?;
            known.epochs = Some(staged.epochs);
        }
        for (name, value, on_disk) in [
            (
                checkpoint::RECOVERY_POINT,
                recovery_point,
                &mut known.recovery_point,
            ),
            (
                checkpoint::LOG_START,
                staged.log_start,
                &mut known.log_start,
            ),
        ] {
            if written == Written::LogStart && name != checkpoint::LOG_START {
                continue;
            }
            if *on_disk != Some(value) {
                *on_disk = None;
                checkpoint::write_offset(dir, name, value)?;
                *on_disk = Some(value);
            }
        }
        if known.legacy_high_watermark {
            // Not synced: should the unlink be lost, the old value comes back, and the
            // directory's file, when it names this partition, wins over it at open.
            match std::fs::remove_file(dir.join(checkpoint::LEGACY_HIGH_WATERMARK)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => known.legacy_high_watermark = false,
            }
        }
        Ok(())
    }

    /// The recovery point in the checkpoint file, if this process wrote or read one:
    /// what a crash recovery would start its rescan from.
    pub(crate) fn checkpointed_recovery_point(&self) -> Option<i64> {
        self.lock_files().known.recovery_point
    }

    /// Whether the log is as a clean shutdown left it (opened clean, nothing changed
    /// since): the next write first removes its clean-shutdown marker, with a directory
    /// fsync, if it has a file of its own (a log opened clean by its log directory's list
    /// has none, and that list was removed before any log opened).
    pub fn clean_shutdown_marker_present(&self) -> bool {
        self.shared.marker.load(Ordering::Acquire)
    }

    fn marker_file_present(&self) -> bool {
        self.shared.marker_file.load(Ordering::Acquire)
    }

    /// Removes the clean-shutdown marker durably (unlink + directory fsync) unless it is
    /// gone already, on this thread. The owner of a log calls it on a blocking thread
    /// before the first write after a clean open, so that write does not sync; a write
    /// that finds the marker still there removes it itself.
    pub fn remove_clean_shutdown_marker(&self) -> Result<(), StorageError> {
        if !self.clean_shutdown_marker_present() {
            return Ok(());
        }
        let files = self.lock_files();
        if files.detached || !self.clean_shutdown_marker_present() {
            return Ok(());
        }
        if self.marker_file_present() {
            match std::fs::remove_file(self.shared.dir.join(checkpoint::CLEAN_SHUTDOWN)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
            checkpoint::sync_dir(&self.shared.dir)?;
        }
        self.marker_removed();
        drop(files);
        Ok(())
    }

    /// Clean close: the checkpoints, then the clean-shutdown marker (unless it is still
    /// there from a clean open); nothing writes the log's files afterwards.
    pub(crate) fn close(&self) -> Result<(), StorageError> {
        self.close_checkpoints()?;
        self.close_marker()
    }

    /// The last step of [`crate::close_logs`] for this log, instead of writing its
    /// marker: nothing writes its files afterwards, and it is named in its log
    /// directory's list of logs closed cleanly (true) unless it was detached already.
    pub(crate) fn close_into_list(&self) -> bool {
        let mut files = self.lock_files();
        let listed = !files.detached;
        files.detached = true;
        listed
    }

    /// The first half of `close`: the checkpoint files. On failure the log is detached
    /// (no marker will follow).
    pub(crate) fn close_checkpoints(&self) -> Result<(), StorageError> {
        self.close_checkpoints_of(Written::All)
    }

    /// `close_checkpoints` for a log that its log directory's list of logs closed
    /// cleanly will name with its epochs: only the log start is written (it must not go
    /// back should a crash follow the next start). The recovery-point and epochs files
    /// keep the older pair the last pass wrote, which is consistent on its own.
    pub(crate) fn close_checkpoints_for_list(&self) -> Result<(), StorageError> {
        self.close_checkpoints_of(Written::LogStart)
    }

    fn close_checkpoints_of(&self, written: Written) -> Result<(), StorageError> {
        self.detach_file();
        let mut files = self.lock_files();
        if files.detached {
            return Ok(());
        }
        let result = self.write_checkpoints_locked(&mut files, written);
        if result.is_err() {
            files.detached = true;
        }
        result
    }

    /// The second half of `close`: the clean-shutdown marker (unless it is still there
    /// from a clean open); nothing writes the log's files afterwards. Only once the
    /// checkpoints and the data are durable.
    pub(crate) fn close_marker(&self) -> Result<(), StorageError> {
        let mut files = self.lock_files();
        if files.detached {
            return Ok(());
        }
        let result = if self.marker_file_present() {
            Ok(())
        } else {
            checkpoint::write_atomic(&self.shared.dir, checkpoint::CLEAN_SHUTDOWN, b"")
                .map_err(StorageError::from)
        };
        files.detached = true;
        result
    }

    /// Writes the log's own clean-shutdown marker (fsyncs as the thread's policy has
    /// them), for a log closed into no list.
    pub(crate) fn write_marker_file(&self) -> Result<(), StorageError> {
        checkpoint::write_atomic(&self.shared.dir, checkpoint::CLEAN_SHUTDOWN, b"")?;
        Ok(())
    }

    /// Unlinks the clean-shutdown marker without making that durable, for
    /// [`crate::remove_clean_shutdown_markers`]; true if it was there to unlink. The
    /// caller syncs the filesystem, then calls [`Self::marker_removed`].
    pub(crate) fn unlink_marker(&self) -> Result<bool, StorageError> {
        if !self.clean_shutdown_marker_present() {
            return Ok(false);
        }
        let files = self.lock_files();
        if files.detached || !self.clean_shutdown_marker_present() {
            return Ok(false);
        }
        if !self.marker_file_present() {
            // Opened clean by its directory's list: nothing on disk to remove.
            self.marker_removed();
            return Ok(false);
        }
        match std::fs::remove_file(self.shared.dir.join(checkpoint::CLEAN_SHUTDOWN)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(true),
        }
    }

    /// The unlink of the marker is durable (its filesystem was synced).
    pub(crate) fn marker_removed(&self) {
        self.shared.marker_file.store(false, Ordering::Release);
        self.shared.marker.store(false, Ordering::Release);
    }

    /// The log is gone (deleted, dropped, or closed after an error): nothing writes its
    /// files any more, and a background pass in progress finishes first.
    pub(crate) fn detach(&self) {
        self.detach_file();
        self.lock_files().detached = true;
    }
}
