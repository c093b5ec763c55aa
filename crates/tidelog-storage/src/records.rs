//! Records inside a batch: decompression (bounded) and a zero-copy record iterator.
//!
//! Record layout (after the batch header, possibly compressed as one block):
//! `length varint, attributes i8, timestampDelta varlong, offsetDelta varint,
//!  keyLength varint, key, valueLength varint, value, headerCount varint, headers`.
//! Varints are zig-zag encoded; a length of -1 means null.

use std::borrow::Cow;
use std::io::Read;

use crate::batch::{BatchHeader, Codec, BATCH_HEADER_LEN};
use crate::error::StorageError;

/// Largest decompressed record block we are willing to materialise.
pub(crate) const MAX_DECOMPRESSED: usize = 64 << 20;

const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_LEN: usize = 16;

/// One record, borrowing from the (decompressed) records block.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecordView<'a> {
    pub(crate) timestamp_delta: i64,
    pub(crate) offset_delta: i32,
    pub(crate) key: Option<&'a [u8]>,
    pub(crate) value: Option<&'a [u8]>,
    /// The whole encoded record including its length prefix.
    pub(crate) raw: &'a [u8],
}

/// The records block of a whole batch, decompressed if needed (at most `limit` bytes).
pub(crate) fn records_block(batch: &[u8], limit: usize) -> Result<Cow<'_, [u8]>, StorageError> {
    let header = BatchHeader::new(batch)?;
    let body = &batch[BATCH_HEADER_LEN..];
    let codec = header
        .codec()
        .ok_or_else(|| StorageError::corrupt("unknown codec"))?;
    Ok(match codec {
        Codec::None => Cow::Borrowed(body),
        Codec::Gzip => Cow::Owned(read_capped(flate2::read::GzDecoder::new(body), limit)?),
        Codec::Lz4 => Cow::Owned(read_capped(lz4::Decoder::new(body)?, limit)?),
        Codec::Zstd => Cow::Owned(read_capped(zstd::stream::read::Decoder::new(body)?, limit)?),
        Codec::Snappy => Cow::Owned(snappy_decompress(body, limit)?),
    })
}

fn read_capped(reader: impl Read, limit: usize) -> Result<Vec<u8>, StorageError> {
    let mut out = Vec::new();
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| StorageError::corrupt(format!("decompression failed: {e}")))?;
    if out.len() > limit {
        return Err(StorageError::corrupt("decompressed records exceed limit"));
    }
    Ok(out)
}

fn snappy_raw(block: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), StorageError> {
    let bad = |e: snap::Error| StorageError::corrupt(format!("snappy: {e}"));
    let len = snap::raw::decompress_len(block).map_err(bad)?;
    if out.len().saturating_add(len) > limit {
        return Err(StorageError::corrupt("decompressed records exceed limit"));
    }
    let start = out.len();
    out.resize(start + len, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(bad)?;
    out.truncate(start + written);
    Ok(())
}

/// Kafka's Java client writes xerial-framed snappy (16-byte header, then
/// `u32 length, raw block` chunks); librdkafka may write one raw block.
fn snappy_decompress(body: &[u8], limit: usize) -> Result<Vec<u8>, StorageError> {
    let mut out = Vec::new();
    if body.len() < XERIAL_HEADER_LEN || body[..8] != XERIAL_MAGIC {
        snappy_raw(body, &mut out, limit)?;
        return Ok(out);
    }
    let mut rest = &body[XERIAL_HEADER_LEN..];
    while !rest.is_empty() {
        if rest.len() < 4 {
            return Err(StorageError::corrupt("truncated xerial snappy chunk"));
        }
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let chunk = rest
            .get(4..4 + len)
            .ok_or_else(|| StorageError::corrupt("truncated xerial snappy chunk"))?;
        snappy_raw(chunk, &mut out, limit)?;
        rest = &rest[4 + len..];
    }
    Ok(out)
}

/// Iterates exactly `count` records of a records block, failing on malformed bytes.
pub(crate) struct RecordIter<'a> {
    buf: &'a [u8],
    pos: usize,
    remaining: usize,
}

impl<'a> RecordIter<'a> {
    pub(crate) fn new(block: &'a [u8], count: i32) -> Self {
        RecordIter {
            buf: block,
            pos: 0,
            remaining: usize::try_from(count).unwrap_or(0),
        }
    }

    fn varlong(&mut self) -> Result<i64, StorageError> {
        let mut value: u64 = 0;
        for shift in (0..70).step_by(7) {
            let byte = *self
                .buf
                .get(self.pos)
                .ok_or_else(|| StorageError::corrupt("truncated varint"))?;
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
            }
        }
        Err(StorageError::corrupt("varint too long"))
    }

    fn varint(&mut self) -> Result<i32, StorageError> {
        i32::try_from(self.varlong()?).map_err(|_| StorageError::corrupt("varint overflows i32"))
    }

    fn bytes(&mut self) -> Result<Option<&'a [u8]>, StorageError> {
        let len = self.varint()?;
        if len < 0 {
            return Ok(None);
        }
        let end = self
            .pos
            .checked_add(len as usize)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| StorageError::corrupt("record field past end"))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(Some(out))
    }

    fn next_record(&mut self) -> Result<RecordView<'a>, StorageError> {
        let start = self.pos;
        let len = self.varint()?;
        let body_start = self.pos;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| body_start.checked_add(l))
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| StorageError::corrupt("record length past end"))?;
        self.pos += 1; // attributes, unused in v2
        let timestamp_delta = self.varlong()?;
        let offset_delta = self.varint()?;
        let key = self.bytes()?;
        let value = self.bytes()?;
        let headers = self.varint()?;
        for _ in 0..headers.max(0) {
            self.bytes()?;
            self.bytes()?;
        }
        if self.pos != end {
            return Err(StorageError::corrupt(
                "record length does not match contents",
            ));
        }
        Ok(RecordView {
            timestamp_delta,
            offset_delta,
            key,
            value,
            raw: &self.buf[start..end],
        })
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<RecordView<'a>, StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let r = self.next_record();
        if r.is_err() {
            self.remaining = 0;
        }
        Some(r)
    }
}

/// Appends a zig-zag varint (used by tests and compaction tooling).
pub(crate) fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        let byte = (z & 0x7f) as u8;
        z >>= 7;
        if z == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// For a control batch: `Some(true)` if its marker is ABORT, `Some(false)` for COMMIT,
/// `None` when the key is unreadable. The control record key is `version i16, type i16`.
pub(crate) fn control_marker_is_abort(batch: &[u8]) -> Option<bool> {
    let header = BatchHeader::new(batch).ok()?;
    let block = records_block(batch, 1 << 20).ok()?;
    let record = RecordIter::new(&block, header.record_count())
        .next()?
        .ok()?;
    let key = record.key?;
    if key.len() < 4 {
        return None;
    }
    Some(i16::from_be_bytes([key[2], key[3]]) == 0)
}
