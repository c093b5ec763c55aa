//! Finding batches in a segment: by offset (sparse index + scan) and by timestamp.

use std::fs::File;

use super::Segment;
use tidelog_records::{records_block, RecordIter};

use crate::batch::{BatchHeader, MAX_DECOMPRESSED};
use crate::error::StorageError;
use crate::scan::{read_batch, BatchScan, ScannedBatch};

impl Segment {
    /// The first batch whose last offset is `>= offset`, if this segment has one.
    pub(crate) fn find_batch(&self, offset: i64) -> Result<Option<ScannedBatch>, StorageError> {
        let position = self.offset_index.floor_position(self.rel(offset));
        let mut scan = BatchScan::new(self.log.get()?, u64::from(position), self.size);
        while let Some(b) = scan.next_batch()? {
            if b.header().last_offset() >= offset {
                return Ok(Some(b));
            }
        }
        Ok(None)
    }

    /// A scan over the batches from the one containing `offset` on.
    pub(crate) fn scan_from(&self, offset: i64) -> Result<BatchScan, StorageError> {
        let position = match self.find_batch(offset)? {
            Some(b) => b.position,
            None => self.size,
        };
        Ok(BatchScan::new(self.log.get()?, position, self.size))
    }

    /// First record with timestamp `>= ts` in this segment, as `(offset, timestamp)`.
    /// Only offsets `>= min_offset` count (the log start may lie inside this segment).
    pub(crate) fn offset_for_timestamp(
        &self,
        ts: i64,
        min_offset: i64,
    ) -> Result<Option<(i64, i64)>, StorageError> {
        if self.max_timestamp < ts {
            return Ok(None);
        }
        let start = match self.time_index.last_offset_older_than(ts) {
            Some(rel) => self.base_offset + i64::from(rel) + 1,
            None => self.base_offset,
        }
        .max(min_offset);
        let mut scan = self.scan_from(start)?;
        while let Some(b) = scan.next_batch()? {
            if b.header().max_timestamp() < ts {
                continue;
            }
            if let Some(hit) = first_record_at_or_after(scan.file(), &b, ts, start)? {
                return Ok(Some(hit));
            }
        }
        Ok(None)
    }
}

/// The first record of `batch` at offset `>= min_offset` with timestamp `>= ts`.
pub(crate) fn first_record_at_or_after(
    file: &File,
    batch: &ScannedBatch,
    ts: i64,
    min_offset: i64,
) -> Result<Option<(i64, i64)>, StorageError> {
    let h = batch.header();
    if h.is_log_append_time() {
        let offset = h.base_offset().max(min_offset);
        return Ok((h.max_timestamp() >= ts && offset <= h.last_offset())
            .then_some((offset, h.max_timestamp())));
    }
    let bytes = read_batch(file, batch)?;
    let header = BatchHeader::new(&bytes)?;
    let block = records_block(&bytes, MAX_DECOMPRESSED)?;
    for record in RecordIter::new(&block, header.record_count()) {
        let record = record?;
        let record_ts = header
            .base_timestamp()
            .saturating_add(record.timestamp_delta);
        let offset = header
            .base_offset()
            .saturating_add(i64::from(record.offset_delta));
        if record_ts >= ts && offset >= min_offset {
            return Ok(Some((offset, record_ts)));
        }
    }
    Ok(None)
}
