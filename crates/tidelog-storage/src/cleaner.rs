//! Log compaction: keep the newest record per key in closed segments.
//!
//! Cleanable: closed segments wholly below the high watermark, the checkpointed recovery
//! point (so recovery never rescans a cleaned segment) and the first offset of any open
//! transaction, and (if `min.compaction.lag.ms` > 0) whose newest timestamp is
//! at least that old; the first segment that fails a test ends the cleanable range.
//! A pass cleans only when it is worth it, as Kafka's cleaner chooses logs: the bytes
//! written since the last pass ("dirty", above its horizon) are at least
//! `min.cleanable.dirty.ratio` of the cleanable bytes, or the oldest dirty segment's first
//! record is older than `max.compaction.lag.ms`, or a tombstone the last pass kept has
//! since passed `delete.retention.ms`.
//! Each cleanable segment is rewritten on its own (segments are not merged). Batches in
//! which every record survives are copied byte for byte; batches that lose records are
//! rewritten *uncompressed* with the surviving records' bytes unchanged (same base offset,
//! offset deltas, timestamps, producer fields, lastOffsetDelta), so offsets are preserved
//! and the CRC is recomputed; batches that lose every record are dropped. Batches of
//! aborted transactions are dropped and never count as a key's newest value. Control
//! batches are kept. A segment that loses everything stays as an empty file until retention.
//!
//! Crash-safe swap for segment `B`: write `B.log.cleaned`, fsync, rename to `B.log.swap`,
//! fsync the directory (the commit point), delete `B.index`/`B.timeindex`, rename
//! `B.log.swap` over `B.log`, fsync the directory, rebuild the indexes. On open,
//! `.cleaned` files are discarded (the old segment is intact) and a `.log.swap` is
//! completed (it is whole and durable).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use tidelog_records::{
    assemble_batch, attributes_without_codec, records_block, BatchFields, RecordIter,
};

use crate::batch::{BatchHeader, MAX_DECOMPRESSED};
use crate::checkpoint::sync_dir;
use crate::error::StorageError;
use crate::log::{DirListing, Log};
use crate::scan::{read_batch, BatchScan};
use crate::segment::{file_name, Segment};
use crate::txn_index::AbortedTxn;

/// Key bytes the cleaner holds in memory per pass; segments beyond are left for next time.
const MAX_KEY_MAP_BYTES: usize = 256 << 20;

/// What one [`Log::compact`] pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionStats {
    /// Segments rewritten.
    pub segments_cleaned: usize,
    /// Records dropped (superseded or expired tombstones).
    pub records_removed: u64,
    /// Size of the rewritten segments before.
    pub bytes_before: u64,
    /// Size of the rewritten segments after.
    pub bytes_after: u64,
    /// First offset the pass did not touch (base of the first uncleanable segment).
    pub horizon: i64,
}

/// Completes or discards compaction swaps a crash interrupted; removes temp files.
/// Returns whether it changed anything (`listing`, taken before, is then stale).
pub(crate) fn finish_interrupted_swaps(
    dir: &Path,
    listing: &DirListing,
) -> Result<bool, StorageError> {
    let mut changed = false;
    for name in listing.names() {
        if name.ends_with(".cleaned") || name.ends_with(".tmp") || name.ends_with(".deleted") {
            std::fs::remove_file(dir.join(name))?;
            changed = true;
        } else if let Some(stem) = name.strip_suffix(".swap") {
            if let Some(base) = crate::log::parse_base(stem, "log") {
                for ext in ["index", "timeindex"] {
                    let _ = std::fs::remove_file(dir.join(file_name(base, ext)));
                }
                std::fs::rename(dir.join(name), dir.join(file_name(base, "log")))?;
                changed = true;
            }
        }
    }
    if changed {
        sync_dir(dir)?;
    }
    Ok(changed)
}

impl Log {
    /// One cleaning pass over the closed segments older than `min.compaction.lag.ms`.
    /// No-op unless `cleanup.policy` includes `compact`.
    pub fn compact(&mut self, now_ms: i64) -> Result<CompactionStats, StorageError> {
        let mut stats = CompactionStats {
            horizon: self.segments.keys().next().copied().unwrap_or(0),
            ..CompactionStats::default()
        };
        if !self.config.cleanup_policy.compact {
            return Ok(stats);
        }
        let lag_limit = now_ms.saturating_sub(self.config.min_compaction_lag_ms);
        // Never clean what is not yet replicated or belongs to an open transaction.
        let stable = self.high_watermark().min(
            self.producer_state()
                .first_unstable_offset()
                .unwrap_or(i64::MAX),
        );
        // Nor what a crash recovery would rescan: a cleaned segment may end before its
        // successor's base, which recovery reads as a lost tail (see `log::open`).
        let rescanned_from = self
            .durability()
            .checkpointed_recovery_point()
            .unwrap_or(i64::MIN);
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        let mut cleanable = Vec::new();
        for pair in bases.windows(2) {
            let Some(seg) = self.segments.get(&pair[0]) else {
                break;
            };
            if pair[1] > stable
                || pair[1] > rescanned_from
                || (self.config.min_compaction_lag_ms > 0 && seg.max_timestamp() > lag_limit)
            {
                break;
            }
            cleanable.push(pair[0]);
            stats.horizon = pair[1];
        }
        if !self.compaction_due(&cleanable, now_ms) {
            stats.horizon = self.segments.keys().next().copied().unwrap_or(0);
            return Ok(stats);
        }
        let aborted = self.aborted_txns(i64::MIN, stats.horizon);
        let mut latest: HashMap<Vec<u8>, i64> = HashMap::new();
        let mut key_bytes = 0usize;
        let mut mapped = Vec::new();
        for &base in &cleanable {
            let Some(seg) = self.segments.get(&base) else {
                break;
            };
            let complete = map_keys(seg, &aborted, &mut latest, &mut key_bytes)?;
            if !complete {
                stats.horizon = base;
                break;
            }
            mapped.push(base);
        }
        let mut tombstones_expire_at = i64::MAX;
        for base in mapped {
            self.clean_segment(
                base,
                &latest,
                &aborted,
                now_ms,
                &mut stats,
                &mut tombstones_expire_at,
            )?;
        }
        self.cleaned_up_to = stats.horizon;
        self.tombstones_expire_at = tombstones_expire_at;
        Ok(stats)
    }

    /// Whether cleaning the `cleanable` segments is due (see the module doc).
    fn compaction_due(&self, cleanable: &[i64], now_ms: i64) -> bool {
        let (mut total, mut dirty) = (0u64, 0u64);
        let mut oldest_dirty: Option<i64> = None;
        for base in cleanable {
            let Some(seg) = self.segments.get(base) else {
                continue;
            };
            total = total.saturating_add(seg.size());
            if *base >= self.cleaned_up_to {
                dirty = dirty.saturating_add(seg.size());
                if oldest_dirty.is_none() {
                    oldest_dirty = Some(seg.first_append_ms().unwrap_or(seg.max_timestamp()));
                }
            }
        }
        if total > 0 && self.tombstones_expire_at <= now_ms {
            return true;
        }
        if dirty == 0 {
            return false;
        }
        let lag_due = self.config.max_compaction_lag_ms < i64::MAX
            && oldest_dirty
                .is_some_and(|t| now_ms.saturating_sub(t) >= self.config.max_compaction_lag_ms);
        lag_due || dirty as f64 >= self.config.min_cleanable_dirty_ratio * total as f64
    }

    fn clean_segment(
        &mut self,
        base: i64,
        latest: &HashMap<Vec<u8>, i64>,
        aborted: &[AbortedTxn],
        now_ms: i64,
        stats: &mut CompactionStats,
        tombstones_expire_at: &mut i64,
    ) -> Result<(), StorageError> {
        let Some(seg) = self.segments.get(&base) else {
            return Ok(());
        };
        let cleaned_path = self.dir.join(format!("{}.cleaned", file_name(base, "log")));
        let mut out = BufWriter::new(File::create(&cleaned_path)?);
        let mut removed = 0u64;
        let mut written = 0u64;
        let mut scan = BatchScan::new(seg.log_file()?, 0, seg.size());
        while let Some(batch) = scan.next_batch()? {
            let bytes = read_batch(scan.file(), &batch)?;
            let h = BatchHeader::new(&bytes)?;
            if h.is_control() {
                out.write_all(&bytes)?;
                written += bytes.len() as u64;
                continue;
            }
            if is_aborted(&h, aborted) {
                removed += h.record_count().max(0) as u64;
                continue;
            }
            let block = records_block(&bytes, MAX_DECOMPRESSED)?;
            let mut kept: Vec<u8> = Vec::new();
            let (mut total, mut kept_count) = (0i32, 0i32);
            for record in RecordIter::new(&block, h.record_count()) {
                let record = record?;
                total += 1;
                let offset = h
                    .base_offset()
                    .saturating_add(i64::from(record.offset_delta));
                let ts = h.record_timestamp(record.timestamp_delta);
                let newest = record
                    .key
                    .is_none_or(|k| latest.get(k).is_none_or(|&o| o == offset));
                let expired_tombstone = record.value.is_none()
                    && ts.saturating_add(self.config.delete_retention_ms) <= now_ms;
                if newest && !expired_tombstone {
                    kept.extend_from_slice(record.raw);
                    kept_count += 1;
                    if record.value.is_none() {
                        let expires = ts.saturating_add(self.config.delete_retention_ms);
                        *tombstones_expire_at = (*tombstones_expire_at).min(expires);
                    }
                }
            }
            removed += (total - kept_count) as u64;
            if kept_count == total {
                out.write_all(&bytes)?;
                written += bytes.len() as u64;
            } else if kept_count > 0 {
                let rebuilt = assemble_batch(
                    &BatchFields {
                        base_offset: h.base_offset(),
                        partition_leader_epoch: h.partition_leader_epoch(),
                        attributes: attributes_without_codec(h.attributes()),
                        last_offset_delta: h.last_offset_delta(),
                        base_timestamp: h.base_timestamp(),
                        max_timestamp: h.max_timestamp(),
                        producer_id: h.producer_id(),
                        producer_epoch: h.producer_epoch(),
                        base_sequence: h.base_sequence(),
                        record_count: kept_count,
                    },
                    &kept,
                )?;
                out.write_all(&rebuilt)?;
                written += rebuilt.len() as u64;
            }
        }
        let file = out.into_inner().map_err(|e| e.into_error())?;
        if removed == 0 {
            drop(file);
            std::fs::remove_file(&cleaned_path)?;
            return Ok(());
        }
        crate::fsync::sync_all(&file)?;
        drop(file);
        stats.bytes_before += seg.size();
        stats.bytes_after += written;
        stats.records_removed += removed;
        stats.segments_cleaned += 1;
        self.swap_in(base, &cleaned_path)
    }

    fn swap_in(&mut self, base: i64, cleaned: &Path) -> Result<(), StorageError> {
        let swap = self.dir.join(format!("{}.swap", file_name(base, "log")));
        std::fs::rename(cleaned, &swap)?;
        sync_dir(&self.dir)?;
        // Readers holding the old segment's Arc<File> keep seeing the old bytes.
        drop(self.segments.remove(&base));
        for ext in ["index", "timeindex"] {
            let _ = std::fs::remove_file(self.dir.join(file_name(base, ext)));
        }
        std::fs::rename(&swap, self.dir.join(file_name(base, "log")))?;
        sync_dir(&self.dir)?;
        let (mut segment, _) = Segment::open(&self.dir, base, self.index_params(), false, 0, true)?;
        segment.seal()?;
        segment.sync()?;
        self.segments.insert(base, segment);
        Ok(())
    }
}

/// Data of an aborted transaction: never visible to read_committed readers, so it must
/// neither supersede older values nor survive cleaning.
fn is_aborted(h: &BatchHeader<'_>, aborted: &[AbortedTxn]) -> bool {
    h.is_transactional()
        && aborted.iter().any(|t| {
            t.producer_id == h.producer_id()
                && h.base_offset() >= t.first_offset
                && h.base_offset() <= t.last_offset
        })
}

/// Adds every keyed record of `seg` to the map; false if the memory bound was hit.
fn map_keys(
    seg: &Segment,
    aborted: &[AbortedTxn],
    latest: &mut HashMap<Vec<u8>, i64>,
    key_bytes: &mut usize,
) -> Result<bool, StorageError> {
    let mut scan = BatchScan::new(seg.log_file()?, 0, seg.size());
    while let Some(batch) = scan.next_batch()? {
        if batch.header().is_control() || is_aborted(&batch.header(), aborted) {
            continue;
        }
        let bytes = read_batch(scan.file(), &batch)?;
        let h = BatchHeader::new(&bytes)?;
        let block = records_block(&bytes, MAX_DECOMPRESSED)?;
        for record in RecordIter::new(&block, h.record_count()) {
            let record = record?;
            let Some(key) = record.key else { continue };
            let offset = h
                .base_offset()
                .saturating_add(i64::from(record.offset_delta));
            if let Some(slot) = latest.get_mut(key) {
                *slot = offset;
            } else {
                *key_bytes += key.len() + 32;
                latest.insert(key.to_vec(), offset);
                if *key_bytes > MAX_KEY_MAP_BYTES {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}
