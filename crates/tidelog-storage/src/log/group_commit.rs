//! Group commit: the write of an append happens under the caller's lock, its fdatasync
//! outside it, shared by every append that reached the file before the sync started.
//!
//! With `flush.messages=1` each request used to fdatasync on its own while holding the
//! partition lock, so N concurrent producers got one writer's fsync rate. Here
//! [`Log::append_group_commit`] writes and returns a [`PendingSync`]; the caller releases
//! its lock and calls [`PendingSync::wait`]. The first waiter to find no sync running
//! syncs the active segment's file up to everything written so far; waiters whose end
//! offset that sync covers return without syncing, the others wait for the next one.

use std::fs::File;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use super::{AppendInfo, AppendOptions, FlushObserver, Log};
use crate::error::StorageError;

/// A cloneable handle on one log's durability: what is written, what is on disk, and
/// the file whose fdatasync makes the rest durable. It shares the active segment's
/// `Arc<File>` (no extra descriptor).
#[derive(Clone)]
pub struct DurabilityHandle {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<SyncState>,
    synced: Condvar,
}

struct SyncState {
    /// The active segment's log file; every segment before it is already synced.
    file: Option<Arc<File>>,
    /// End offset of everything written (exclusive).
    written: i64,
    /// End offset of everything known to be on disk (exclusive).
    durable: i64,
    /// A waiter is running fdatasync right now.
    syncing: bool,
    /// Bumped by truncation: a sync started before it must not raise `durable`.
    generation: u64,
    /// fdatasync calls made through this handle (for tests and benchmarks).
    syncs: u64,
    /// A failed fdatasync leaves durability unknown: every later wait fails until the
    /// log is truncated or reopened.
    failed: Option<(std::io::ErrorKind, String)>,
    observer: Option<FlushObserver>,
}

/// An append that the flush policy says must be durable before it is acknowledged.
#[derive(Clone)]
pub struct PendingSync {
    handle: DurabilityHandle,
    end_offset: i64,
}

impl PendingSync {
    /// The log end offset right after the append (exclusive).
    pub fn end_offset(&self) -> i64 {
        self.end_offset
    }

    /// Blocks until everything below [`PendingSync::end_offset`] is on disk. Call it
    /// without holding the lock that guards the `Log`, or nobody can share the sync.
    pub fn wait(&self) -> Result<(), StorageError> {
        self.handle.wait_durable(self.end_offset)
    }
}

impl DurabilityHandle {
    pub(crate) fn new(file: Arc<File>, end: i64) -> Self {
        DurabilityHandle {
            shared: Arc::new(Shared {
                state: Mutex::new(SyncState {
                    file: Some(file),
                    written: end,
                    durable: end,
                    syncing: false,
                    generation: 0,
                    syncs: 0,
                    failed: None,
                    observer: None,
                }),
                synced: Condvar::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SyncState> {
        // Every update of the state is a few assignments that cannot panic halfway.
        self.shared
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Blocks until every offset below `end_offset` is on disk, running one fdatasync
    /// for everyone written so far when no sync is in progress.
    pub fn wait_durable(&self, end_offset: i64) -> Result<(), StorageError> {
        let mut state = self.lock();
        loop {
            if let Some((kind, msg)) = &state.failed {
                return Err(StorageError::Io(std::io::Error::new(*kind, msg.clone())));
            }
            // A truncation may have cut the log below `end_offset`: then only what is
            // left of it needs to be on disk.
            if state.durable >= end_offset.min(state.written) {
                return Ok(());
            }
            if state.syncing {
                state = self
                    .shared
                    .synced
                    .wait(state)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                continue;
            }
            let Some(file) = state.file.clone() else {
                return Err(StorageError::Io(std::io::Error::other("log is closed")));
            };
            let (target, generation) = (state.written, state.generation);
            let observer = state.observer.clone();
            state.syncing = true;
            drop(state);
            let started = Instant::now();
            let result = crate::fsync::sync_data(&file);
            if let Some(observer) = observer {
                observer(started.elapsed());
            }
            state = self.lock();
            state.syncing = false;
            state.syncs += 1;
            match result {
                Ok(()) if state.generation == generation => {
                    state.durable = state.durable.max(target);
                }
                Ok(()) => {}
                Err(e) => state.failed = Some((e.kind(), e.to_string())),
            }
            self.shared.synced.notify_all();
        }
    }

    /// End offset (exclusive) of what is known to be on disk.
    pub fn durable_offset(&self) -> i64 {
        self.lock().durable
    }

    /// fdatasync calls made by waiters of this handle so far.
    pub fn sync_count(&self) -> u64 {
        self.lock().syncs
    }

    /// Data up to `end` was written to the active file.
    pub(crate) fn note_written(&self, end: i64) {
        let mut state = self.lock();
        state.written = state.written.max(end);
    }

    /// Everything below `end` was synced by the log itself.
    pub(crate) fn note_synced(&self, end: i64) {
        let mut state = self.lock();
        state.durable = state.durable.max(end);
        state.written = state.written.max(end);
        drop(state);
        self.shared.synced.notify_all();
    }

    /// A new active segment; the old one was synced up to `end` before this call.
    pub(crate) fn switch_file(&self, file: Arc<File>, end: i64) {
        let mut state = self.lock();
        state.file = Some(file);
        state.durable = state.durable.max(end);
        state.written = state.written.max(end);
        drop(state);
        self.shared.synced.notify_all();
    }

    /// The log was cut back to `end` (or restarted there with `file` as active file):
    /// nothing at or past `end` is written, and a sync in flight must not claim it.
    pub(crate) fn reset(&self, file: Arc<File>, end: i64, durable: i64) {
        let mut state = self.lock();
        state.file = Some(file);
        state.written = end;
        state.durable = durable.min(end);
        state.generation += 1;
        state.failed = None;
        drop(state);
        self.shared.synced.notify_all();
    }

    /// The log is closed: later waits for unsynced data fail instead of syncing.
    pub(crate) fn detach(&self) {
        self.lock().file = None;
        self.shared.synced.notify_all();
    }

    pub(crate) fn set_observer(&self, observer: Option<FlushObserver>) {
        self.lock().observer = observer;
    }
}

impl Log {
    /// A handle on this log's durability (shared; clone it freely).
    pub fn durability(&self) -> DurabilityHandle {
        self.durability.clone()
    }

    /// Like [`Log::append`], except that when the flush policy (`flush.messages`) wants
    /// the append durable before it is acknowledged, the fdatasync is not done here:
    /// the returned [`PendingSync`] does it (shared with concurrent appends) once the
    /// caller has released its lock. `None` means no sync is required. Dropping the
    /// `PendingSync` unawaited only delays durability to the next flush.
    pub fn append_group_commit(
        &mut self,
        batches: &mut [u8],
        opts: &AppendOptions,
    ) -> Result<(AppendInfo, Option<PendingSync>), StorageError> {
        self.defer_flush = true;
        let result = self.append(batches, opts);
        self.defer_flush = false;
        let info = result?;
        let pending = std::mem::take(&mut self.flush_deferred).then(|| PendingSync {
            handle: self.durability.clone(),
            end_offset: self.log_end_offset(),
        });
        Ok((info, pending))
    }
}
