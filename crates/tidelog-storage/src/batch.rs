//! The Kafka RecordBatch v2 header: the one place that knows its byte layout.
//!
//! ```text
//! offset len field
//!      0   8 baseOffset            i64  (assigned by the log; outside the CRC)
//!      8   4 batchLength           i32  (bytes after this field)
//!     12   4 partitionLeaderEpoch  i32  (assigned by the log; outside the CRC)
//!     16   1 magic                 i8   (must be 2)
//!     17   4 crc                   u32  CRC-32C of bytes [21, end of batch)
//!     21   2 attributes            i16  bits 0-2 codec, 3 log-append-time, 4 txn, 5 control
//!     23   4 lastOffsetDelta       i32
//!     27   8 baseTimestamp         i64
//!     35   8 maxTimestamp          i64
//!     43   8 producerId            i64
//!     51   2 producerEpoch         i16
//!     53   4 baseSequence          i32
//!     57   4 recordCount           i32
//!     61     records
//! ```
//! All integers are big-endian.

use crate::error::StorageError;

/// Size of the fixed RecordBatch v2 header.
pub const BATCH_HEADER_LEN: usize = 61;
/// `baseOffset` + `batchLength`: the part not counted by `batchLength`.
pub(crate) const LOG_OVERHEAD: usize = 12;
const CRC_START: usize = 21;

const BASE_OFFSET: usize = 0;
const LENGTH: usize = 8;
const LEADER_EPOCH: usize = 12;
const MAGIC: usize = 16;
const CRC: usize = 17;
const ATTRIBUTES: usize = 21;
const LAST_OFFSET_DELTA: usize = 23;
const BASE_TIMESTAMP: usize = 27;
const MAX_TIMESTAMP: usize = 35;
const PRODUCER_ID: usize = 43;
const PRODUCER_EPOCH: usize = 51;
const BASE_SEQUENCE: usize = 53;
const RECORD_COUNT: usize = 57;

const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_BIT: i16 = 0x08;
const TRANSACTIONAL_BIT: i16 = 0x10;
const CONTROL_BIT: i16 = 0x20;

/// Compression codec named by the low 3 attribute bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// Records stored as-is.
    None,
    /// gzip (RFC 1952).
    Gzip,
    /// Snappy, xerial-framed or raw.
    Snappy,
    /// LZ4 frame format.
    Lz4,
    /// Zstandard.
    Zstd,
}

/// Zero-copy view of a batch header at the start of a byte slice.
#[derive(Debug, Clone, Copy)]
pub struct BatchHeader<'a> {
    bytes: &'a [u8],
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    i32::from_be_bytes(a)
}
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

impl<'a> BatchHeader<'a> {
    /// Views the first [`BATCH_HEADER_LEN`] bytes of `bytes`; fails if there are fewer.
    pub fn new(bytes: &'a [u8]) -> Result<Self, StorageError> {
        if bytes.len() < BATCH_HEADER_LEN {
            return Err(StorageError::corrupt(format!(
                "batch header needs {BATCH_HEADER_LEN} bytes, have {}",
                bytes.len()
            )));
        }
        Ok(BatchHeader {
            bytes: &bytes[..BATCH_HEADER_LEN],
        })
    }

    /// Views a header array; infallible because the length is right by construction.
    pub fn from_array(bytes: &'a [u8; BATCH_HEADER_LEN]) -> Self {
        BatchHeader { bytes }
    }

    /// Offset of the first record.
    pub fn base_offset(&self) -> i64 {
        be_i64(self.bytes, BASE_OFFSET)
    }
    /// Bytes following the length field.
    pub fn batch_length(&self) -> i32 {
        be_i32(self.bytes, LENGTH)
    }
    /// Whole batch size including the 12-byte offset/length prefix, if the length is sane.
    pub fn total_size(&self) -> Option<usize> {
        let len = usize::try_from(self.batch_length()).ok()?;
        let total = len.checked_add(LOG_OVERHEAD)?;
        (total >= BATCH_HEADER_LEN).then_some(total)
    }
    /// Leader epoch stamped by the log.
    pub fn partition_leader_epoch(&self) -> i32 {
        be_i32(self.bytes, LEADER_EPOCH)
    }
    /// Format version; 2 for everything this log accepts.
    pub fn magic(&self) -> i8 {
        self.bytes[MAGIC] as i8
    }
    /// Stored CRC-32C.
    pub fn crc(&self) -> u32 {
        be_i32(self.bytes, CRC) as u32
    }
    /// Raw attribute bits.
    pub fn attributes(&self) -> i16 {
        be_i16(self.bytes, ATTRIBUTES)
    }
    /// Compression codec, `None` if the bits name an unknown codec.
    pub fn codec(&self) -> Option<Codec> {
        match self.attributes() & COMPRESSION_MASK {
            0 => Some(Codec::None),
            1 => Some(Codec::Gzip),
            2 => Some(Codec::Snappy),
            3 => Some(Codec::Lz4),
            4 => Some(Codec::Zstd),
            _ => None,
        }
    }
    /// True when timestamps are broker append times.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes() & TIMESTAMP_TYPE_BIT != 0
    }
    /// Part of a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes() & TRANSACTIONAL_BIT != 0
    }
    /// Holds transaction markers rather than user records.
    pub fn is_control(&self) -> bool {
        self.attributes() & CONTROL_BIT != 0
    }
    /// Offset delta of the last record.
    pub fn last_offset_delta(&self) -> i32 {
        be_i32(self.bytes, LAST_OFFSET_DELTA)
    }
    /// Offset of the last record (saturating on nonsense deltas).
    pub fn last_offset(&self) -> i64 {
        self.base_offset()
            .saturating_add(i64::from(self.last_offset_delta()))
    }
    /// Timestamp of the first record.
    pub fn base_timestamp(&self) -> i64 {
        be_i64(self.bytes, BASE_TIMESTAMP)
    }
    /// Largest timestamp in the batch.
    pub fn max_timestamp(&self) -> i64 {
        be_i64(self.bytes, MAX_TIMESTAMP)
    }
    /// Producer id, -1 when not idempotent.
    pub fn producer_id(&self) -> i64 {
        be_i64(self.bytes, PRODUCER_ID)
    }
    /// Producer epoch.
    pub fn producer_epoch(&self) -> i16 {
        be_i16(self.bytes, PRODUCER_EPOCH)
    }
    /// Sequence number of the first record.
    pub fn base_sequence(&self) -> i32 {
        be_i32(self.bytes, BASE_SEQUENCE)
    }
    /// Sequence number of the last record (wrapping like Kafka's).
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence() < 0 {
            return -1;
        }
        let last = i64::from(self.base_sequence()) + i64::from(self.last_offset_delta());
        (last % (i64::from(i32::MAX) + 1)) as i32
    }
    /// Number of records.
    pub fn record_count(&self) -> i32 {
        be_i32(self.bytes, RECORD_COUNT)
    }
}

/// CRC-32C over the CRC-covered part of a whole batch.
pub(crate) fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[CRC_START..])
}

/// Checks one whole batch at the start of `buf` and returns its size: enough bytes for the
/// declared length, magic 2, known codec, CRC-32C matches, size within `max_size`.
pub(crate) fn check_batch(buf: &[u8], max_size: u32) -> Result<usize, StorageError> {
    let header = BatchHeader::new(buf)?;
    let size = header.total_size().ok_or_else(|| {
        StorageError::corrupt(format!("bad batch length {}", header.batch_length()))
    })?;
    if size > max_size as usize {
        return Err(StorageError::MessageTooLarge {
            size,
            max: max_size,
        });
    }
    if size > buf.len() {
        return Err(StorageError::corrupt(format!(
            "batch declares {size} bytes, only {} present",
            buf.len()
        )));
    }
    if header.magic() != 2 {
        return Err(StorageError::corrupt(format!(
            "unsupported magic {}",
            header.magic()
        )));
    }
    if header.codec().is_none() {
        return Err(StorageError::corrupt(format!(
            "unknown compression codec in attributes {:#x}",
            header.attributes()
        )));
    }
    if header.last_offset_delta() < 0 {
        return Err(StorageError::corrupt("negative lastOffsetDelta"));
    }
    let actual = compute_crc(&buf[..size]);
    if actual != header.crc() {
        return Err(StorageError::corrupt(format!(
            "crc mismatch: stored {:#010x}, computed {actual:#010x}",
            header.crc()
        )));
    }
    Ok(size)
}

/// Splits concatenated batches into `(start, len)` ranges, checking each with
/// [`check_batch`]. Fails on the first bad batch or trailing partial bytes.
pub(crate) fn split_batches(
    buf: &[u8],
    max_size: u32,
) -> Result<Vec<(usize, usize)>, StorageError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let size = check_batch(&buf[pos..], max_size)?;
        out.push((pos, size));
        pos += size;
    }
    if out.is_empty() {
        return Err(StorageError::corrupt("no record batch in append"));
    }
    Ok(out)
}

/// Mutators used by the log on a whole batch it owns. Callers have checked the batch
/// with [`check_batch`], so the header bytes exist.
pub(crate) mod write {
    use super::*;

    fn put(b: &mut [u8], at: usize, v: &[u8]) {
        b[at..at + v.len()].copy_from_slice(v);
    }
    pub(crate) fn set_base_offset(batch: &mut [u8], offset: i64) {
        put(batch, BASE_OFFSET, &offset.to_be_bytes());
    }
    pub(crate) fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
        put(batch, LEADER_EPOCH, &epoch.to_be_bytes());
    }
    /// LogAppendTime: flag the batch and make `now` its max timestamp; the CRC changes.
    pub(crate) fn stamp_log_append_time(batch: &mut [u8], now_ms: i64) {
        let attrs = be_i16(batch, ATTRIBUTES) | TIMESTAMP_TYPE_BIT;
        put(batch, ATTRIBUTES, &attrs.to_be_bytes());
        put(batch, MAX_TIMESTAMP, &now_ms.to_be_bytes());
        refresh_crc(batch);
    }
    pub(crate) fn refresh_crc(batch: &mut [u8]) {
        let crc = compute_crc(batch);
        put(batch, CRC, &crc.to_be_bytes());
    }

    /// Fields of a batch header to build from scratch (compaction rewrites).
    pub(crate) struct NewHeader {
        pub(crate) base_offset: i64,
        pub(crate) partition_leader_epoch: i32,
        pub(crate) attributes: i16,
        pub(crate) last_offset_delta: i32,
        pub(crate) base_timestamp: i64,
        pub(crate) max_timestamp: i64,
        pub(crate) producer_id: i64,
        pub(crate) producer_epoch: i16,
        pub(crate) base_sequence: i32,
        pub(crate) record_count: i32,
    }

    /// Builds a complete batch around already-encoded `records` bytes, CRC included.
    pub(crate) fn build_batch(h: &NewHeader, records: &[u8]) -> Result<Vec<u8>, StorageError> {
        let total = BATCH_HEADER_LEN + records.len();
        let length = i32::try_from(total - LOG_OVERHEAD)
            .map_err(|_| StorageError::InvalidArgument("rewritten batch too large".into()))?;
        let mut b = vec![0u8; total];
        put(&mut b, BASE_OFFSET, &h.base_offset.to_be_bytes());
        put(&mut b, LENGTH, &length.to_be_bytes());
        put(
            &mut b,
            LEADER_EPOCH,
            &h.partition_leader_epoch.to_be_bytes(),
        );
        b[MAGIC] = 2;
        put(&mut b, ATTRIBUTES, &h.attributes.to_be_bytes());
        put(
            &mut b,
            LAST_OFFSET_DELTA,
            &h.last_offset_delta.to_be_bytes(),
        );
        put(&mut b, BASE_TIMESTAMP, &h.base_timestamp.to_be_bytes());
        put(&mut b, MAX_TIMESTAMP, &h.max_timestamp.to_be_bytes());
        put(&mut b, PRODUCER_ID, &h.producer_id.to_be_bytes());
        put(&mut b, PRODUCER_EPOCH, &h.producer_epoch.to_be_bytes());
        put(&mut b, BASE_SEQUENCE, &h.base_sequence.to_be_bytes());
        put(&mut b, RECORD_COUNT, &h.record_count.to_be_bytes());
        b[BATCH_HEADER_LEN..].copy_from_slice(records);
        refresh_crc(&mut b);
        Ok(b)
    }

    /// Attribute bits with the codec cleared (compaction writes uncompressed batches).
    pub(crate) fn without_codec(attributes: i16) -> i16 {
        attributes & !COMPRESSION_MASK
    }
}
