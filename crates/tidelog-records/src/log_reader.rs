//! Reading the records of a run of batches back, as the coordinators replay their
//! internal topics (`__consumer_offsets`, `__transaction_state`).
//!
//! [`LogRecords`] walks the complete batches of a buffer read from a log and yields
//! every record with what replay needs: its offset, key and value, the producer, and
//! whether its batch is transactional or a control batch (with the marker type of a
//! transaction marker). A partial batch at the end of the buffer (a read cut at a byte
//! limit) ends the walk without an error; [`LogRecords::next_offset`] then says where
//! the next read starts. A complete batch that does not decode is reported once, as an
//! error carrying its base offset, and the walk goes on with the next batch.

use bytes::Bytes;

use crate::compression::records_block;
use crate::error::RecordsError;
use crate::header::{check_batch, BatchHeader, Codec, BATCH_HEADER_LEN};
use crate::record::RecordIter;

/// Decompressed size a replayed batch may have (internal topics write small batches).
pub const DEFAULT_REPLAY_INFLATE_LIMIT: usize = 64 << 20;

/// Type of a transaction marker, from a control record's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlMarker {
    /// The producer's transaction was aborted.
    Abort,
    /// The producer's transaction was committed.
    Commit,
}

impl ControlMarker {
    /// The marker a control record's key names (`version i16, type i16`; type 0 is
    /// ABORT, 1 COMMIT); `None` for other control types or a short key.
    pub fn from_key(key: &[u8]) -> Option<ControlMarker> {
        match key {
            [_, _, 0, 0, ..] => Some(ControlMarker::Abort),
            [_, _, 0, 1, ..] => Some(ControlMarker::Commit),
            _ => None,
        }
    }
}

/// One record read back from a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// Its offset.
    pub offset: i64,
    /// Its timestamp (the batch's append time on LogAppendTime batches).
    pub timestamp: i64,
    /// The key.
    pub key: Option<Bytes>,
    /// The value.
    pub value: Option<Bytes>,
    /// The batch's producer id (-1 when not idempotent).
    pub producer_id: i64,
    /// The batch's producer epoch.
    pub producer_epoch: i16,
    /// The batch is part of a transaction.
    pub is_transactional: bool,
    /// The batch is a control batch (its records are markers, not data).
    pub is_control: bool,
    /// For a control record: the transaction marker it is, when it is one.
    pub marker: Option<ControlMarker>,
}

/// A batch that could not be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("batch at offset {base_offset}: {error}")]
pub struct BatchReadError {
    /// The batch's base offset.
    pub base_offset: i64,
    /// What is wrong with it.
    pub error: RecordsError,
}

/// Iterator over every record of the complete batches in a buffer.
pub struct LogRecords {
    buf: Bytes,
    /// Start of the next batch in `buf`.
    pos: usize,
    /// One past the last offset of the batches walked so far.
    next_offset: Option<i64>,
    inflate_limit: usize,
    /// Records of the batch being walked, not yet yielded.
    pending: std::vec::IntoIter<LogRecord>,
    /// A batch header whose length makes no sense: nothing after it can be found.
    stuck: bool,
}

impl LogRecords {
    /// Walks the batches of `buf`.
    pub fn new(buf: Bytes) -> Self {
        LogRecords {
            buf,
            pos: 0,
            next_offset: None,
            inflate_limit: DEFAULT_REPLAY_INFLATE_LIMIT,
            pending: Vec::new().into_iter(),
            stuck: false,
        }
    }

    /// Bounds the decompressed size of each batch (default
    /// [`DEFAULT_REPLAY_INFLATE_LIMIT`]).
    pub fn with_inflate_limit(mut self, limit: usize) -> Self {
        self.inflate_limit = limit;
        self
    }

    /// One past the last offset of the complete batches walked so far (taken from each
    /// batch header, so it is right even when compaction removed a batch's last
    /// records); `None` before the first batch.
    pub fn next_offset(&self) -> Option<i64> {
        self.next_offset
    }

    /// Bytes of the buffer taken by the complete batches walked so far.
    pub fn consumed_bytes(&self) -> usize {
        self.pos
    }

    /// The next complete batch, or `None` at the end or at a partial batch.
    fn next_batch(&mut self) -> Option<Result<Vec<LogRecord>, BatchReadError>> {
        if self.stuck {
            return None;
        }
        let rest = &self.buf[self.pos..];
        let header = BatchHeader::new(rest).ok()?;
        let Some(size) = header.total_size() else {
            self.stuck = true;
            return Some(Err(BatchReadError {
                base_offset: header.base_offset(),
                error: RecordsError::corrupt(format!("bad batch length {}", header.batch_length())),
            }));
        };
        if size > rest.len() {
            return None;
        }
        let start = self.pos;
        self.pos += size;
        self.next_offset = Some(header.last_offset().saturating_add(1));
        let batch = self.buf.slice(start..start + size);
        Some(
            decode_batch(&batch, self.inflate_limit).map_err(|error| BatchReadError {
                base_offset: header.base_offset(),
                error,
            }),
        )
    }
}

fn decode_batch(batch: &Bytes, limit: usize) -> Result<Vec<LogRecord>, RecordsError> {
    check_batch(batch)?;
    let h = BatchHeader::new(batch)?;
    let block = match h.codec() {
        Some(Codec::None) => batch.slice(BATCH_HEADER_LEN..),
        _ => Bytes::from(records_block(batch, limit)?.into_owned()),
    };
    let mut out = Vec::new();
    for record in RecordIter::new(&block, h.record_count()) {
        let record = record?;
        let key = record.key.map(|k| block.slice_ref(k));
        out.push(LogRecord {
            offset: h
                .base_offset()
                .saturating_add(i64::from(record.offset_delta)),
            timestamp: h.record_timestamp(record.timestamp_delta),
            marker: if h.is_control() {
                record.key.and_then(ControlMarker::from_key)
            } else {
                None
            },
            key,
            value: record.value.map(|v| block.slice_ref(v)),
            producer_id: h.producer_id(),
            producer_epoch: h.producer_epoch(),
            is_transactional: h.is_transactional(),
            is_control: h.is_control(),
        });
    }
    Ok(out)
}

impl Iterator for LogRecords {
    type Item = Result<LogRecord, BatchReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(record) = self.pending.next() {
                return Some(Ok(record));
            }
            match self.next_batch()? {
                Ok(records) => self.pending = records.into_iter(),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// The marker of a control batch: read from its first record's key; `None` when the
/// batch is not a control batch or its record does not name a transaction marker.
pub fn batch_control_marker(batch: &[u8]) -> Option<ControlMarker> {
    batch_transaction_marker(batch).map(|(marker, _)| marker)
}

/// The marker of a control batch and the coordinator epoch its value carries (value
/// `version i16, coordinator_epoch i32`; `None` when the value is too short to hold one).
pub fn batch_transaction_marker(batch: &[u8]) -> Option<(ControlMarker, Option<i32>)> {
    let header = BatchHeader::new(batch).ok()?;
    if !header.is_control() {
        return None;
    }
    // A marker batch holds one tiny record; 1 MiB is ample even when compressed.
    let block = records_block(batch, 1 << 20).ok()?;
    let record = RecordIter::new(&block, header.record_count())
        .next()?
        .ok()?;
    let marker = ControlMarker::from_key(record.key?)?;
    let coordinator_epoch = record
        .value
        .and_then(|v| v.get(2..6))
        .and_then(|b| b.try_into().ok())
        .map(i32::from_be_bytes);
    Some((marker, coordinator_epoch))
}
