//! tidelog-storage: one partition's append-only log on disk.
//!
//! A partition is a directory of segments named by their 20-digit base offset
//! (`.log`, `.index`, `.timeindex`, `.txnindex`), producer-state `.snapshot` files and a
//! few checkpoint files; `docs/storage-format.md` shows the layout. Batches are Kafka
//! RecordBatch v2 stored exactly as on the wire, so a fetch is a [`FileSlice`] the server
//! can `sendfile`. Everything is synchronous; every time-dependent call takes `now_ms`.
//!
//! The RecordBatch v2 format itself (header view, records, building, compression) is
//! the `tidelog-records` codec; the types callers use are re-exported here
//! ([`BatchHeader`], [`BatchBuilder`], [`RecordSpec`], [`Codec`], [`BATCH_HEADER_LEN`]).
//!
//! [`Log::append`] checks every batch before writing anything: framing, magic 2, CRC-32C,
//! size under `max.message.bytes`, and then every record of it
//! (`tidelog_records::validate`: each record parses and fills its length, the count
//! matches, offset deltas are 0..n-1, a compacted topic gets keys, compressed records
//! inflate to at most `tidelog_records::max_inflated_bytes`). Nothing of an append is
//! written when one of its batches fails. It then assigns `baseOffset` /
//! `partitionLeaderEpoch`, and for LogAppendTime topics stamps the batch and recomputes
//! its CRC.
//!
//! [`Log::read`] returns whole batches from one segment starting with the batch that
//! contains the requested offset, stopping before any batch whose last offset reaches
//! `upper_bound`, within `max_bytes` except that one batch is always returned.
//!
//! # What the owner of a `Log` calls periodically
//! * [`Log::flush_if_due`] (`flush.ms`), [`Log::roll_if_due`] (`segment.ms`),
//!   [`Log::apply_retention`], [`Log::compact`] (no-op unless the policy compacts; cleans
//!   only below the high watermark and any open transaction),
//!   [`Log::expire_producers`], and now and then [`Log::write_checkpoints`] so a crash
//!   rescans little.
//! * [`Log::set_high_watermark`] after replication advances it; now and then
//!   [`write_high_watermarks`] with every log of a log directory, so the high watermarks
//!   survive a restart in one file per directory (as Kafka keeps them), and after opening
//!   a log, [`Log::set_high_watermark`] with what [`read_high_watermarks`] found for it.
//!
//! # Durability, opening and descriptors
//! The owner of a `Log` calls it under its lock, possibly from an async worker, so the
//! append path never waits for an fsync (every fsync of this crate is counted per
//! thread, [`fsyncs_on_this_thread`], which is how the tests show it):
//! * The append's `write()` into the page cache stays on the caller's thread. It does
//!   not wait for the disk unless the kernel throttles dirty pages, which is back
//!   pressure worth feeling; Kafka writes on its request threads the same way.
//! * [`Log::append_group_commit`] leaves a due `flush.messages` fsync to the returned
//!   [`PendingSync`], which the caller waits on after releasing its lock (off its async
//!   workers): one fdatasync then covers every append written before it (group commit).
//! * With a [`BackgroundFlusher`] attached ([`Log::set_background_flusher`]), a roll
//!   only creates the new segment's files and writes the producer snapshot into the page
//!   cache; the fsyncs of the closed segment (data, indexes, transaction index), of the
//!   snapshot and the directory, and the recovery-point checkpoint run in a flusher
//!   pass, as Kafka's roll schedules the flush of the rolled segment. So do `flush.ms`
//!   ([`Log::flush_if_due`]) and [`Log::write_checkpoints`]; a new leader epoch only
//!   stages the epochs file for the next of them. The recovery point moves only past
//!   what a pass (or a group-commit waiter, which syncs pending rolled segments first)
//!   actually synced: a crash before it rescans the rolled segment, so it is never lost,
//!   only re-verified. Without a flusher the same pass runs on the caller's thread.
//! * Checkpoint files have one writer at a time per log ([`DurabilityHandle`] holds a
//!   lock that the owner's lock never waits behind except in truncation, which must
//!   lower the recovery point on disk before it returns, and close).
//! * A clean open (the `clean-shutdown` marker present, or the log named in its log
//!   directory's [`CLEAN_SHUTDOWN_LIST`]) writes and syncs nothing. A marker must be
//!   gone durably before the first change to the files; the owner removes it off its
//!   lock with [`DurabilityHandle::remove_clean_shutdown_marker`], and a write that
//!   finds it still there removes it itself (one directory fsync). The lists are taken
//!   (read and removed) before any log opens, so they need no removal per log.
//! * [`Log::close`] makes everything durable and writes the marker on the caller's
//!   thread; a pass queued for a closed, deleted or dropped log writes nothing.
//!
//! [`open_logs`] / [`close_logs`] open and close many logs on bounded threads. A log
//! keeps one file descriptor (its active segment's `.log`); closed segments' files are
//! opened on read and cached process-wide, at most [`set_max_open_segment_files`] of
//! them.
//!
//! # Whose directory it is
//! [`Log::open_partition`] / [`open_partition_logs`] check the directory's
//! `partition.metadata` (Kafka's file naming the topic id) before opening: a directory of
//! another topic is renamed to `<name>.<unique>-delete` and a fresh log created; one
//! without the file (an earlier release) is adopted. [`Log::rename_for_deletion`] is the
//! quick first half of deleting a partition; removing the renamed directory is the
//! caller's, after `file.delete.delay.ms`.
//!
//! # Transactions
//! Appending an ABORT control batch (origin [`AppendOrigin::Coordinator`]) records the
//! aborted transaction in the active segment's `.txnindex` by itself; [`Log::aborted_txns`]
//! answers `read_committed` fetches and
//! [`ProducerStateTable::first_unstable_offset`] bounds the last stable offset.
//!
//! # Errors, as Kafka error codes
//! `CorruptMessage` -> CORRUPT_MESSAGE, `InvalidRecord` -> INVALID_RECORD (its
//! [`RecordRefusal`] names the refused records for the response's `record_errors`),
//! `MessageTooLarge` and `DecompressedTooLarge` -> MESSAGE_TOO_LARGE, `OffsetOutOfRange` -> OFFSET_OUT_OF_RANGE,
//! `UnexpectedOffset` (follower) -> refetch/truncate, `Io` -> KAFKA_STORAGE_ERROR (take the
//! log directory offline). `InvalidArgument` is a caller bug.

mod batch;
mod checkpoint;
mod cleaner;
mod config;
mod epoch_cache;
mod error;
mod file_slice;
mod flusher;
mod fsync;
mod index;
mod index_file;
mod log;
mod mmap;
mod parallel;
mod partition_metadata;
mod producer_state;
mod scan;
mod segment;
mod txn_index;

pub use checkpoint::{read_high_watermarks, write_high_watermarks, HIGH_WATERMARKS_FILE};
pub use cleaner::CompactionStats;
pub use config::{CleanupPolicy, LogConfig, TimestampType};
pub use epoch_cache::EpochEntry;
pub use error::{RecordRefusal, StorageError};
pub use file_slice::FileSlice;
pub use flusher::{BackgroundFlusher, FlushFailureObserver};
pub use fsync::fsyncs_on_this_thread;
pub use log::{
    AppendInfo, AppendOptions, AppendOrigin, CleanShutdownLists, DurabilityHandle, FlushObserver,
    Log, PendingSync, ReadResult, CLEAN_SHUTDOWN_LIST,
};
pub use tidelog_records::{
    BatchBuilder, BatchHeader, Codec, RecordError, RecordSpec, BATCH_HEADER_LEN,
};

/// Opens many partition logs in parallel on up to `threads` threads (bounded; at least
/// one), e.g. every partition of a broker at start-up. Results are in the order of
/// `logs`; one log failing to open does not stop the others.
pub fn open_logs(
    logs: Vec<(std::path::PathBuf, LogConfig)>,
    threads: usize,
) -> Vec<Result<Log, StorageError>> {
    log::open_logs(logs, threads)
}

/// [`open_logs`] for partitions of known topics: each directory is first claimed for
/// its topic id ([`claim_partition_dir`]), so a directory of another topic is renamed
/// aside (reported as [`DirClaim::Replaced`]) and never served.
///
/// A log that `clean` names (its log directory's list of logs a clean shutdown closed,
/// taken before the first open) and that still ends where that list says is opened as
/// after a clean shutdown: nothing rescanned. Each entry is claimed by the first open of
/// its directory.
pub fn open_partition_logs(
    logs: Vec<(std::path::PathBuf, uuid::Uuid, LogConfig)>,
    clean: &mut CleanShutdownLists,
    threads: usize,
) -> Vec<Result<(Log, DirClaim), StorageError>> {
    log::open_partition_logs(logs, clean, threads)
}

/// Closes many logs cleanly in parallel on up to `threads` threads, e.g. at broker
/// shutdown: what [`Log::close`] writes, in three steps (data and indexes; checkpoint
/// files; then, instead of a marker in each partition directory, one list per log
/// directory of the logs closed cleanly, [`CLEAN_SHUTDOWN_LIST`]), each made durable by
/// one `syncfs` per filesystem before the next begins, instead of several fsyncs per
/// log (on Linux; elsewhere each log closes by itself and writes its own marker). A
/// log directory's list replaces any list already there: its owner takes the lists
/// ([`CleanShutdownLists::take`]) before opening its logs. A log whose step fails is
/// not listed: the next open recovers it. Results are in the order of `logs`.
pub fn close_logs(logs: Vec<Log>, threads: usize) -> Vec<Result<(), StorageError>> {
    log::close_logs(logs, threads)
}

/// [`DurabilityHandle::remove_clean_shutdown_marker`] for many logs at once (the first
/// writes after a clean start reach many partitions together): the markers are
/// unlinked, then one `syncfs` per filesystem makes that durable, instead of one
/// directory fsync per log. Blocking: call it on a blocking thread. A log whose result
/// is an error keeps its marker flag, and its next write removes it by itself.
pub fn remove_clean_shutdown_markers(
    handles: &[DurabilityHandle],
) -> Vec<Result<(), StorageError>> {
    log::remove_clean_shutdown_markers(handles)
}
pub use partition_metadata::{
    claim_partition_dir, is_delete_dir_name, read_topic_id, rename_for_deletion, write_topic_id,
    DirClaim, DELETE_DIR_SUFFIX, PARTITION_METADATA,
};
pub use producer_state::{BatchMetadata, ProducerEntry, ProducerStateTable, BATCHES_PER_PRODUCER};
pub use segment::{max_open_segment_files, open_segment_files_cached, set_max_open_segment_files};
pub use txn_index::AbortedTxn;

#[cfg(test)]
mod unit_tests;
