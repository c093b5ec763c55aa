//! One segment: a `.log` file of whole batches plus its sparse indexes.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use crate::batch::BATCH_HEADER_LEN;
use crate::error::StorageError;
use crate::index::{OffsetIndex, TimeIndex};
use crate::scan::{crc_matches, BatchScan, ScannedBatch};
use crate::txn_index::TxnIndex;

mod file;
mod recover;
mod search;
pub use file::{max_open_segment_files, open_segment_files_cached, set_max_open_segment_files};
pub(crate) use search::first_record_at_or_after;

pub(crate) use file::SegmentFile;

/// `<20-digit base offset>.<ext>`.
pub(crate) fn file_name(base_offset: i64, ext: &str) -> String {
    format!("{base_offset:020}.{ext}")
}

/// Removes every file of the segment at `base` (missing files are fine).
pub(crate) fn remove_files(dir: &Path, base: i64) -> Result<(), StorageError> {
    for ext in ["log", "index", "timeindex", "txnindex"] {
        match std::fs::remove_file(dir.join(file_name(base, ext))) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
    }
    Ok(())
}

/// Index geometry taken from the log config.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IndexParams {
    pub(crate) index_bytes: u64,
    pub(crate) interval_bytes: u64,
}

/// A `.log` segment file: RecordBatch v2 batches exactly as on the wire, back to back,
/// with strictly increasing offsets (compaction may leave gaps), no header, no padding.
/// Each batch carries its own CRC-32C over everything after the CRC field; `baseOffset`
/// and `partitionLeaderEpoch` are outside it. After a crash the segment is scanned from the
/// start, every CRC checked, and the file truncated before the first torn or corrupt batch;
/// its `.index` and `.timeindex` are rebuilt by the same scan.
pub(crate) struct Segment {
    base_offset: i64,
    log: Arc<SegmentFile>,
    size: u64,
    next_offset: i64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    bytes_since_index: u64,
    first_append_ms: Option<i64>,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    txn_index: TxnIndex,
    params: IndexParams,
}

/// What opening a segment found.
pub(crate) struct OpenOutcome {
    pub(crate) truncated_bytes: u64,
    pub(crate) rebuilt_indexes: bool,
}

impl Segment {
    pub(crate) fn create(
        dir: &Path,
        base_offset: i64,
        params: IndexParams,
    ) -> Result<Self, StorageError> {
        let log_path = dir.join(file_name(base_offset, "log"));
        // Not O_TRUNC: ext4 marks a file truncated by its opener to be written back when
        // it is closed, and the descriptor cache closes files often. A stale file left
        // where a new segment starts (a roll cut short by a crash) is emptied instead.
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&log_path)?;
        if log.metadata()?.len() > 0 {
            log.set_len(0)?;
        }
        Ok(Segment {
            base_offset,
            log: Arc::new(SegmentFile::new(&log_path, log)),
            size: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            bytes_since_index: 0,
            first_append_ms: None,
            offset_index: OffsetIndex::create(
                &dir.join(file_name(base_offset, "index")),
                params.index_bytes,
            )?,
            time_index: TimeIndex::create(
                &dir.join(file_name(base_offset, "timeindex")),
                params.index_bytes,
            )?,
            txn_index: TxnIndex::empty(&dir.join(file_name(base_offset, "txnindex"))),
            params,
        })
    }

    /// Opens an existing segment. With `recover`, every batch from the one containing
    /// `recovery_point` on is CRC-checked and indexed again (the whole segment if its
    /// indexes do not validate); otherwise the indexes are trusted if they validate.
    /// `has_txn_index`: the directory listing holds its `.txnindex` (only then is it read).
    pub(crate) fn open(
        dir: &Path,
        base_offset: i64,
        params: IndexParams,
        recover: bool,
        recovery_point: i64,
        has_txn_index: bool,
    ) -> Result<(Self, OpenOutcome), StorageError> {
        let log_path = dir.join(file_name(base_offset, "log"));
        let log = OpenOptions::new().read(true).write(true).open(&log_path)?;
        let size = log.metadata()?.len();
        let index_path = dir.join(file_name(base_offset, "index"));
        let time_path = dir.join(file_name(base_offset, "timeindex"));
        let txn_path = dir.join(file_name(base_offset, "txnindex"));
        // Below the recovery point the data was fsynced; the indexes are only needed when
        // some of this segment lies there.
        let loaded = if recover && recovery_point <= base_offset {
            None
        } else {
            match (
                OffsetIndex::load(&index_path, size)?,
                TimeIndex::load(&time_path)?,
            ) {
                (Some(o), Some(t)) => Some((o, t)),
                _ => None,
            }
        };
        let trusted = loaded.is_some();
        let (offset_index, time_index) = match loaded {
            Some(pair) => pair,
            None => (
                OffsetIndex::create(&index_path, params.index_bytes)?,
                TimeIndex::create(&time_path, params.index_bytes)?,
            ),
        };
        let mut seg = Segment {
            base_offset,
            log: Arc::new(SegmentFile::new(&log_path, log)),
            size,
            next_offset: base_offset,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            bytes_since_index: 0,
            first_append_ms: None,
            offset_index,
            time_index,
            txn_index: if has_txn_index {
                TxnIndex::load(&txn_path)?
            } else {
                TxnIndex::empty(&txn_path)
            },
            params,
        };
        let mut outcome = OpenOutcome {
            truncated_bytes: 0,
            rebuilt_indexes: !trusted,
        };
        if trusted && recover {
            outcome.rebuilt_indexes = true;
            outcome.truncated_bytes = match seg.recover_after(recovery_point)? {
                Some(cut) => cut,
                None => seg.rebuild(true)?,
            };
        } else if trusted {
            if !seg.resume_from_indexes()? {
                outcome.rebuilt_indexes = true;
                outcome.truncated_bytes = seg.rebuild(true)?;
            }
        } else {
            outcome.truncated_bytes = seg.rebuild(recover)?;
        }
        seg.first_append_ms = seg.first_batch_timestamp()?;
        Ok((seg, outcome))
    }

    /// Finds the end of the log by scanning from the last index entry; false if the tail
    /// does not parse (the caller then rebuilds with CRC checks).
    fn resume_from_indexes(&mut self) -> Result<bool, StorageError> {
        let from = match self.offset_index.len().checked_sub(1) {
            Some(i) => u64::from(self.offset_index.entry(i).1),
            None => 0,
        };
        let mut scan = BatchScan::new(self.log.get()?, from, self.size);
        let mut last = None;
        loop {
            match scan.next_batch() {
                Ok(Some(b)) => last = Some(b),
                Ok(None) => break,
                Err(StorageError::CorruptMessage(_)) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        if let Some(b) = last {
            self.next_offset = b.header().last_offset().saturating_add(1);
        }
        self.bytes_since_index = self.size - from;
        if let Some((ts, rel)) = self.time_index.last() {
            self.max_timestamp = ts;
            self.offset_of_max_timestamp = self.base_offset + i64::from(rel);
        } else if self.size > 0 {
            // A closed segment always ends with a time entry unless it has no timestamps;
            // an active one after a clean shutdown may not: recompute.
            let mut scan = BatchScan::new(self.log.get()?, 0, self.size);
            while let Some(b) = scan.next_batch()? {
                self.note_timestamp(&b);
            }
        }
        Ok(true)
    }

    /// Rescans the whole file, rebuilding the indexes and cutting it before the first batch
    /// that is torn, out of order, or (with `verify_crc`) fails its CRC. Returns bytes cut.
    pub(crate) fn rebuild(&mut self, verify_crc: bool) -> Result<u64, StorageError> {
        self.offset_index.clear();
        self.time_index.clear();
        self.next_offset = self.base_offset;
        self.max_timestamp = -1;
        self.offset_of_max_timestamp = -1;
        self.bytes_since_index = 0;
        self.index_from(0, verify_crc)
    }

    /// Indexes the batches from byte `position` (a batch boundary; the in-memory state
    /// describes everything before it) to the end, cutting the file before the first
    /// batch that is torn, out of order, or (with `verify_crc`) fails its CRC.
    fn index_from(&mut self, position: u64, verify_crc: bool) -> Result<u64, StorageError> {
        let log = self.log.get()?;
        let mut scan = BatchScan::new(Arc::clone(&log), position, self.size);
        let valid_end = loop {
            let batch = match scan.next_batch() {
                Ok(Some(b)) => b,
                Ok(None) => break self.size,
                Err(StorageError::CorruptMessage(_)) => break scan.position(),
                Err(e) => return Err(e),
            };
            let h = batch.header();
            let in_order = h.base_offset() >= self.next_offset
                && h.last_offset() >= h.base_offset()
                && h.last_offset() - self.base_offset <= i64::from(u32::MAX);
            if !in_order || (verify_crc && !crc_matches(&log, &batch)?) {
                break batch.position;
            }
            self.index_batch(&batch);
        };
        let cut = self.size - valid_end;
        if cut > 0 {
            tracing::warn!(segment = %self.log.path().display(), cut, "truncating invalid tail");
            log.set_len(valid_end)?;
            self.size = valid_end;
        }
        Ok(cut)
    }

    fn note_timestamp(&mut self, batch: &ScannedBatch) {
        let h = batch.header();
        if h.max_timestamp() > self.max_timestamp {
            self.max_timestamp = h.max_timestamp();
            self.offset_of_max_timestamp = h.last_offset();
        }
        self.next_offset = h.last_offset().saturating_add(1);
    }

    fn rel(&self, offset: i64) -> u32 {
        (offset - self.base_offset).clamp(0, i64::from(u32::MAX)) as u32
    }

    /// Index bookkeeping for a batch already in the file.
    fn index_batch(&mut self, batch: &ScannedBatch) {
        self.note_timestamp(batch);
        if self.bytes_since_index > self.params.interval_bytes {
            let rel = self.rel(batch.header().base_offset());
            let position = batch.position.min(u64::from(u32::MAX)) as u32;
            if self.offset_index.append(rel, position) {
                let max_rel = self.rel(self.offset_of_max_timestamp);
                self.time_index.maybe_append(self.max_timestamp, max_rel);
            }
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += batch.size;
    }

    /// Writes already-validated batches (`ranges` within `buf`) at the end of the file.
    pub(crate) fn append(
        &mut self,
        buf: &[u8],
        ranges: &[(usize, usize)],
        now_ms: i64,
    ) -> Result<(), StorageError> {
        let start = self.size;
        let log = self.log.get()?;
        if let Err(e) = log.write_all_at(buf, start) {
            // Leave no half-written tail behind for the next append to misplace.
            let _ = log.set_len(start);
            return Err(e.into());
        }
        for &(at, len) in ranges {
            let mut array = [0u8; BATCH_HEADER_LEN];
            let header = buf
                .get(at..at + BATCH_HEADER_LEN)
                .ok_or_else(|| StorageError::corrupt("batch range outside append buffer"))?;
            array.copy_from_slice(header);
            let batch = ScannedBatch::new(start + at as u64, len as u64, array);
            self.index_batch(&batch);
        }
        self.size += buf.len() as u64;
        self.first_append_ms.get_or_insert(now_ms);
        Ok(())
    }

    /// Cuts the file before the batch containing `offset` (whole batches only), then
    /// rebuilds the in-memory state and indexes from what remains.
    pub(crate) fn truncate_to(&mut self, offset: i64) -> Result<(), StorageError> {
        let Some(batch) = self.find_batch(offset)? else {
            return self.txn_index.truncate_to(offset).map_err(Into::into);
        };
        self.log.get()?.set_len(batch.position)?;
        self.size = batch.position;
        self.rebuild(false)?;
        self.txn_index.truncate_to(offset)?;
        Ok(())
    }

    /// Segment closes: final time entry, indexes shrunk to their entries.
    pub(crate) fn seal(&mut self) -> Result<(), StorageError> {
        if self.max_timestamp >= 0 {
            let rel = self.rel(self.offset_of_max_timestamp);
            self.time_index.maybe_append(self.max_timestamp, rel);
        }
        self.offset_index.trim()?;
        self.time_index.trim()?;
        Ok(())
    }

    /// Becomes the active segment again: indexes preallocated to full size.
    pub(crate) fn unseal(&mut self) -> Result<(), StorageError> {
        self.offset_index.resize(self.params.index_bytes)?;
        self.time_index.resize(self.params.index_bytes)?;
        Ok(())
    }

    /// fsync of the log and indexes.
    pub(crate) fn sync(&self) -> Result<(), StorageError> {
        crate::fsync::sync_data(self.log.get()?.as_ref())?;
        self.offset_index.flush()?;
        self.time_index.flush()?;
        self.txn_index.sync()?;
        Ok(())
    }

    /// Removes all files of this segment. Open `FileSlice`s keep the data readable.
    pub(crate) fn delete_files(self) -> Result<(), StorageError> {
        let paths = [
            self.log.path().to_path_buf(),
            self.offset_index.path().to_path_buf(),
            self.time_index.path().to_path_buf(),
            self.txn_index.path().to_path_buf(),
        ];
        drop(self);
        for p in paths {
            match std::fs::remove_file(&p) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        Ok(())
    }

    fn first_batch_timestamp(&self) -> Result<Option<i64>, StorageError> {
        let mut scan = BatchScan::new(self.log.get()?, 0, self.size);
        Ok(scan
            .next_batch()?
            .map(|b| b.header().max_timestamp())
            .filter(|&t| t >= 0))
    }
    pub(crate) fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub(crate) fn next_offset(&self) -> i64 {
        self.next_offset
    }
    pub(crate) fn set_next_offset(&mut self, offset: i64) {
        self.next_offset = offset;
    }
    pub(crate) fn size(&self) -> u64 {
        self.size
    }
    pub(crate) fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }
    pub(crate) fn offset_of_max_timestamp(&self) -> i64 {
        self.offset_of_max_timestamp
    }
    pub(crate) fn first_append_ms(&self) -> Option<i64> {
        self.first_append_ms
    }
    /// The `.log` file, opened again if it was closed while the segment was inactive.
    pub(crate) fn log_file(&self) -> Result<Arc<File>, StorageError> {
        Ok(self.log.get()?)
    }
    /// The `.log` file as the durability state keeps it: reopened when it syncs.
    pub(crate) fn shared_file(&self) -> Arc<SegmentFile> {
        Arc::clone(&self.log)
    }
    pub(crate) fn indexes_full(&self) -> bool {
        self.offset_index.is_full() || self.time_index.is_full()
    }
    pub(crate) fn txn_index(&self) -> &TxnIndex {
        &self.txn_index
    }
    pub(crate) fn txn_index_mut(&mut self) -> &mut TxnIndex {
        &mut self.txn_index
    }
    /// Whether a batch spanning `[base, last]` of `size` bytes still fits this segment.
    pub(crate) fn fits(&self, last_offset: i64, size: u64, segment_bytes: u64) -> bool {
        let offsets_fit = last_offset - self.base_offset <= i64::from(u32::MAX)
            && last_offset >= self.base_offset;
        let bytes_fit = self.size == 0 || self.size + size <= segment_bytes;
        offsets_fit && bytes_fit && !self.indexes_full()
    }
}
