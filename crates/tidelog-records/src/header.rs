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
//!     61     records (compressed as one block when the codec bits say so)
//! ```
//! All integers are big-endian. Because the CRC starts at `attributes`, the log can
//! stamp `baseOffset` and `partitionLeaderEpoch` without recomputing it; stamping
//! LogAppendTime changes `attributes` and `maxTimestamp`, so that does recompute it.

use crate::error::RecordsError;

/// Size of the fixed RecordBatch v2 header.
pub const BATCH_HEADER_LEN: usize = 61;
/// `baseOffset` + `batchLength`: the part of a batch that `batchLength` does not count.
pub const LOG_OVERHEAD: usize = 12;
/// The only record format this codec reads and writes.
pub const MAGIC_V2: i8 = 2;
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
pub(crate) const TIMESTAMP_TYPE_BIT: i16 = 0x08;
pub(crate) const TRANSACTIONAL_BIT: i16 = 0x10;
pub(crate) const CONTROL_BIT: i16 = 0x20;

/// Compression codec named by the low 3 attribute bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    /// Records stored as-is.
    None,
    /// gzip (RFC 1952).
    Gzip,
    /// Snappy, xerial-framed (as the Java client writes) or one raw block.
    Snappy,
    /// LZ4 frame format.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl Codec {
    /// Every codec, for tests and tools that try each.
    pub const ALL: [Codec; 5] = [
        Codec::None,
        Codec::Gzip,
        Codec::Snappy,
        Codec::Lz4,
        Codec::Zstd,
    ];

    /// The codec named by `attributes`, `None` for the unassigned values 5-7.
    pub fn from_attributes(attributes: i16) -> Option<Codec> {
        match attributes & COMPRESSION_MASK {
            0 => Some(Codec::None),
            1 => Some(Codec::Gzip),
            2 => Some(Codec::Snappy),
            3 => Some(Codec::Lz4),
            4 => Some(Codec::Zstd),
            _ => None,
        }
    }

    /// The attribute bits that name this codec.
    pub fn attribute_bits(self) -> i16 {
        match self {
            Codec::None => 0,
            Codec::Gzip => 1,
            Codec::Snappy => 2,
            Codec::Lz4 => 3,
            Codec::Zstd => 4,
        }
    }
}

/// Attribute bits with the codec cleared (compaction rewrites batches uncompressed).
pub fn attributes_without_codec(attributes: i16) -> i16 {
    attributes & !COMPRESSION_MASK
}

/// Zero-copy view of a batch header at the start of a byte slice.
#[derive(Debug, Clone, Copy)]
pub struct BatchHeader<'a> {
    bytes: &'a [u8; BATCH_HEADER_LEN],
}

fn be_i64(b: &[u8; BATCH_HEADER_LEN], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}
fn be_i32(b: &[u8; BATCH_HEADER_LEN], at: usize) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    i32::from_be_bytes(a)
}
fn be_i16(b: &[u8; BATCH_HEADER_LEN], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

impl<'a> BatchHeader<'a> {
    /// Views the first [`BATCH_HEADER_LEN`] bytes of `bytes`; fails if there are fewer.
    pub fn new(bytes: &'a [u8]) -> Result<Self, RecordsError> {
        let head = bytes
            .get(..BATCH_HEADER_LEN)
            .and_then(|h| <&[u8; BATCH_HEADER_LEN]>::try_from(h).ok())
            .ok_or_else(|| {
                RecordsError::corrupt(format!(
                    "batch header needs {BATCH_HEADER_LEN} bytes, have {}",
                    bytes.len()
                ))
            })?;
        Ok(BatchHeader { bytes: head })
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
    /// Format version; 2 for everything this codec accepts.
    pub fn magic(&self) -> i8 {
        i8::from_be_bytes([self.bytes[MAGIC]])
    }
    /// Stored CRC-32C.
    pub fn crc(&self) -> u32 {
        u32::from_be_bytes([
            self.bytes[CRC],
            self.bytes[CRC + 1],
            self.bytes[CRC + 2],
            self.bytes[CRC + 3],
        ])
    }
    /// Raw attribute bits.
    pub fn attributes(&self) -> i16 {
        be_i16(self.bytes, ATTRIBUTES)
    }
    /// Compression codec, `None` if the bits name an unknown codec.
    pub fn codec(&self) -> Option<Codec> {
        Codec::from_attributes(self.attributes())
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
    /// Largest timestamp in the batch (the append time for LogAppendTime batches).
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
        i32::try_from(last % (i64::from(i32::MAX) + 1)).unwrap_or(-1)
    }
    /// Number of records.
    pub fn record_count(&self) -> i32 {
        be_i32(self.bytes, RECORD_COUNT)
    }
    /// The timestamp of a record with `timestamp_delta`: the batch's max timestamp for
    /// LogAppendTime batches, the base timestamp plus the delta otherwise.
    pub fn record_timestamp(&self, timestamp_delta: i64) -> i64 {
        if self.is_log_append_time() {
            self.max_timestamp()
        } else {
            self.base_timestamp().saturating_add(timestamp_delta)
        }
    }
}

/// CRC-32C over the CRC-covered part of a whole batch (empty for a short slice).
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(batch.get(CRC_START..).unwrap_or_default())
}

/// Checks the framing of the whole batch at the start of `buf` and returns its size:
/// a sane declared length with that many bytes present, magic 2, a known codec, a
/// non-negative lastOffsetDelta and a matching CRC-32C. The records are not looked at
/// (see [`crate::validate`]).
pub fn check_batch(buf: &[u8]) -> Result<usize, RecordsError> {
    let header = BatchHeader::new(buf)?;
    let size = header.total_size().ok_or_else(|| {
        RecordsError::corrupt(format!("bad batch length {}", header.batch_length()))
    })?;
    let batch = buf.get(..size).ok_or_else(|| {
        RecordsError::corrupt(format!(
            "batch declares {size} bytes, only {} present",
            buf.len()
        ))
    })?;
    if header.magic() != MAGIC_V2 {
        return Err(RecordsError::corrupt(format!(
            "unsupported magic {}",
            header.magic()
        )));
    }
    if header.codec().is_none() {
        return Err(RecordsError::corrupt(format!(
            "unknown compression codec in attributes {:#x}",
            header.attributes()
        )));
    }
    if header.last_offset_delta() < 0 {
        return Err(RecordsError::corrupt("negative lastOffsetDelta"));
    }
    let actual = compute_crc(batch);
    if actual != header.crc() {
        return Err(RecordsError::corrupt(format!(
            "crc mismatch: stored {:#010x}, computed {actual:#010x}",
            header.crc()
        )));
    }
    Ok(size)
}

/// Write access to the header of one whole batch, for the log stamping what it assigns.
#[derive(Debug)]
pub struct BatchHeaderMut<'a> {
    batch: &'a mut [u8],
}

impl<'a> BatchHeaderMut<'a> {
    /// Wraps a whole batch (header and records); fails if it is shorter than a header.
    pub fn new(batch: &'a mut [u8]) -> Result<Self, RecordsError> {
        BatchHeader::new(batch)?;
        Ok(BatchHeaderMut { batch })
    }

    fn put(&mut self, at: usize, v: &[u8]) {
        self.batch[at..at + v.len()].copy_from_slice(v);
    }

    /// Sets `baseOffset` (outside the CRC).
    pub fn set_base_offset(&mut self, offset: i64) {
        self.put(BASE_OFFSET, &offset.to_be_bytes());
    }
    /// Sets `partitionLeaderEpoch` (outside the CRC).
    pub fn set_partition_leader_epoch(&mut self, epoch: i32) {
        self.put(LEADER_EPOCH, &epoch.to_be_bytes());
    }
    /// LogAppendTime: flags the batch and makes `now_ms` its max timestamp; the CRC is
    /// recomputed because both fields are covered by it.
    pub fn stamp_log_append_time(&mut self, now_ms: i64) {
        // `new` checked that the header is there.
        let attributes = i16::from_be_bytes([self.batch[ATTRIBUTES], self.batch[ATTRIBUTES + 1]])
            | TIMESTAMP_TYPE_BIT;
        self.put(ATTRIBUTES, &attributes.to_be_bytes());
        self.put(MAX_TIMESTAMP, &now_ms.to_be_bytes());
        self.refresh_crc();
    }
    /// Recomputes the CRC-32C over the covered bytes.
    pub fn refresh_crc(&mut self) {
        let crc = compute_crc(self.batch);
        self.put(CRC, &crc.to_be_bytes());
    }
}

/// Every header field of a batch to assemble from scratch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchFields {
    /// `baseOffset`.
    pub base_offset: i64,
    /// `partitionLeaderEpoch`.
    pub partition_leader_epoch: i32,
    /// `attributes`, codec bits included.
    pub attributes: i16,
    /// `lastOffsetDelta`.
    pub last_offset_delta: i32,
    /// `baseTimestamp`.
    pub base_timestamp: i64,
    /// `maxTimestamp`.
    pub max_timestamp: i64,
    /// `producerId`.
    pub producer_id: i64,
    /// `producerEpoch`.
    pub producer_epoch: i16,
    /// `baseSequence`.
    pub base_sequence: i32,
    /// `recordCount`.
    pub record_count: i32,
}

/// A complete batch around already encoded (and, per the codec bits, compressed)
/// `records` bytes, with its length and CRC-32C filled in.
pub fn assemble_batch(fields: &BatchFields, records: &[u8]) -> Result<Vec<u8>, RecordsError> {
    let total = BATCH_HEADER_LEN + records.len();
    let length = i32::try_from(total - LOG_OVERHEAD)
        .map_err(|_| RecordsError::Unencodable("batch longer than i32::MAX".into()))?;
    let mut b = Vec::with_capacity(total);
    b.extend_from_slice(&fields.base_offset.to_be_bytes());
    b.extend_from_slice(&length.to_be_bytes());
    b.extend_from_slice(&fields.partition_leader_epoch.to_be_bytes());
    b.extend_from_slice(&MAGIC_V2.to_be_bytes());
    b.extend_from_slice(&[0; 4]); // CRC, filled below
    b.extend_from_slice(&fields.attributes.to_be_bytes());
    b.extend_from_slice(&fields.last_offset_delta.to_be_bytes());
    b.extend_from_slice(&fields.base_timestamp.to_be_bytes());
    b.extend_from_slice(&fields.max_timestamp.to_be_bytes());
    b.extend_from_slice(&fields.producer_id.to_be_bytes());
    b.extend_from_slice(&fields.producer_epoch.to_be_bytes());
    b.extend_from_slice(&fields.base_sequence.to_be_bytes());
    b.extend_from_slice(&fields.record_count.to_be_bytes());
    b.extend_from_slice(records);
    BatchHeaderMut::new(&mut b)?.refresh_crc();
    Ok(b)
}
