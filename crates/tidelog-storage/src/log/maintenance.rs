//! Retention, DeleteRecords, truncation, and producer-state rebuilding.

use super::Log;
use crate::error::StorageError;
use crate::producer_state::{MarkerInfo, ProducerStateTable};
use crate::scan::read_batch;
use crate::segment::{file_name, Segment};
use crate::txn_index::AbortedTxn;

/// Control batches are tiny; anything bigger claiming to be one is not read for its marker.
const MAX_CONTROL_BATCH: u64 = 1 << 20;

impl Log {
    /// Deletes whole closed segments past `retention.ms` (by their newest timestamp) and
    /// `retention.bytes`, plus segments wholly below the log start offset. Never the active
    /// segment. Returns how many were deleted.
    pub fn apply_retention(&mut self, now_ms: i64) -> Result<usize, StorageError> {
        let mut deleted = 0;
        if self.config.cleanup_policy.delete {
            if self.config.retention_ms >= 0 {
                while let Some(first) = self.oldest_closed() {
                    let expired = if first.size() == 0 {
                        true
                    } else {
                        first.max_timestamp() >= 0
                            && now_ms.saturating_sub(first.max_timestamp())
                                > self.config.retention_ms
                    };
                    if !expired {
                        break;
                    }
                    self.delete_oldest_segment()?;
                    deleted += 1;
                }
            }
            if self.config.retention_bytes >= 0 {
                let mut excess = self.size_bytes() as i64 - self.config.retention_bytes;
                while let Some(first) = self.oldest_closed() {
                    let size = first.size() as i64;
                    if excess - size < 0 {
                        break;
                    }
                    excess -= size;
                    self.delete_oldest_segment()?;
                    deleted += 1;
                }
            }
        }
        deleted += self.delete_segments_below_start()?;
        if deleted > 0 {
            self.after_start_moved()?;
        }
        Ok(deleted)
    }

    /// DeleteRecords: makes `offset` the new log start (never moving it back) and deletes
    /// segments wholly below it. Returns the resulting log start offset.
    pub fn delete_records_before(&mut self, offset: i64) -> Result<i64, StorageError> {
        let log_end = self.log_end_offset();
        if offset < 0 || offset > log_end {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start: self.log_start_offset,
                log_end,
            });
        }
        if offset > self.log_start_offset {
            self.log_start_offset = offset;
            self.delete_segments_below_start()?;
            self.after_start_moved()?;
        }
        Ok(self.log_start_offset)
    }

    fn oldest_closed(&self) -> Option<&Segment> {
        (self.segments.len() > 1)
            .then(|| self.segments.values().next())
            .flatten()
    }

    fn delete_oldest_segment(&mut self) -> Result<(), StorageError> {
        let Some((&base, _)) = self.segments.iter().next() else {
            return Ok(());
        };
        if let Some(segment) = self.segments.remove(&base) {
            segment.delete_files()?;
        }
        if let Some((&next, _)) = self.segments.iter().next() {
            self.log_start_offset = self.log_start_offset.max(next);
        }
        Ok(())
    }

    fn delete_segments_below_start(&mut self) -> Result<usize, StorageError> {
        let mut deleted = 0;
        loop {
            let mut keys = self.segments.keys();
            let (Some(_), Some(&second)) = (keys.next(), keys.next()) else {
                break;
            };
            if second > self.log_start_offset {
                break;
            }
            self.delete_oldest_segment()?;
            deleted += 1;
        }
        Ok(deleted)
    }

    /// Persist a moved log start and bring dependent state along. With a background
    /// flusher the checkpoint is its to write: after a crash before it, the log start
    /// is at worst the first remaining segment's base. An owner that must know the new
    /// log start durable (DeleteRecords answers) writes it with
    /// [`crate::DurabilityHandle::write_checkpoints`] after releasing its lock.
    fn after_start_moved(&mut self) -> Result<(), StorageError> {
        let start = self.log_start_offset;
        self.high_watermark = self.high_watermark.max(start);
        self.durability.note_log_start(start);
        self.epochs.truncate_from_start(start);
        self.checkpoint_in_background()?;
        let first_base = self.segments.keys().next().copied().unwrap_or(start);
        for snap in super::open::list_bases(&self.dir, "snapshot")? {
            if snap < first_base {
                std::fs::remove_file(self.dir.join(file_name(snap, "snapshot")))?;
            }
        }
        Ok(())
    }

    /// Removes everything at or after `offset` (whole batches: a batch containing
    /// `offset` goes entirely). Below the log start, the log is emptied and restarted there.
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), StorageError> {
        if offset < 0 {
            return Err(StorageError::InvalidArgument(format!(
                "truncate to {offset}"
            )));
        }
        let log_end = self.log_end_offset();
        if offset >= log_end {
            return Ok(());
        }
        if offset < self.log_start_offset {
            return self.truncate_fully_and_start_at(offset);
        }
        self.mark_dirty()?;
        let first_base = self.segments.keys().next().copied().unwrap_or(0);
        let doomed: Vec<i64> = self
            .segments
            .range(offset..)
            .map(|(b, _)| *b)
            .filter(|&b| b != first_base)
            .collect();
        let removed_any = !doomed.is_empty();
        for base in doomed {
            if let Some(s) = self.segments.remove(&base) {
                s.delete_files()?;
            }
        }
        let active = self.active_mut()?;
        let cut_at = active.find_batch(offset)?.map(|b| b.header().base_offset());
        active.truncate_to(offset)?;
        let new_end = match cut_at {
            Some(base) => active.next_offset().max(base.min(offset)),
            None => active.next_offset().max(offset.min(log_end)),
        };
        active.set_next_offset(new_end.max(active.base_offset()));
        if removed_any {
            active.unseal()?;
        }
        let end = self.log_end_offset();
        self.high_watermark = self.high_watermark.min(end);
        let active = self.active()?;
        let (file, active_base) = (active.shared_file(), active.base_offset());
        // The segment cut here takes new records, which the cleaner has not seen: the
        // clean part of the log ends before it.
        self.cleaned_up_to = self.cleaned_up_to.min(active_base);
        let durable = self.durability.durable_offset();
        self.durability.reset(file, end, active_base, durable);
        self.epochs.truncate_from_end(end);
        // On this thread, under the owner's lock: the lowered recovery point must be on
        // disk before new (unsynced) data can land below the old one, or a crash would
        // trust it without a rescan. Truncation is rare (a leader change).
        self.write_checkpoints_now()?;
        for snap in super::open::list_bases(&self.dir, "snapshot")? {
            if snap > end {
                std::fs::remove_file(self.dir.join(file_name(snap, "snapshot")))?;
            }
        }
        self.rebuild_producer_state(end)
    }

    /// Deletes every segment and starts an empty log at `offset` (a follower whose log
    /// does not overlap the leader's).
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), StorageError> {
        if offset < 0 {
            return Err(StorageError::InvalidArgument(format!("start at {offset}")));
        }
        self.mark_dirty()?;
        // The new segment exists before the old ones go, so the log is never left empty.
        let mut old = std::mem::take(&mut self.segments);
        let fresh = match old.remove(&offset) {
            Some(mut reused) => {
                reused.truncate_to(offset)?;
                reused.set_next_offset(offset);
                reused.unseal()?;
                reused
            }
            None => Segment::create(&self.dir, offset, self.index_params())?,
        };
        self.segments.insert(offset, fresh);
        self.cleaned_up_to = i64::MIN;
        for (_, s) in old {
            s.delete_files()?;
        }
        for snap in super::open::list_bases(&self.dir, "snapshot")? {
            std::fs::remove_file(self.dir.join(file_name(snap, "snapshot")))?;
        }
        self.log_start_offset = offset;
        self.high_watermark = offset;
        self.unflushed_records = 0;
        self.producers.clear();
        self.epochs.clear();
        let file = self.active()?.shared_file();
        self.durability.reset(file, offset, offset, offset);
        // As for truncate_to: the new offsets are on disk before anything lands here.
        self.write_checkpoints_now()
    }

    /// Loads the newest usable producer snapshot and replays the log after it. Abort
    /// markers at or after `reindex_from` that are missing from their `.txnindex` are
    /// added back (a crash may have lost them).
    pub(super) fn rebuild_producer_state(&mut self, reindex_from: i64) -> Result<(), StorageError> {
        let end = self.log_end_offset();
        let mut table = ProducerStateTable::default();
        let mut replay_from = self.segments.keys().next().copied().unwrap_or(0);
        for snap in super::open::list_bases(&self.dir, "snapshot")?
            .into_iter()
            .rev()
        {
            let path = self.dir.join(file_name(snap, "snapshot"));
            if snap > end {
                std::fs::remove_file(&path)?;
                continue;
            }
            if let Some(t) = std::fs::read(&path)
                .ok()
                .and_then(|b| ProducerStateTable::decode(&b))
            {
                table = t;
                replay_from = snap;
                break;
            }
        }
        let mut restored = Vec::new();
        for (&base, segment) in self.segments.range(..=end) {
            if segment.next_offset() <= replay_from {
                continue;
            }
            let mut scan = segment.scan_from(replay_from.max(base))?;
            while let Some(batch) = scan.next_batch()? {
                let h = batch.header();
                if h.base_offset() < replay_from {
                    continue;
                }
                let marker = if h.is_control() && batch.size <= MAX_CONTROL_BATCH {
                    let bytes = read_batch(scan.file(), &batch)?;
                    Some(MarkerInfo::of(&bytes))
                } else {
                    h.is_control().then(MarkerInfo::unreadable)
                };
                if let Some(done) = table.update(&h, marker) {
                    let known = segment
                        .txn_index()
                        .entries()
                        .iter()
                        .any(|t| t.last_offset == done.marker_offset);
                    if done.aborted && !known && done.marker_offset >= reindex_from {
                        let lso = table
                            .first_unstable_offset()
                            .unwrap_or(done.marker_offset.saturating_add(1));
                        restored.push((
                            base,
                            AbortedTxn {
                                producer_id: done.producer_id,
                                first_offset: done.first_offset,
                                last_offset: done.marker_offset,
                                last_stable_offset: lso,
                            },
                        ));
                    }
                }
            }
        }
        for (base, txn) in restored {
            if let Some(segment) = self.segments.get_mut(&base) {
                segment.txn_index_mut().append(txn)?;
            }
        }
        self.producers = table;
        Ok(())
    }
}
