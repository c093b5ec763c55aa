//! Building RecordBatch v2 bytes: plain or compressed, idempotent or transactional,
//! control markers, CreateTime or LogAppendTime.
//!
//! Records are encoded as they are added, so borrowed keys and values are never
//! copied into intermediate structures; [`BatchBuilder::encode`] then compresses the
//! block and writes the header around it.

use crate::compression::compress;
use crate::error::RecordsError;
use crate::header::{
    assemble_batch, BatchFields, Codec, CONTROL_BIT, TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT,
};
use crate::varint::put_varlong;

/// One record to put in a batch (owned; see [`BatchBuilder::push`] for borrowed data).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RecordSpec {
    /// Key, `None` for null.
    pub key: Option<Vec<u8>>,
    /// Value, `None` for null (a tombstone in compacted topics).
    pub value: Option<Vec<u8>>,
    /// Record timestamp in ms.
    pub timestamp: i64,
    /// Headers as (key, value) pairs, in order; keys may repeat.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// Assembles one batch with base offset 0, leader epoch -1 and a correct CRC-32C.
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    control: bool,
    codec: Codec,
    log_append_time: Option<i64>,
    /// Encoded records so far.
    body: Vec<u8>,
    /// One record's encoding before its length prefix is known.
    scratch: Vec<u8>,
    count: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    /// The first record that could not be encoded; `encode` reports it.
    failed: Option<String>,
}

impl Default for BatchBuilder {
    fn default() -> Self {
        BatchBuilder {
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
            control: false,
            codec: Codec::None,
            log_append_time: None,
            body: Vec::new(),
            scratch: Vec::new(),
            count: 0,
            base_timestamp: -1,
            max_timestamp: -1,
            failed: None,
        }
    }
}

/// Appends a length-prefixed byte string (-1 for null); false when too long for i32.
fn put_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) -> bool {
    match bytes {
        None => put_varlong(out, -1),
        Some(b) => {
            let Ok(len) = i32::try_from(b.len()) else {
                return false;
            };
            put_varlong(out, i64::from(len));
            out.extend_from_slice(b);
        }
    }
    true
}

impl BatchBuilder {
    /// An empty, uncompressed, non-idempotent, non-transactional CreateTime batch.
    pub fn new() -> Self {
        BatchBuilder::default()
    }
    /// Idempotent producer fields.
    pub fn producer(mut self, id: i64, epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = id;
        self.producer_epoch = epoch;
        self.base_sequence = base_sequence;
        self
    }
    /// Marks the batch transactional.
    pub fn transactional(mut self, yes: bool) -> Self {
        self.transactional = yes;
        self
    }
    /// Compresses the records block with `codec`.
    pub fn compression(mut self, codec: Codec) -> Self {
        self.codec = codec;
        self
    }
    /// Writes the batch as the log stores it on a LogAppendTime topic: flagged, with
    /// `append_time_ms` as its max timestamp.
    pub fn log_append_time(mut self, append_time_ms: i64) -> Self {
        self.log_append_time = Some(append_time_ms);
        self
    }
    /// Adds one record.
    pub fn record(mut self, record: RecordSpec) -> Self {
        self.push(
            record.timestamp,
            record.key.as_deref(),
            record.value.as_deref(),
            &record.headers,
        );
        self
    }
    /// Shorthand for a record without headers.
    pub fn kv(mut self, key: Option<&[u8]>, value: Option<&[u8]>, timestamp: i64) -> Self {
        self.push::<&[u8], &[u8]>(timestamp, key, value, &[]);
        self
    }

    /// Adds one record from borrowed parts; its offset delta is its position.
    pub fn push<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(K, Option<V>)],
    ) {
        if self.failed.is_some() {
            return;
        }
        if self.count == 0 {
            self.base_timestamp = timestamp;
            self.max_timestamp = timestamp;
        }
        self.max_timestamp = self.max_timestamp.max(timestamp);
        let index = self.count;
        let rec = &mut self.scratch;
        rec.clear();
        rec.push(0); // attributes: unused in v2
        put_varlong(rec, timestamp.wrapping_sub(self.base_timestamp));
        put_varlong(rec, i64::from(index));
        let mut fits = put_bytes(rec, key) && put_bytes(rec, value);
        put_varlong(rec, headers.len() as i64);
        for (k, v) in headers {
            fits = fits
                && put_bytes(rec, Some(k.as_ref()))
                && put_bytes(rec, v.as_ref().map(AsRef::as_ref));
        }
        let Some(next) = self.count.checked_add(1).filter(|_| fits) else {
            self.failed = Some(format!("record {index} is too large"));
            return;
        };
        put_varlong(&mut self.body, rec.len() as i64);
        self.body.extend_from_slice(rec);
        self.count = next;
    }

    /// A transaction marker batch (control, transactional) for `commit` or abort. Its
    /// one record's key is `version 0 (i16), type (i16: 0 ABORT, 1 COMMIT)`, its value
    /// `version 0 (i16), coordinator epoch (i32)`.
    pub fn control_marker(
        id: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        timestamp: i64,
    ) -> Self {
        let key = [0u8, 0, 0, u8::from(commit)];
        let mut value = vec![0u8, 0];
        value.extend_from_slice(&coordinator_epoch.to_be_bytes());
        let mut b = BatchBuilder::new()
            .producer(id, epoch, -1)
            .transactional(true);
        b.control = true;
        b.kv(Some(&key), Some(&value), timestamp)
    }

    /// Records added so far.
    pub fn len(&self) -> usize {
        self.count as usize
    }
    /// No record added yet.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The encoded batch.
    pub fn encode(&self) -> Result<Vec<u8>, RecordsError> {
        if let Some(why) = &self.failed {
            return Err(RecordsError::Unencodable(why.clone()));
        }
        if self.count == 0 {
            return Err(RecordsError::Unencodable("a batch needs a record".into()));
        }
        let mut attributes = self.codec.attribute_bits();
        if self.transactional {
            attributes |= TRANSACTIONAL_BIT;
        }
        if self.control {
            attributes |= CONTROL_BIT;
        }
        if self.log_append_time.is_some() {
            attributes |= TIMESTAMP_TYPE_BIT;
        }
        let records = compress(self.codec, &self.body)?;
        assemble_batch(
            &BatchFields {
                base_offset: 0,
                partition_leader_epoch: -1,
                attributes,
                last_offset_delta: self.count - 1,
                base_timestamp: self.base_timestamp,
                max_timestamp: self.log_append_time.unwrap_or(self.max_timestamp),
                producer_id: self.producer_id,
                producer_epoch: self.producer_epoch,
                base_sequence: self.base_sequence,
                record_count: self.count,
            },
            &records,
        )
    }

    /// [`BatchBuilder::encode`] for callers that only need to know whether it worked:
    /// `None` if there is no record or the batch cannot be encoded.
    pub fn build(&self) -> Option<Vec<u8>> {
        self.encode().ok()
    }
}
