//! Walking the batches of a segment file by their headers, with buffered preads.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use crate::batch::{BatchHeader, BATCH_HEADER_LEN};
use crate::error::StorageError;

const CHUNK: usize = 32 * 1024;
const CRC_SKIP: u64 = 21;

/// A batch found by a scan: where it is and a copy of its header.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScannedBatch {
    pub(crate) position: u64,
    pub(crate) size: u64,
    header: [u8; BATCH_HEADER_LEN],
}

impl ScannedBatch {
    pub(crate) fn new(position: u64, size: u64, header: [u8; BATCH_HEADER_LEN]) -> Self {
        ScannedBatch {
            position,
            size,
            header,
        }
    }
    pub(crate) fn header(&self) -> BatchHeader<'_> {
        BatchHeader::from_array(&self.header)
    }
    pub(crate) fn end(&self) -> u64 {
        self.position + self.size
    }
}

/// Iterates batch headers from `position` up to `end` (the segment size).
pub(crate) struct BatchScan {
    file: Arc<File>,
    position: u64,
    end: u64,
    buf: Vec<u8>,
    buf_start: u64,
}

impl BatchScan {
    pub(crate) fn new(file: Arc<File>, position: u64, end: u64) -> Self {
        BatchScan {
            file,
            position,
            end,
            buf: Vec::new(),
            buf_start: 0,
        }
    }

    pub(crate) fn position(&self) -> u64 {
        self.position
    }

    /// The file being scanned.
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Next batch; `Ok(None)` exactly at `end`; `CorruptMessage` for a torn or impossible
    /// header (the caller decides whether that means "truncate here").
    pub(crate) fn next_batch(&mut self) -> Result<Option<ScannedBatch>, StorageError> {
        if self.position >= self.end {
            return Ok(None);
        }
        if self.end - self.position < BATCH_HEADER_LEN as u64 {
            return Err(StorageError::corrupt("torn batch header at end of segment"));
        }
        let header = self.header_bytes()?;
        let view = BatchHeader::new(&header)?;
        let size = view
            .total_size()
            .ok_or_else(|| StorageError::corrupt("impossible batch length"))?
            as u64;
        if size > self.end - self.position {
            return Err(StorageError::corrupt("batch runs past end of segment"));
        }
        if view.magic() != 2 {
            return Err(StorageError::corrupt("bad magic in segment"));
        }
        let found = ScannedBatch {
            position: self.position,
            size,
            header,
        };
        self.position += size;
        Ok(Some(found))
    }

    fn header_bytes(&mut self) -> Result<[u8; BATCH_HEADER_LEN], StorageError> {
        let in_buf = self.position >= self.buf_start
            && self.position + BATCH_HEADER_LEN as u64 <= self.buf_start + self.buf.len() as u64;
        if !in_buf {
            let len = (self.end - self.position).min(CHUNK as u64) as usize;
            self.buf.resize(len, 0);
            self.file.read_exact_at(&mut self.buf, self.position)?;
            self.buf_start = self.position;
        }
        let at = (self.position - self.buf_start) as usize;
        let mut out = [0u8; BATCH_HEADER_LEN];
        out.copy_from_slice(&self.buf[at..at + BATCH_HEADER_LEN]);
        Ok(out)
    }
}

/// Recomputes the CRC-32C of a batch on disk in bounded chunks.
pub(crate) fn crc_matches(file: &File, batch: &ScannedBatch) -> Result<bool, StorageError> {
    let mut crc = 0u32;
    let mut pos = batch.position + CRC_SKIP;
    let mut buf = vec![0u8; CHUNK.min(batch.size as usize)];
    while pos < batch.end() {
        let n = (batch.end() - pos).min(CHUNK as u64) as usize;
        file.read_exact_at(&mut buf[..n], pos)?;
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        pos += n as u64;
    }
    Ok(crc == batch.header().crc())
}

/// Largest batch loaded whole into memory (compaction, timestamp search); a larger
/// declared size is reported as corrupt instead of allocated.
pub(crate) const MAX_LOADED_BATCH: u64 = 64 << 20;

/// Reads a whole batch into memory.
pub(crate) fn read_batch(file: &File, batch: &ScannedBatch) -> Result<Vec<u8>, StorageError> {
    if batch.size > MAX_LOADED_BATCH {
        return Err(StorageError::corrupt(format!(
            "batch of {} bytes at position {} is too large to load",
            batch.size, batch.position
        )));
    }
    let mut buf = vec![0u8; batch.size as usize];
    file.read_exact_at(&mut buf, batch.position)?;
    Ok(buf)
}
