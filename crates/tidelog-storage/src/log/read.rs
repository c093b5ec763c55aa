//! The read side: fetches by offset and lookups by timestamp.

use super::{Log, ReadResult};
use crate::error::StorageError;
use crate::file_slice::FileSlice;
use crate::segment::{first_record_at_or_after, Segment};

impl Log {
    /// Whole batches starting with the one that contains `from_offset`; see crate docs.
    pub fn read(
        &self,
        from_offset: i64,
        max_bytes: usize,
        upper_bound: i64,
    ) -> Result<ReadResult, StorageError> {
        let log_end = self.log_end_offset();
        if from_offset < self.log_start_offset || from_offset > log_end {
            return Err(StorageError::OffsetOutOfRange {
                offset: from_offset,
                log_start: self.log_start_offset,
                log_end,
            });
        }
        let nothing = ReadResult {
            slice: None,
            first_batch_offset: from_offset,
        };
        if from_offset == log_end || from_offset >= upper_bound {
            return Ok(nothing);
        }
        let floor = self
            .segments
            .range(..=from_offset)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        for segment in self.segments.range(floor..).map(|(_, s)| s) {
            let Some(first) = segment.find_batch(from_offset)? else {
                continue;
            };
            if first.header().last_offset() >= upper_bound {
                return Ok(nothing);
            }
            let mut len = first.size;
            let file = segment.log_file()?;
            let mut scan = crate::scan::BatchScan::new(
                std::sync::Arc::clone(&file),
                first.end(),
                segment.size(),
            );
            while let Some(b) = scan.next_batch()? {
                if b.header().last_offset() >= upper_bound || len + b.size > max_bytes as u64 {
                    break;
                }
                len += b.size;
            }
            return Ok(ReadResult {
                slice: Some(FileSlice {
                    file,
                    position: first.position,
                    len,
                }),
                first_batch_offset: first.header().base_offset(),
            });
        }
        Ok(nothing)
    }

    /// First offset (at or after the log start) whose record timestamp is `>= ts`.
    pub fn offset_for_timestamp(&self, ts: i64) -> Result<Option<(i64, i64)>, StorageError> {
        for segment in self.segments.values() {
            if segment.max_timestamp() < ts {
                continue;
            }
            if let Some((offset, found_ts)) =
                segment.offset_for_timestamp(ts, self.log_start_offset)?
            {
                return Ok(Some((offset, found_ts)));
            }
        }
        Ok(None)
    }

    /// `(offset, timestamp)` of the first record carrying the largest timestamp.
    pub fn max_timestamp_and_offset(&self) -> Result<Option<(i64, i64)>, StorageError> {
        let mut best: Option<&Segment> = None;
        for s in self.segments.values() {
            if s.max_timestamp() >= 0 && best.is_none_or(|b| s.max_timestamp() > b.max_timestamp())
            {
                best = Some(s);
            }
        }
        let Some(segment) = best else {
            return Ok(None);
        };
        let ts = segment.max_timestamp();
        match segment.find_batch(segment.offset_of_max_timestamp())? {
            Some(batch) => {
                Ok(
                    first_record_at_or_after(&*segment.log_file()?, &batch, ts, i64::MIN)?
                        .or(Some((segment.offset_of_max_timestamp(), ts))),
                )
            }
            None => Ok(Some((segment.offset_of_max_timestamp(), ts))),
        }
    }

    /// The largest timestamp of the segment holding `offset` (the value `retention.ms`
    /// is measured against) and whether that segment is the active one, which retention
    /// never deletes. `None` when `offset` is below the log start or past the end.
    pub fn segment_max_timestamp_at(&self, offset: i64) -> Option<(i64, bool)> {
        if offset < self.log_start_offset || offset > self.log_end_offset() {
            return None;
        }
        let (base, segment) = self.segments.range(..=offset).next_back()?;
        let active = self.segments.keys().next_back() == Some(base);
        Some((segment.max_timestamp(), active))
    }

    /// Bytes of the segments after the one holding `offset`: what `retention.bytes`
    /// keeps in front of it. That segment is deleted once they reach the limit (see
    /// `apply_retention`). `None` when `offset` is below the log start or past the end.
    pub fn bytes_after_segment_at(&self, offset: i64) -> Option<u64> {
        if offset < self.log_start_offset || offset > self.log_end_offset() {
            return None;
        }
        let (base, _) = self.segments.range(..=offset).next_back()?;
        Some(self.segments.range(base + 1..).map(|(_, s)| s.size()).sum())
    }
}
