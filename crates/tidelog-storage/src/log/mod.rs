//! The partition log: an ordered set of segments and the offsets that describe it.

mod checkpoint_files;
mod clean_list;
mod durability;
mod group_commit;
mod handle;
mod listing;
mod maintenance;
mod many;
mod open;
mod read;

pub use clean_list::{CleanShutdownLists, CLEAN_SHUTDOWN_LIST};
pub use group_commit::PendingSync;
pub use handle::DurabilityHandle;
pub(crate) use handle::Shared;
pub(crate) use listing::DirListing;
pub(crate) use many::{close_logs, remove_clean_shutdown_markers};
pub(crate) use open::parse_base;
pub(crate) use open::{open_logs, open_partition_logs};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::batch::{split_batches, BatchHeader, BatchHeaderMut};
use crate::config::{LogConfig, TimestampType};
use crate::epoch_cache::{EpochEntry, LeaderEpochCache};
use crate::error::StorageError;
use crate::file_slice::FileSlice;
use crate::flusher::BackgroundFlusher;
use crate::partition_metadata::DirClaim;
use crate::producer_state::{CompletedTxn, MarkerInfo, ProducerStateTable};
use crate::segment::{IndexParams, Segment};
use crate::txn_index::AbortedTxn;

/// Who is appending: decides which batches are acceptable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A producer: control batches are refused.
    Client,
    /// A replica fetcher using [`Log::append`] (prefer [`Log::append_as_follower`]).
    Replication,
    /// The broker itself (group/transaction coordinator, transaction markers).
    Coordinator,
}

/// Per-append context.
#[derive(Debug, Clone, Copy)]
pub struct AppendOptions {
    /// Stamped into every batch's `partitionLeaderEpoch`.
    pub leader_epoch: i32,
    /// The broker clock, for LogAppendTime, roll timing and flush timing.
    pub now_ms: i64,
    /// Who is appending.
    pub origin: AppendOrigin,
}

/// What an append did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the first record appended.
    pub first_offset: i64,
    /// Offset of the last record appended.
    pub last_offset: i64,
    /// The stamped time for LogAppendTime topics, -1 otherwise.
    pub log_append_time_ms: i64,
    /// Largest batch max timestamp among the appended batches.
    pub max_timestamp: i64,
    /// Last offset of the batch carrying that timestamp.
    pub offset_of_max_timestamp: i64,
    /// Records appended.
    pub record_count: u32,
    /// Bytes appended.
    pub bytes: usize,
    /// Log start offset after the append.
    pub log_start_offset: i64,
}

/// Result of [`Log::read`].
#[derive(Debug, Clone)]
pub struct ReadResult {
    /// Whole batches from one segment; `None` when there is nothing to return.
    pub slice: Option<FileSlice>,
    /// Base offset of the first batch in `slice` (the requested offset when `None`).
    pub first_batch_offset: i64,
}

/// One partition's log in one directory. Not thread-safe by itself: the broker wraps it
/// in a mutex and does slice I/O outside the lock.
pub struct Log {
    pub(crate) dir: PathBuf,
    pub(crate) config: LogConfig,
    pub(crate) segments: BTreeMap<i64, Segment>,
    log_start_offset: i64,
    high_watermark: i64,
    unflushed_records: u64,
    last_flush_ms: Option<i64>,
    /// Latest clock value seen, for calls that carry none (follower appends).
    last_now_ms: i64,
    /// Where the last compaction pass ended (its horizon); bytes above it are dirty.
    /// In memory only: after an open the whole log counts as dirty once.
    pub(crate) cleaned_up_to: i64,
    /// When the first tombstone the last pass kept passes `delete.retention.ms`
    /// (`i64::MAX`: none); a pass is due then even with nothing dirty.
    pub(crate) tombstones_expire_at: i64,
    producers: ProducerStateTable,
    epochs: LeaderEpochCache,
    /// Written end, durable end, rolled segments awaiting their fsync and the checkpoint
    /// values, shared with group-commit waiters and the background flusher.
    durability: DurabilityHandle,
    /// Where the fsyncs of rolls, `flush.ms` and checkpoints go; `None`: this thread.
    flusher: Option<BackgroundFlusher>,
    /// Set by [`Log::append_group_commit`]: a due flush is left to the caller.
    defer_flush: bool,
    /// A due flush was left to the caller by the last append.
    flush_deferred: bool,
    /// Opened clean from its log directory's list: its recovery-point and epochs files
    /// hold an older pair until a pass writes them ([`Log::checkpoint_if_stale`]).
    checkpoints_behind: bool,
}

/// Receives how long each fsync pass of a log took (see [`Log::set_flush_observer`]).
pub type FlushObserver = std::sync::Arc<dyn Fn(std::time::Duration) + Send + Sync>;

impl Log {
    /// Creates the directory if needed, or recovers an existing log in it.
    pub fn open(dir: &Path, config: LogConfig) -> Result<Log, StorageError> {
        open::open(dir, config, None)
    }

    /// Opens the log of a partition of topic `topic_id` in `dir` after checking whose the
    /// directory is ([`claim_partition_dir`]): a directory of another topic is renamed
    /// aside and a fresh log created, so its records are never served.
    ///
    /// [`claim_partition_dir`]: crate::claim_partition_dir
    pub fn open_partition(
        dir: &Path,
        topic_id: uuid::Uuid,
        config: LogConfig,
    ) -> Result<(Log, DirClaim), StorageError> {
        let claim = crate::partition_metadata::claim_partition_dir(dir, topic_id)?;
        Ok((open::open(dir, config, None)?, claim))
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// Current configuration.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    /// Replaces the configuration; index sizes apply to segments created from now on.
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }
    /// First offset readable.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }
    /// Next offset to be assigned.
    pub fn log_end_offset(&self) -> i64 {
        self.segments
            .values()
            .next_back()
            .map_or(self.log_start_offset, Segment::next_offset)
    }
    /// Offsets below this are replicated (set by the broker).
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }
    /// Offsets below this are known to be on disk, and so are the indexes of every
    /// segment wholly below it: a crash recovery rescans from here.
    pub fn recovery_point(&self) -> i64 {
        self.durability.recovery_point()
    }
    /// Clamps to `[log_start, log_end]`; persisted on flush and close.
    pub fn set_high_watermark(&mut self, hw: i64) {
        self.high_watermark = hw.clamp(self.log_start_offset, self.log_end_offset());
    }
    /// Idempotence state per producer id.
    pub fn producer_state(&self) -> &ProducerStateTable {
        &self.producers
    }
    /// `producer.id.expiration.ms`: forgets idempotent producers (without an open
    /// transaction) whose newest batch is older than `max_idle_ms`. Returns how many.
    pub fn expire_producers(&mut self, now_ms: i64, max_idle_ms: i64) -> usize {
        self.producers
            .remove_idle(now_ms.saturating_sub(max_idle_ms))
    }
    /// The leader-epoch cache, oldest first.
    pub fn leader_epochs(&self) -> &[EpochEntry] {
        self.epochs.entries()
    }
    /// OffsetForLeaderEpoch: largest epoch `<= epoch` and its end offset (for an epoch
    /// older than every known one: that epoch and the first known one's start).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        self.epochs.end_offset_for(epoch, self.log_end_offset())
    }
    /// Total bytes of all segment files.
    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(Segment::size).sum()
    }
    /// Number of segments, the active one included.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }
    /// Base offsets of all segments in order.
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments.keys().copied().collect()
    }

    /// The last segment. Every operation keeps at least one segment; only an I/O error
    /// in the middle of replacing segments can leave none, and then the log refuses work.
    pub(super) fn active(&self) -> Result<&Segment, StorageError> {
        self.segments.values().next_back().ok_or_else(no_segment)
    }
    pub(super) fn active_mut(&mut self) -> Result<&mut Segment, StorageError> {
        self.segments
            .values_mut()
            .next_back()
            .ok_or_else(no_segment)
    }

    pub(crate) fn index_params(&self) -> IndexParams {
        IndexParams {
            index_bytes: self.config.segment_index_bytes.max(64),
            interval_bytes: self.config.index_interval_bytes,
        }
    }

    /// Appends producer batches, assigning offsets. See the crate docs for validation.
    pub fn append(
        &mut self,
        batches: &mut [u8],
        opts: &AppendOptions,
    ) -> Result<AppendInfo, StorageError> {
        self.last_now_ms = self.last_now_ms.max(opts.now_ms);
        let ranges = split_batches(batches, self.config.max_message_bytes)?;
        for &(at, len) in &ranges {
            self.validate_produced(&batches[at..at + len], opts.origin, opts.now_ms)?;
        }
        let first_offset = self.log_end_offset();
        let mut next = first_offset;
        let log_append_time = self.config.message_timestamp_type == TimestampType::LogAppendTime;
        for &(at, len) in &ranges {
            let mut batch = BatchHeaderMut::new(&mut batches[at..at + len])?;
            batch.set_base_offset(next);
            batch.set_partition_leader_epoch(opts.leader_epoch);
            if log_append_time {
                batch.stamp_log_append_time(opts.now_ms);
            }
            let delta = BatchHeader::new(&batches[at..])?.last_offset_delta();
            next = next.saturating_add(i64::from(delta) + 1);
        }
        let mut info = self.write_batches(batches, &ranges, opts.now_ms)?;
        if self.epochs.assign(opts.leader_epoch, first_offset) {
            self.epoch_started();
        }
        info.log_append_time_ms = if log_append_time { opts.now_ms } else { -1 };
        self.after_append(info.record_count, opts.now_ms)?;
        Ok(info)
    }

    /// Appends batches that already carry offsets (replication): CRC and ordering are
    /// checked, nothing is rewritten.
    pub fn append_as_follower(&mut self, batches: &[u8]) -> Result<AppendInfo, StorageError> {
        let ranges = split_batches(batches, i32::MAX as u32)?;
        let mut expected = self.log_end_offset();
        for &(at, _) in &ranges {
            let h = BatchHeader::new(&batches[at..])?;
            if h.base_offset() < expected {
                return Err(StorageError::UnexpectedOffset {
                    expected,
                    got: h.base_offset(),
                });
            }
            expected = h.last_offset().saturating_add(1);
        }
        let now = self.last_now_ms;
        let info = self.write_batches(batches, &ranges, now)?;
        let mut epochs_changed = false;
        for &(at, _) in &ranges {
            let h = BatchHeader::new(&batches[at..])?;
            epochs_changed |= self
                .epochs
                .assign(h.partition_leader_epoch(), h.base_offset());
        }
        if epochs_changed {
            self.epoch_started();
        }
        self.after_append(info.record_count, now)?;
        Ok(info)
    }

    /// Every record of every batch is parsed and checked before anything is written
    /// (see `tidelog_records::validate`): a stored batch is always one that consumers,
    /// compaction and recovery can read. Batches the broker wrote itself skip only the
    /// rules that are about what a producer may send.
    fn validate_produced(
        &self,
        batch: &[u8],
        origin: AppendOrigin,
        now_ms: i64,
    ) -> Result<(), StorageError> {
        let timestamps = match self.config.message_timestamp_type {
            TimestampType::CreateTime => tidelog_records::TimestampWindow::around(
                now_ms,
                self.config.message_timestamp_before_max_ms,
                self.config.message_timestamp_after_max_ms,
            ),
            TimestampType::LogAppendTime => None,
        };
        let rules = tidelog_records::Rules {
            from_client: origin == AppendOrigin::Client,
            require_keys: self.config.cleanup_policy.compact,
            max_inflated_bytes: tidelog_records::max_inflated_bytes(self.config.max_message_bytes),
            timestamps,
        };
        tidelog_records::validate(batch, &rules)?;
        Ok(())
    }

    /// Common tail of both appends: roll if due, write, index, producer state.
    fn write_batches(
        &mut self,
        buf: &[u8],
        ranges: &[(usize, usize)],
        now_ms: i64,
    ) -> Result<AppendInfo, StorageError> {
        let first = BatchHeader::new(buf)?;
        let last_at = ranges.last().map_or(0, |r| r.0);
        let last = BatchHeader::new(&buf[last_at..])?;
        self.prepare_write()?;
        let segment_bytes = self.config.effective_segment_bytes();
        let active = self.active()?;
        if !active.fits(last.last_offset(), buf.len() as u64, segment_bytes)
            || first.base_offset() - active.base_offset() > i64::from(u32::MAX)
            || self.segment_ms_due(now_ms)
        {
            // The new segment starts where the closed one ended, even when a follower's
            // batch starts later (the leader compacted the gap away): crash recovery
            // then reads a closed segment that ends before its successor's base as a
            // lost unflushed tail. Only a gap too wide for the index's relative offsets
            // starts the segment at the batch.
            let end = self.log_end_offset();
            let gap = first.base_offset() - end;
            let base = if (0..=i64::from(u32::MAX / 2)).contains(&gap) {
                end
            } else {
                first.base_offset()
            };
            self.roll_at(base)?;
        }
        self.active_mut()?.append(buf, ranges, now_ms)?;
        self.durability.note_written(self.log_end_offset());
        let mut info = AppendInfo {
            first_offset: first.base_offset(),
            last_offset: last.last_offset(),
            log_append_time_ms: -1,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            record_count: 0,
            bytes: buf.len(),
            log_start_offset: self.log_start_offset,
        };
        for &(at, len) in ranges {
            let batch = &buf[at..at + len];
            let h = BatchHeader::new(batch)?;
            if h.max_timestamp() > info.max_timestamp {
                info.max_timestamp = h.max_timestamp();
                info.offset_of_max_timestamp = h.last_offset();
            }
            info.record_count = info
                .record_count
                .saturating_add(h.record_count().max(0) as u32);
            let marker = h.is_control().then(|| MarkerInfo::of(batch));
            if let Some(done) = self.producers.update(&h, marker) {
                self.record_completed_txn(done)?;
            }
        }
        Ok(info)
    }

    /// An ABORT marker lands in the active segment's `.txnindex`.
    fn record_completed_txn(&mut self, done: CompletedTxn) -> Result<(), StorageError> {
        if !done.aborted {
            return Ok(());
        }
        let lso = self
            .producers
            .first_unstable_offset()
            .unwrap_or(done.marker_offset.saturating_add(1));
        self.add_aborted_txn(AbortedTxn {
            producer_id: done.producer_id,
            first_offset: done.first_offset,
            last_offset: done.marker_offset,
            last_stable_offset: lso,
        })
    }

    /// Adds an aborted-transaction entry to the active segment's `.txnindex`. Appending an
    /// ABORT control batch already does this; call it only for entries the log cannot see.
    pub fn add_aborted_txn(&mut self, txn: AbortedTxn) -> Result<(), StorageError> {
        self.active_mut()?.txn_index_mut().append(txn)?;
        Ok(())
    }

    /// Aborted transactions overlapping `[from, to)`, in marker order.
    pub fn aborted_txns(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        self.segments
            .values()
            .flat_map(|s| s.txn_index().entries().iter().copied())
            .filter(|t| t.last_offset >= from && t.first_offset < to)
            .collect()
    }

    fn after_append(&mut self, records: u32, now_ms: i64) -> Result<(), StorageError> {
        self.unflushed_records = self.unflushed_records.saturating_add(u64::from(records));
        if self.unflushed_records >= self.config.flush_messages {
            if self.defer_flush {
                // The caller's PendingSync makes it durable; the recovery point catches
                // up with the durable end at the next checkpoint.
                self.flush_deferred = true;
                self.unflushed_records = 0;
            } else {
                self.flush_data()?;
            }
            self.last_flush_ms = Some(now_ms);
        }
        Ok(())
    }

    /// Before the first change to the files after a clean open: remove the clean-shutdown
    /// marker (durably, so a crash from here on is recovered) and make the active
    /// segment's indexes appendable again.
    pub(super) fn prepare_write(&mut self) -> Result<(), StorageError> {
        self.mark_dirty()?;
        if self.active()?.indexes_full() {
            // Trimmed at close; preallocating again is deferred to here so that opening
            // a log writes nothing.
            self.active_mut()?.unseal()?;
        }
        Ok(())
    }

    /// Removes the clean-shutdown marker before the first change to the files, on this
    /// thread unless the owner already did it off its lock
    /// ([`DurabilityHandle::remove_clean_shutdown_marker`]). It must be gone durably
    /// before anything is written: the kernel may write appended pages back at any
    /// moment, and a marker that survived a crash next to them would make the next open
    /// trust a torn tail.
    pub(super) fn mark_dirty(&mut self) -> Result<(), StorageError> {
        self.durability.remove_clean_shutdown_marker()
    }

    /// Closes the log and renames its directory aside for deletion
    /// ([`rename_for_deletion`]), returning the new path: a quick, atomic step that
    /// frees the name at once, leaving the slow removal of the files to a later
    /// `remove_dir_all` of the returned path.
    ///
    /// [`rename_for_deletion`]: crate::rename_for_deletion
    pub fn rename_for_deletion(self) -> Result<PathBuf, StorageError> {
        self.durability.detach();
        let dir = self.dir.clone();
        drop(self);
        crate::partition_metadata::rename_for_deletion(&dir)
    }

    /// Removes the whole partition directory.
    pub fn delete(self) -> Result<(), StorageError> {
        self.durability.detach();
        let dir = self.dir.clone();
        drop(self);
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}

impl Drop for Log {
    /// A log dropped without [`Log::close`] is a crash as far as its files go: no
    /// background pass writes them afterwards (one in progress finishes first).
    fn drop(&mut self) {
        self.durability.detach();
    }
}

fn no_segment() -> StorageError {
    StorageError::Io(std::io::Error::other(
        "log has no active segment after an earlier I/O error; reopen it",
    ))
}
