//! Opening a log directory: hygiene, segment loading, crash recovery.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::checkpoint_files::{Checkpointed, Staged};
use super::clean_list::{CleanShutdownLists, ClosedCleanly};
use super::handle::{DurabilityHandle, OpenedAs};
use super::listing::DirListing;
use super::Log;
use crate::checkpoint::{
    self, CLEAN_SHUTDOWN, LEADER_EPOCH, LEGACY_HIGH_WATERMARK, LOG_START, RECOVERY_POINT,
};
use crate::cleaner::finish_interrupted_swaps;
use crate::config::LogConfig;
use crate::epoch_cache::LeaderEpochCache;
use crate::error::StorageError;
use crate::producer_state::ProducerStateTable;
use crate::segment::{IndexParams, Segment};

/// Parses `<20 digits>.<ext>` into the base offset.
pub(crate) fn parse_base(name: &str, ext: &str) -> Option<i64> {
    let stem = name.strip_suffix(ext)?.strip_suffix('.')?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}

/// Sorted base offsets of files named `<base>.<ext>` in `dir`.
pub(crate) fn list_bases(dir: &Path, ext: &str) -> Result<Vec<i64>, StorageError> {
    let mut bases = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        if let Some(base) = name.to_str().and_then(|n| parse_base(n, ext)) {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

/// Deletes index files whose `.log` is gone (a crash during segment deletion).
fn remove_orphans(dir: &Path, logs: &[i64], listing: &mut DirListing) -> Result<(), StorageError> {
    for ext in ["index", "timeindex", "txnindex"] {
        for base in listing.bases(ext) {
            if logs.binary_search(&base).is_err() {
                let name = crate::segment::file_name(base, ext);
                std::fs::remove_file(dir.join(&name))?;
                listing.forget(&name);
            }
        }
    }
    Ok(())
}

/// Opens (or creates) the log in `dir`. `closed`: its entry in its log directory's list
/// of logs closed cleanly, if that named it; it counts only if the log still ends there.
pub(super) fn open(
    dir: &Path,
    config: LogConfig,
    closed: Option<ClosedCleanly>,
) -> Result<Log, StorageError> {
    if !dir.is_dir() {
        std::fs::create_dir_all(dir)?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            checkpoint::sync_dir(parent)?;
        }
    }
    // The marker stays until the first change to the files (`Log::mark_dirty`), so a
    // clean open writes and syncs nothing.
    let mut listing = DirListing::read(dir)?;
    let marker_file = listing.contains(CLEAN_SHUTDOWN);
    if finish_interrupted_swaps(dir, &listing)? {
        listing = DirListing::read(dir)?;
    }
    let bases = listing.bases("log");
    let opened_as = if marker_file {
        OpenedAs::CleanByMarker
    } else if closed.as_ref().is_some_and(|c| c.still_holds(dir, &bases)) {
        OpenedAs::CleanByList
    } else {
        OpenedAs::Recovered
    };
    let clean = opened_as != OpenedAs::Recovered;
    // Opened clean from the list: its entry holds the epochs, and the recovery-point
    // and epochs files an older pair, not read (nothing is rescanned).
    let listed = closed.filter(|_| opened_as == OpenedAs::CleanByList);
    remove_orphans(dir, &bases, &mut listing)?;
    // A checkpoint file that is not listed is not opened (it would read as None).
    let read_offset = |name| {
        listing
            .contains(name)
            .then(|| checkpoint::read_offset(dir, name))
            .flatten()
    };
    let recovery_read = listed
        .is_none()
        .then(|| read_offset(RECOVERY_POINT))
        .flatten();
    let recovery_ck = recovery_read.unwrap_or(0);
    // An unreadable checkpoint says nothing about which segments the cleaner rewrote,
    // so a short segment cannot be told from a lost tail; a missing one means none was.
    let trust_segment_ends = recovery_read.is_some() || !listing.contains(RECOVERY_POINT);
    let start_ck = read_offset(LOG_START);
    // An earlier release kept the high watermark in the partition's directory; the
    // owner of the logs restores it from the log directory's file when that names it.
    let hw_ck = read_offset(LEGACY_HIGH_WATERMARK);
    let legacy_high_watermark = listing.contains(LEGACY_HIGH_WATERMARK);
    let epochs_read = (listed.is_none() && listing.contains(LEADER_EPOCH))
        .then(|| checkpoint::read_epochs(dir))
        .flatten();
    let checkpoints_behind = listed.is_some();
    let epochs = match listed {
        Some(entry) => entry.epochs,
        None => epochs_read.clone().unwrap_or_default(),
    };
    let params = IndexParams {
        index_bytes: config.segment_index_bytes.max(64),
        interval_bytes: config.index_interval_bytes,
    };

    let mut segments = BTreeMap::new();
    let mut truncated_any = false;
    for (i, &base) in bases.iter().enumerate() {
        let next_base = bases.get(i + 1).copied();
        let recover = !clean && next_base.is_none_or(|n| n > recovery_ck);
        let has_txn_index = listing.contains(&crate::segment::file_name(base, "txnindex"));
        let (mut segment, outcome) =
            Segment::open(dir, base, params, recover, recovery_ck, has_txn_index)?;
        truncated_any |= outcome.truncated_bytes > 0;
        if outcome.truncated_bytes > 0 {
            let end = segment.next_offset();
            segment.txn_index_mut().truncate_to(end)?;
        }
        if outcome.rebuilt_indexes && next_base.is_some() {
            segment.seal()?;
        }
        // A closed segment ends where its successor begins (rolls start the next one
        // at the end of the last), unless the cleaner shortened it, and the cleaner only
        // rewrites segments below the checkpointed recovery point, which are not
        // rescanned here. So a rescanned one that ends early lost an unflushed tail
        // while a later file's pages reached the disk (a power cut, not a process crash).
        let lost_tail =
            trust_segment_ends && next_base.is_some_and(|next| segment.next_offset() < next);
        segments.insert(base, segment);
        if recover && (outcome.truncated_bytes > 0 || lost_tail) && next_base.is_some() {
            // A torn batch or a lost tail in the unflushed part means everything after
            // it was written later and never made durable in order: drop the later
            // segments, as Kafka does for a torn batch.
            truncated_any = true;
            tracing::warn!(dir = %dir.display(), base, lost_tail, "dropping segments after a corrupt or cut segment");
            for &later in &bases[i + 1..] {
                crate::segment::remove_files(dir, later)?;
            }
            break;
        }
    }
    let created = segments.is_empty();
    if created {
        let base = start_ck.unwrap_or(0).max(0);
        segments.insert(base, Segment::create(dir, base, params)?);
    }
    let active_file = segments
        .values()
        .next_back()
        .map(Segment::shared_file)
        .ok_or_else(super::no_segment)?;
    let first_base = segments.keys().next().copied().unwrap_or(0);
    let log_end = segments
        .values()
        .next_back()
        .map_or(0, Segment::next_offset);
    let log_start = start_ck.unwrap_or(first_base).max(first_base).min(log_end);
    let recovery_point = if clean {
        log_end
    } else {
        recovery_ck.min(log_end)
    };
    // Closed segments above the recovery point may be in the page cache only (the
    // process crashed, not the machine): they are synced like freshly rolled ones.
    let unsynced: Vec<(i64, i64)> = segments
        .iter()
        .take(segments.len().saturating_sub(1))
        .filter(|(_, s)| s.next_offset() > recovery_point)
        .map(|(&base, s)| (base, s.next_offset()))
        .collect();
    let known = Checkpointed {
        recovery_point: recovery_read,
        log_start: start_ck,
        epochs: epochs_read,
        legacy_high_watermark,
    };
    let durability = DurabilityHandle::new(
        dir,
        active_file,
        log_end,
        recovery_point,
        Staged::default(),
        known,
        opened_as,
    );
    durability.note_unsynced_segments(unsynced);
    let mut log = Log {
        dir: dir.to_path_buf(),
        config,
        segments,
        log_start_offset: log_start,
        high_watermark: hw_ck.unwrap_or(log_start).clamp(log_start, log_end),
        unflushed_records: 0,
        last_flush_ms: None,
        last_now_ms: 0,
        cleaned_up_to: i64::MIN,
        tombstones_expire_at: i64::MAX,
        producers: ProducerStateTable::default(),
        epochs: LeaderEpochCache::from_pairs(&epochs),
        durability,
        flusher: None,
        defer_flush: false,
        flush_deferred: false,
        checkpoints_behind,
    };
    if created {
        log.mark_dirty()?;
    }
    if truncated_any {
        // A cut tail is made durable before new data can land where it was; the
        // recovery point moves with it (its checkpoint follows at the next flush or
        // housekeeping pass). An intact unflushed tail is left for the kernel to write
        // back: the recovery point stays below it, so another crash rescans it.
        log.flush_data()?;
    }
    log.epochs.truncate_from_end(log_end);
    if !clean {
        log.restore_epochs_from(recovery_point)?;
    }
    log.epochs.truncate_from_start(log.log_start_offset);
    log.stage_checkpoints();
    log.rebuild_producer_state(recovery_point)?;
    Ok(log)
}

impl Log {
    /// Adds the leader epochs of the batches from `from` on (the part a crash recovery
    /// rescanned), so the epochs file need not be on disk before the data it describes:
    /// every batch carries the epoch it was written in. Stale entries past the log end
    /// are dropped before this, so an epoch that restarts lower after a truncation is
    /// accepted.
    fn restore_epochs_from(&mut self, from: i64) -> Result<(), StorageError> {
        let floor = self
            .segments
            .range(..=from)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        for (&base, segment) in self.segments.range(floor..) {
            let mut scan = segment.scan_from(from.max(base))?;
            while let Some(batch) = scan.next_batch()? {
                let h = batch.header();
                if h.base_offset() >= from {
                    self.epochs
                        .assign(h.partition_leader_epoch(), h.base_offset());
                }
            }
        }
        Ok(())
    }
}

/// Opens many logs on up to `threads` threads at once (at least one), for a broker
/// starting with many partitions: opening is mostly waiting for small reads, and after a
/// crash for recovery scans. Results come back in the order of `logs`.
pub(crate) fn open_logs(
    logs: Vec<(PathBuf, LogConfig)>,
    threads: usize,
) -> Vec<Result<Log, StorageError>> {
    crate::parallel::map_bounded(logs, threads, |(dir, config)| open(&dir, config, None))
}

/// [`open_logs`] for partitions of known topics: each directory is claimed for its topic
/// id first (see [`Log::open_partition`]).
pub(crate) fn open_partition_logs(
    logs: Vec<(PathBuf, uuid::Uuid, LogConfig)>,
    clean: &mut CleanShutdownLists,
    threads: usize,
) -> Vec<Result<(Log, crate::DirClaim), StorageError>> {
    let logs: Vec<_> = logs
        .into_iter()
        .map(|(dir, topic_id, config)| {
            let closed = clean.claim(&dir);
            (dir, topic_id, config, closed)
        })
        .collect();
    crate::parallel::map_bounded(logs, threads, |(dir, topic_id, config, closed)| {
        let claim = crate::partition_metadata::claim_partition_dir(&dir, topic_id)?;
        Ok((open(&dir, config, closed)?, claim))
    })
}
