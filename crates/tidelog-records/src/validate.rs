//! Checking every record of a batch before it is stored, as Kafka's broker does on
//! produce, so that no consumer or compaction pass ever meets a batch it cannot read.
//!
//! What is refused, and with which error:
//!
//! | check | error |
//! |---|---|
//! | framing: length, magic 2, known codec, CRC-32C | CORRUPT_MESSAGE |
//! | a record whose length runs past the block, a key/value length below -1, a negative or impossible header count, a null header key, fields that do not fill the record | CORRUPT_MESSAGE |
//! | a negative `recordCount`, fewer records than it says, or bytes left after the last one | CORRUPT_MESSAGE |
//! | compressed data that does not decompress, or bytes after the end of a gzip stream | CORRUPT_MESSAGE |
//! | records that inflate past [`Rules::max_inflated_bytes`] | MESSAGE_TOO_LARGE |
//! | from a client: a control batch; `recordCount` < 1 or not `lastOffsetDelta + 1`; offset deltas other than 0, 1, ..., n-1 | INVALID_RECORD |
//! | a record without a key on a compacted topic (every such record is named) | INVALID_RECORD |
//! | with [`Rules::timestamps`]: a CreateTime record timestamped outside the window (every such record is named) | INVALID_TIMESTAMP |
//!
//! Kafka also refuses a producer id without a base sequence from clients; here the
//! broker's own transactional offset commits reach the log by the client path with
//! exactly that, so the idempotence check (which treats such a batch as not
//! idempotent) is left to decide.
//!
//! Compressed batches are decompressed as a stream: one record at a time is held in
//! memory, never the whole block.

use std::io::{BufReader, Read};

use crate::compression::{decompressing_reader, read_error};
use crate::error::{RecordError, RecordsError};
use crate::header::{check_batch, BatchHeader, Codec, BATCH_HEADER_LEN};
use crate::record::{Record, RecordIter};
use crate::varint::{unzigzag, MAX_VARLONG_LEN};

/// Multiple of `max.message.bytes` a compressed batch may inflate to.
pub const INFLATE_FACTOR: usize = 16;
/// Inflated size always allowed, however small `max.message.bytes` is.
pub const INFLATE_FLOOR: usize = 16 << 20;
/// Inflated size never allowed, however large `max.message.bytes` is: what a reader
/// of stored batches (compaction, timestamp search) must be ready to decompress.
pub const INFLATE_CEILING: usize = 256 << 20;

/// The most bytes a compressed batch of a topic with `max_message_bytes` may inflate
/// to: [`INFLATE_FACTOR`] times it, at least [`INFLATE_FLOOR`] and at most
/// [`INFLATE_CEILING`].
pub fn max_inflated_bytes(max_message_bytes: u32) -> usize {
    (max_message_bytes as usize)
        .saturating_mul(INFLATE_FACTOR)
        .clamp(INFLATE_FLOOR, INFLATE_CEILING)
}

/// What a batch is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// Written by a producer (not by the broker itself): control batches are refused
    /// and the offset fields must be exactly what a producer writes.
    pub from_client: bool,
    /// The topic is compacted: every data record needs a key.
    pub require_keys: bool,
    /// Bound on a compressed batch's decompressed records (see [`max_inflated_bytes`]).
    pub max_inflated_bytes: usize,
    /// The timestamps a CreateTime record may carry (`message.timestamp.before.max.ms`
    /// and `after.max.ms` around the broker's clock); `None` accepts any.
    pub timestamps: Option<TimestampWindow>,
}

/// Inclusive bounds on a record's timestamp, in milliseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampWindow {
    pub earliest: i64,
    pub latest: i64,
}

impl TimestampWindow {
    /// `before_max_ms` before `now_ms` to `after_max_ms` after it; `None` when both are
    /// unbounded (Kafka's `Long.MAX_VALUE`).
    pub fn around(now_ms: i64, before_max_ms: i64, after_max_ms: i64) -> Option<Self> {
        if before_max_ms == i64::MAX && after_max_ms == i64::MAX {
            return None;
        }
        Some(TimestampWindow {
            earliest: now_ms.saturating_sub(before_max_ms),
            latest: now_ms.saturating_add(after_max_ms),
        })
    }
}

/// Checks the batch at the start of `batch` (framing, header, every record) and
/// returns its size.
pub fn validate(batch: &[u8], rules: &Rules) -> Result<usize, RecordsError> {
    let size = check_batch(batch)?;
    let batch = &batch[..size];
    let header = BatchHeader::new(batch)?;
    if rules.from_client {
        check_client_header(&header)?;
    }
    // Kafka's readers refuse a negative count whoever wrote the batch; an empty batch
    // (count 0) is what compaction may leave to keep a producer's state.
    let Ok(count) = usize::try_from(header.record_count()) else {
        return Err(RecordsError::corrupt(format!(
            "record count {}",
            header.record_count()
        )));
    };
    // LogAppendTime batches are stamped by the broker; control batches are its own.
    let timestamps = rules
        .timestamps
        .filter(|_| !header.is_log_append_time() && !header.is_control())
        .map(|w| (w, header.base_timestamp()));
    let mut checker = RecordChecker {
        from_client: rules.from_client,
        require_keys: rules.require_keys && !header.is_control(),
        timestamps,
        count,
        refused: Vec::new(),
        out_of_window: Vec::new(),
    };
    let body = &batch[BATCH_HEADER_LEN..];
    match header.codec() {
        Some(Codec::None) | None => checker.walk_block(body)?,
        Some(codec) => checker.walk_stream(codec, body, rules.max_inflated_bytes)?,
    }
    checker.verdict()?;
    Ok(size)
}

/// Kafka's batch-level rules for what a producer may send.
fn check_client_header(h: &BatchHeader<'_>) -> Result<(), RecordsError> {
    if h.is_control() {
        return Err(RecordsError::invalid("control batch from a client"));
    }
    if h.record_count() <= 0 {
        return Err(RecordsError::invalid(format!(
            "record count {}",
            h.record_count()
        )));
    }
    if i64::from(h.last_offset_delta()) != i64::from(h.record_count()) - 1 {
        return Err(RecordsError::invalid(format!(
            "record count {} does not match lastOffsetDelta {}",
            h.record_count(),
            h.last_offset_delta()
        )));
    }
    Ok(())
}

struct RecordChecker {
    from_client: bool,
    require_keys: bool,
    /// The window and the batch's base timestamp.
    timestamps: Option<(TimestampWindow, i64)>,
    count: usize,
    /// Keyless records of a compacted topic.
    refused: Vec<RecordError>,
    /// Records timestamped outside the window.
    out_of_window: Vec<RecordError>,
}

impl RecordChecker {
    /// Record-level rules on record `index`; structural ones are the parser's.
    fn check(&mut self, index: usize, record: &Record<'_>) -> Result<(), RecordsError> {
        let batch_index = i32::try_from(index).unwrap_or(i32::MAX);
        if self.from_client && usize::try_from(record.offset_delta).ok() != Some(index) {
            return Err(RecordsError::Invalid {
                message: format!(
                    "record {index} has offset delta {}; a producer writes 0, 1, 2, ...",
                    record.offset_delta
                ),
                record_errors: vec![RecordError {
                    batch_index,
                    message: format!("offset delta {}, expected {index}", record.offset_delta),
                }],
            });
        }
        if self.require_keys && record.key.is_none() {
            self.refused.push(RecordError {
                batch_index,
                message: "a compacted topic accepts only records with a key".into(),
            });
        }
        if let Some((window, base)) = self.timestamps {
            let timestamp = base.saturating_add(record.timestamp_delta);
            // -1 is "no timestamp", which Kafka lets through.
            if timestamp != -1 && !(window.earliest..=window.latest).contains(&timestamp) {
                self.out_of_window.push(RecordError {
                    batch_index,
                    message: format!(
                        "timestamp {timestamp} is out of range [{}, {}]",
                        window.earliest, window.latest
                    ),
                });
            }
        }
        Ok(())
    }

    fn walk_block(&mut self, block: &[u8]) -> Result<(), RecordsError> {
        let mut records = RecordIter::new(block, i32::try_from(self.count).unwrap_or(0));
        for index in 0..self.count {
            if records.trailing_bytes() == 0 {
                return Err(missing(index, self.count));
            }
            let record = match records.next() {
                Some(Ok(record)) => record,
                Some(Err(e)) => return Err(at_record(index, e)),
                None => return Err(missing(index, self.count)),
            };
            self.check(index, &record)?;
        }
        match records.trailing_bytes() {
            0 => Ok(()),
            extra => Err(trailing(extra, self.count)),
        }
    }

    fn walk_stream(&mut self, codec: Codec, body: &[u8], limit: usize) -> Result<(), RecordsError> {
        let mut stream = BufReader::new(decompressing_reader(codec, body, limit)?);
        let mut record = Vec::new();
        for index in 0..self.count {
            let Some(length) = read_length(&mut stream).map_err(|e| at_record(index, e))? else {
                return Err(missing(index, self.count));
            };
            let length = usize::try_from(length).map_err(|_| {
                at_record(
                    index,
                    RecordsError::corrupt(format!("record length {length}")),
                )
            })?;
            if length > limit {
                // Declared bigger than the whole allowed block: refuse before allocating.
                return Err(RecordsError::InflatedTooLarge { limit });
            }
            record.resize(length, 0);
            stream
                .read_exact(&mut record)
                .map_err(|e| match read_error(e) {
                    RecordsError::Corrupt(_) => at_record(
                        index,
                        RecordsError::corrupt(format!(
                            "record length {length} runs past the records"
                        )),
                    ),
                    other => other,
                })?;
            let parsed = Record::parse_body(&record, &record).map_err(|e| at_record(index, e))?;
            self.check(index, &parsed)?;
        }
        let mut extra = [0u8; 1];
        match stream.read(&mut extra).map_err(read_error)? {
            0 => Ok(()),
            _ => Err(trailing(1, self.count)),
        }
    }

    fn verdict(self) -> Result<(), RecordsError> {
        if !self.out_of_window.is_empty() {
            return Err(RecordsError::InvalidTimestamp {
                message: format!(
                    "{} of {} records have a timestamp outside the topic's \
                     message.timestamp.before.max.ms / after.max.ms window (first: {})",
                    self.out_of_window.len(),
                    self.count,
                    self.out_of_window[0].message
                ),
                record_errors: self.out_of_window,
            });
        }
        if self.refused.is_empty() {
            return Ok(());
        }
        let indexes: Vec<String> = self
            .refused
            .iter()
            .take(3)
            .map(|e| e.batch_index.to_string())
            .collect();
        Err(RecordsError::Invalid {
            message: format!(
                "{} of {} records have no key, which a compacted topic requires (records {}{})",
                self.refused.len(),
                self.count,
                indexes.join(", "),
                if self.refused.len() > 3 { ", ..." } else { "" }
            ),
            record_errors: self.refused,
        })
    }
}

/// Reads a record's length varint from a stream; `None` at a clean end of stream.
fn read_length(stream: &mut impl Read) -> Result<Option<i64>, RecordsError> {
    let mut raw: u64 = 0;
    for i in 0..MAX_VARLONG_LEN {
        let mut byte = [0u8; 1];
        if stream.read(&mut byte).map_err(read_error)? == 0 {
            return if i == 0 {
                Ok(None)
            } else {
                Err(RecordsError::corrupt("truncated varint"))
            };
        }
        raw |= u64::from(byte[0] & 0x7f) << (7 * i);
        if byte[0] & 0x80 == 0 {
            return Ok(Some(unzigzag(raw)));
        }
    }
    Err(RecordsError::corrupt("varint longer than 10 bytes"))
}

fn at_record(index: usize, e: RecordsError) -> RecordsError {
    match e {
        RecordsError::Corrupt(why) => RecordsError::Corrupt(format!("record {index}: {why}")),
        other => other,
    }
}

fn missing(index: usize, count: usize) -> RecordsError {
    RecordsError::corrupt(format!(
        "the records end after {index} of the {count} the header declares"
    ))
}

fn trailing(extra: usize, count: usize) -> RecordsError {
    RecordsError::corrupt(format!(
        "{extra} or more bytes follow the {count} records the header declares"
    ))
}
