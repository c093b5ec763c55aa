//! One log's durability, shared by the log (under its owner's lock), group-commit
//! waiters and the background flusher (both on blocking threads).
//!
//! It knows what is written, what is fsynced, which rolled segments still wait for
//! their fsync, and the checkpoint values to persist next. The fsyncs run *outside* the
//! owner's lock: a sync pass takes its work (files, target offset) under a short lock,
//! releases it, syncs, and records the result if no truncation happened meanwhile.
//!
//! Two mutexes, never held across each other's slow part:
//! * `state`: offsets and pending work; held for a few assignments only, so the log can
//!   update it under its owner's lock without ever waiting on an fsync.
//! * `files`: held while writing the checkpoint files and the clean-shutdown marker, so
//!   two writers never race on a file's `.tmp` and a later value is never overwritten
//!   by an earlier one.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use super::checkpoint_files::{Checkpointed, FilesOnDisk, Staged};
use super::FlushObserver;
use crate::error::StorageError;
use crate::flusher::FlushFailureObserver;
use crate::fsync;
use crate::segment::{file_name, SegmentFile};

/// A cloneable handle on one log's durability. It shares the active segment's
/// [`SegmentFile`] (no descriptor of its own: a sync pass opens the file again if the
/// descriptor cache closed it); rolled segments are synced through their paths.
#[derive(Clone)]
pub struct DurabilityHandle {
    pub(crate) shared: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(super) dir: PathBuf,
    state: Mutex<SyncState>,
    synced: Condvar,
    /// See `checkpoint_files`.
    pub(super) files: Mutex<FilesOnDisk>,
    /// The log was opened clean (its own clean-shutdown marker, or its log directory's
    /// list of logs closed cleanly) and its files have not changed since. Read without
    /// a lock before every write.
    pub(super) marker: AtomicBool,
    /// Its own clean-shutdown marker file is on disk (until the first change removes
    /// it); a log opened clean by its directory's list has none.
    pub(super) marker_file: AtomicBool,
    /// Waiting in a background flusher's queue (a log is queued at most once).
    pub(crate) queued: AtomicBool,
}

/// How a log was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpenedAs {
    /// Without a clean shutdown behind it: recovered from its recovery point.
    Recovered,
    /// Clean, by its own clean-shutdown marker (on disk until the first change).
    CleanByMarker,
    /// Clean, by its log directory's list of logs closed cleanly (already removed).
    CleanByList,
}

/// A rolled segment whose files are not yet fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ClosedSegment {
    base: i64,
    end: i64,
}

pub(super) struct SyncState {
    /// The active segment's log file.
    file: Option<Arc<SegmentFile>>,
    /// End offset of everything written (exclusive).
    written: i64,
    /// End offset of the data known to be on disk (exclusive).
    durable: i64,
    /// Rolled segments still to be fsynced (data and indexes), oldest first. Every other
    /// closed segment is synced, or holds nothing at or above `durable`.
    closed: Vec<ClosedSegment>,
    /// Producer snapshots written without an fsync, by offset.
    snapshots: Vec<i64>,
    /// Bumped whenever files are created in the directory (a roll); the directory's
    /// fsync makes their names durable.
    dir_changes: u64,
    dir_synced: u64,
    /// The next background pass syncs the active segment too (`flush.ms`).
    flush_active: bool,
    pub(super) staged: Staged,
    /// A sync pass is running right now.
    syncing: bool,
    /// Bumped by truncation: a sync started before it must not raise `durable`.
    generation: u64,
    /// Sync passes made through this handle (for tests and benchmarks).
    syncs: u64,
    /// A failed fsync leaves durability unknown: every later wait fails until the log
    /// is truncated or reopened.
    failed: Option<std::io::Error>,
    observer: Option<FlushObserver>,
    /// Told of every failed sync pass, wherever it ran.
    on_failure: Option<FlushFailureObserver>,
}

impl SyncState {
    /// Where a crash recovery may start: everything below is on disk, and no rolled
    /// segment whose indexes are unsynced lies wholly below it (recovery trusts the
    /// indexes of such segments if they validate, and a lost final time-index entry
    /// would understate the segment's newest timestamp for retention). Recovery
    /// rescans the segment containing it from its last index entry below it.
    pub(super) fn recovery_point(&self) -> i64 {
        self.closed
            .first()
            .map_or(self.durable, |c| self.durable.min(c.end))
    }

    fn failure(&self) -> Option<StorageError> {
        self.failed.as_ref().map(StorageError::copied_io)
    }
}

/// What one sync pass does, taken from the state under its lock.
struct SyncWork {
    closed: Vec<ClosedSegment>,
    snapshots: Vec<i64>,
    dir_changes: Option<u64>,
    active: Option<Arc<SegmentFile>>,
    target: i64,
    generation: u64,
}

impl SyncWork {
    fn is_empty(&self) -> bool {
        self.closed.is_empty()
            && self.snapshots.is_empty()
            && self.dir_changes.is_none()
            && self.active.is_none()
    }

    /// The fsyncs, in an order that makes each step safe to rely on: a rolled segment's
    /// data and indexes, the snapshots, the directory (new file names), then the active
    /// segment's data.
    fn run(&self, dir: &Path) -> Result<(), StorageError> {
        for c in &self.closed {
            for ext in ["log", "index", "timeindex", "txnindex"] {
                fsync::sync_path(&dir.join(file_name(c.base, ext)))?;
            }
        }
        for &offset in &self.snapshots {
            fsync::sync_path(&dir.join(file_name(offset, "snapshot")))?;
        }
        if self.dir_changes.is_some() || !self.snapshots.is_empty() {
            fsync::sync_dir(dir)?;
        }
        if let Some(file) = &self.active {
            // Reopened if the descriptor cache closed it meanwhile: the unsynced writes
            // are the inode's, so this fdatasync covers them. A file gone since (the
            // log was truncated or deleted past it) needs none.
            match file.get() {
                Ok(open) => fsync::sync_data(&open)?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

impl DurabilityHandle {
    /// A log whose data below `durable` is on disk, written up to `written`, with
    /// `file` as its active segment file and `staged` as its checkpoint values.
    pub(crate) fn new(
        dir: &Path,
        file: Arc<SegmentFile>,
        written: i64,
        durable: i64,
        staged: Staged,
        known: Checkpointed,
        opened: OpenedAs,
    ) -> Self {
        DurabilityHandle {
            shared: Arc::new(Shared {
                dir: dir.to_path_buf(),
                state: Mutex::new(SyncState {
                    file: Some(file),
                    written: written.max(durable),
                    durable,
                    closed: Vec::new(),
                    snapshots: Vec::new(),
                    dir_changes: 0,
                    dir_synced: 0,
                    flush_active: false,
                    staged,
                    syncing: false,
                    generation: 0,
                    syncs: 0,
                    failed: None,
                    observer: None,
                    on_failure: None,
                }),
                synced: Condvar::new(),
                files: Mutex::new(FilesOnDisk {
                    known,
                    detached: false,
                }),
                marker: AtomicBool::new(opened != OpenedAs::Recovered),
                marker_file: AtomicBool::new(opened == OpenedAs::CleanByMarker),
                queued: AtomicBool::new(false),
            }),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, SyncState> {
        // Every update of the state is a few assignments that cannot panic halfway.
        self.shared
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The partition directory of the log.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// Blocks until every offset below `end_offset` is on disk, running one sync pass
    /// for everything written so far when none is in progress.
    pub fn wait_durable(&self, end_offset: i64) -> Result<(), StorageError> {
        let mut state = self.lock();
        loop {
            if let Some(e) = state.failure() {
                return Err(e);
            }
            // A truncation may have cut the log below `end_offset`: then only what is
            // left of it needs to be on disk.
            if state.durable >= end_offset.min(state.written) {
                return Ok(());
            }
            if state.syncing {
                state = self.wait_for_pass(state);
                continue;
            }
            if state.file.is_none() {
                return Err(StorageError::Io(std::io::Error::other("log is closed")));
            }
            let (relocked, _) = self.run_pass(state, true);
            state = relocked;
        }
    }

    fn wait_for_pass<'a>(&'a self, state: MutexGuard<'a, SyncState>) -> MutexGuard<'a, SyncState> {
        self.shared
            .synced
            .wait(state)
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Syncs everything pending (rolled segments, snapshots, the directory) and, with
    /// `active`, the active segment's data too, on this thread. Waits for a pass already
    /// running first, so its result is seen.
    pub(crate) fn sync_pending(&self, active: bool) -> Result<(), StorageError> {
        let mut state = self.lock();
        while state.syncing {
            state = self.wait_for_pass(state);
        }
        if let Some(e) = state.failure() {
            return Err(e);
        }
        let (state, result) = self.run_pass(state, active);
        drop(state);
        result
    }

    /// One sync pass, started with the state locked and no pass running; returns the
    /// state locked again.
    fn run_pass<'a>(
        &'a self,
        mut state: MutexGuard<'a, SyncState>,
        active: bool,
    ) -> (MutexGuard<'a, SyncState>, Result<(), StorageError>) {
        let work = SyncWork {
            closed: state.closed.clone(),
            snapshots: state.snapshots.clone(),
            dir_changes: (state.dir_changes != state.dir_synced).then_some(state.dir_changes),
            active: if active && state.durable < state.written {
                state.file.clone()
            } else {
                None
            },
            target: state.written,
            generation: state.generation,
        };
        if active {
            state.flush_active = false;
        }
        if work.is_empty() {
            return (state, Ok(()));
        }
        let observer = state.observer.clone();
        let on_failure = state.on_failure.clone();
        state.syncing = true;
        drop(state);
        let started = Instant::now();
        let result = work.run(&self.shared.dir);
        if let Some(observer) = observer {
            observer(started.elapsed());
        }
        if let (Err(e), Some(on_failure)) = (&result, on_failure) {
            on_failure(&self.shared.dir, e);
        }
        let mut state = self.lock();
        state.syncing = false;
        state.syncs += 1;
        match &result {
            Ok(()) if state.generation == work.generation => {
                state.closed.retain(|c| !work.closed.contains(c));
                state.snapshots.retain(|s| !work.snapshots.contains(s));
                if let Some(changes) = work.dir_changes {
                    state.dir_synced = state.dir_synced.max(changes);
                }
                // Everything below the last synced rolled segment's end is on disk:
                // older segments were synced before, or hold nothing unsynced.
                let synced_to = match (&work.active, work.closed.last()) {
                    (Some(_), _) => work.target,
                    (None, Some(last)) => last.end,
                    (None, None) => state.durable,
                };
                state.durable = state.durable.max(synced_to);
            }
            Ok(()) => {}
            Err(StorageError::Io(e)) => state.failed = Some(crate::error::copy_io_error(e)),
            Err(e) => state.failed = Some(std::io::Error::other(e.to_string())),
        }
        self.shared.synced.notify_all();
        (state, result)
    }

    /// End offset (exclusive) of what is known to be on disk.
    pub fn durable_offset(&self) -> i64 {
        self.lock().durable
    }

    /// Below this offset everything is fsynced, the indexes of rolled segments
    /// included: where a crash recovery starts scanning.
    pub fn recovery_point(&self) -> i64 {
        self.lock().recovery_point()
    }

    /// Sync passes made through this handle so far (waiters, flusher and log).
    pub fn sync_count(&self) -> u64 {
        self.lock().syncs
    }

    /// Rolled segments whose fsync has not happened yet.
    pub fn segments_awaiting_sync(&self) -> usize {
        self.lock().closed.len()
    }

    /// Data up to `end` was written to the active file.
    pub(crate) fn note_written(&self, end: i64) {
        let mut state = self.lock();
        state.written = state.written.max(end);
    }

    /// The active segment was rolled: `closed` (if it holds data) waits for its fsync,
    /// `file` is the new active segment's, and new files exist in the directory.
    pub(crate) fn rolled(&self, closed: Option<(i64, i64)>, file: Arc<SegmentFile>, new_base: i64) {
        let mut state = self.lock();
        if let Some((base, end)) = closed {
            state.closed.push(ClosedSegment { base, end });
        }
        state.file = Some(file);
        state.written = state.written.max(new_base);
        state.dir_changes += 1;
    }

    /// Rolled segments (base, end) found at open above the recovery point: a crash may
    /// have left them in the page cache only.
    pub(crate) fn note_unsynced_segments(&self, segments: impl IntoIterator<Item = (i64, i64)>) {
        let mut state = self.lock();
        for (base, end) in segments {
            state.closed.push(ClosedSegment { base, end });
        }
    }

    /// A producer snapshot was written at `offset` without an fsync.
    pub(crate) fn note_snapshot(&self, offset: i64) {
        self.lock().snapshots.push(offset);
    }

    /// The log start moved to `start`: what lies below it is gone (or unreadable) and
    /// needs no fsync.
    pub(crate) fn note_log_start(&self, start: i64) {
        let mut state = self.lock();
        state.closed.retain(|c| c.end > start);
        state.durable = state.durable.max(start);
        state.written = state.written.max(start);
    }

    /// The log was cut back to `end` (or restarted there) with `file` as active file,
    /// whose segment starts at `active_base`: nothing at or past `end` is written, and a
    /// sync in flight must not claim it.
    pub(crate) fn reset(&self, file: Arc<SegmentFile>, end: i64, active_base: i64, durable: i64) {
        let mut state = self.lock();
        state.file = Some(file);
        state.written = end;
        state.durable = durable.min(end);
        state.closed.retain(|c| c.base < active_base);
        state.snapshots.retain(|&s| s <= end);
        state.generation += 1;
        state.failed = None;
        drop(state);
        self.shared.synced.notify_all();
    }

    /// Copies the checkpoint values the next write persists.
    pub(crate) fn stage(&self, staged: Staged) {
        self.lock().staged = staged;
    }

    /// The next background pass also syncs the active segment (`flush.ms`).
    pub(crate) fn request_active_flush(&self) {
        self.lock().flush_active = true;
    }

    /// The log is closed: later waits for unsynced data fail instead of syncing.
    pub(crate) fn detach_file(&self) {
        self.lock().file = None;
        self.shared.synced.notify_all();
    }

    pub(crate) fn set_observer(&self, observer: Option<FlushObserver>) {
        self.lock().observer = observer;
    }

    pub(crate) fn set_failure_observer(&self, observer: Option<FlushFailureObserver>) {
        self.lock().on_failure = observer;
    }

    /// One pass of the background flusher: everything pending is synced (the active
    /// segment too when `flush.ms` asked), then the checkpoints written.
    pub(crate) fn background_pass(&self) -> Result<(), StorageError> {
        if self.lock_files().detached {
            return Ok(());
        }
        let active = self.lock().flush_active;
        self.sync_pending(active)?;
        self.write_checkpoints()
    }
}
