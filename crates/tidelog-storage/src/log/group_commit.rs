//! Group commit: the write of an append happens under the caller's lock, its fdatasync
//! outside it, shared by every append that reached the file before the sync started.
//!
//! With `flush.messages=1` each request used to fdatasync on its own while holding the
//! partition lock, so N concurrent producers got one writer's fsync rate. Here
//! [`Log::append_group_commit`] writes and returns a [`PendingSync`]; the caller releases
//! its lock and calls [`PendingSync::wait`]. The first waiter to find no sync running
//! syncs everything written so far (rolled segments still waiting for the background
//! flusher first, then the active segment's file); waiters whose end offset that sync
//! covers return without syncing, the others wait for the next one.

use super::{AppendInfo, AppendOptions, DurabilityHandle, Log};
use crate::error::StorageError;

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
    /// without holding the lock that guards the `Log` (and off async workers), or
    /// nobody can share the sync.
    pub fn wait(&self) -> Result<(), StorageError> {
        self.handle.wait_durable(self.end_offset)
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
        Ok((info, self.take_deferred_sync()))
    }

    /// [`Log::append_as_follower`] with the `flush.messages` fsync handed back as for
    /// [`Log::append_group_commit`].
    pub fn append_as_follower_group_commit(
        &mut self,
        batches: &[u8],
    ) -> Result<(AppendInfo, Option<PendingSync>), StorageError> {
        self.defer_flush = true;
        let result = self.append_as_follower(batches);
        self.defer_flush = false;
        let info = result?;
        Ok((info, self.take_deferred_sync()))
    }

    fn take_deferred_sync(&mut self) -> Option<PendingSync> {
        std::mem::take(&mut self.flush_deferred).then(|| PendingSync {
            handle: self.durability.clone(),
            end_offset: self.log_end_offset(),
        })
    }
}
