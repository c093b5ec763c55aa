//! Crash recovery of a segment from its recovery point instead of from its start.

use super::Segment;
use crate::error::StorageError;
use crate::scan::BatchScan;

impl Segment {
    /// Recovers after a crash by rescanning only from the last indexed batch that starts
    /// below `recovery_point` (everything below the recovery point was fsynced; the
    /// recovery point is always a batch boundary, so that batch is whole). Index entries
    /// from it on are dropped and rebuilt by the scan, which CRC-checks every batch and
    /// cuts the file before the first bad one. Returns the bytes cut, or `None` when the
    /// indexes give no usable starting point (the caller then rebuilds everything).
    ///
    /// Why the kept entries are right even if index pages were lost: an offset entry
    /// below the recovery point names a durable batch and its position; a time entry is
    /// written only when the running maximum timestamp rises, so one whose offset lies
    /// before the restart batch describes only batches before it.
    pub(crate) fn recover_after(
        &mut self,
        recovery_point: i64,
    ) -> Result<Option<u64>, StorageError> {
        let below = recovery_point
            .saturating_sub(self.base_offset)
            .clamp(0, i64::from(u32::MAX)) as u32;
        let Some(i) = self.offset_index.entries_below(below).checked_sub(1) else {
            return Ok(None);
        };
        let (rel, position) = self.offset_index.entry(i);
        let restart = self.base_offset + i64::from(rel);
        let mut probe = BatchScan::new(self.log.get()?, u64::from(position), self.size);
        match probe.next_batch() {
            Ok(Some(b)) if b.header().base_offset() == restart => {}
            Ok(_) | Err(StorageError::CorruptMessage(_)) => return Ok(None),
            Err(e) => return Err(e),
        }
        // The restart batch is indexed again by the scan, so its entry goes too.
        self.offset_index.keep_first(i);
        let keep = match rel.checked_sub(1) {
            Some(before) => self.time_index.entries_up_to(before),
            None => 0,
        };
        self.time_index.keep_first(keep);
        (self.max_timestamp, self.offset_of_max_timestamp) = match self.time_index.last() {
            Some((ts, r)) => (ts, self.base_offset + i64::from(r)),
            None => (-1, -1),
        };
        self.next_offset = restart;
        self.bytes_since_index = 0;
        self.index_from_entry(u64::from(position)).map(Some)
    }

    fn index_from_entry(&mut self, position: u64) -> Result<u64, StorageError> {
        // The restart batch was given the entry just dropped: index it first by hand so
        // its entry is written again, then let the common scan continue.
        let mut scan = BatchScan::new(self.log.get()?, position, self.size);
        if let Ok(Some(first)) = scan.next_batch() {
            if crate::scan::crc_matches(scan.file(), &first)? {
                let rel = self.rel(first.header().base_offset());
                let at = first.position.min(u64::from(u32::MAX)) as u32;
                self.note_timestamp(&first);
                if self.offset_index.append(rel, at) {
                    let max_rel = self.rel(self.offset_of_max_timestamp);
                    self.time_index.maybe_append(self.max_timestamp, max_rel);
                }
                self.bytes_since_index = first.size;
                return self.index_from(first.end(), true);
            }
        }
        self.index_from(position, true)
    }
}
