//! Building uncompressed RecordBatch v2 bytes (for coordinators, markers and tests).

use crate::batch::write::{build_batch, NewHeader};
use crate::records::put_varlong;

/// One record to put in a batch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RecordSpec {
    /// Key, `None` for null.
    pub key: Option<Vec<u8>>,
    /// Value, `None` for null (a tombstone in compacted topics).
    pub value: Option<Vec<u8>>,
    /// Record timestamp in ms.
    pub timestamp: i64,
    /// Headers as (key, value) pairs.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// Assembles an uncompressed batch with base offset 0 and a correct CRC-32C.
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    control: bool,
    records: Vec<RecordSpec>,
}

impl Default for BatchBuilder {
    fn default() -> Self {
        BatchBuilder {
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
            control: false,
            records: Vec::new(),
        }
    }
}

impl BatchBuilder {
    /// An empty, non-idempotent, non-transactional batch.
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
    /// Adds one record.
    pub fn record(mut self, record: RecordSpec) -> Self {
        self.records.push(record);
        self
    }
    /// Shorthand for a record without headers.
    pub fn kv(self, key: Option<&[u8]>, value: Option<&[u8]>, timestamp: i64) -> Self {
        self.record(RecordSpec {
            key: key.map(<[u8]>::to_vec),
            value: value.map(<[u8]>::to_vec),
            timestamp,
            headers: Vec::new(),
        })
    }
    /// A transaction marker batch (control, transactional) for `commit` or abort.
    pub fn control_marker(
        id: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        timestamp: i64,
    ) -> Self {
        let key = [0u8, 0, 0, u8::from(commit)].to_vec();
        let mut value = vec![0u8, 0];
        value.extend_from_slice(&coordinator_epoch.to_be_bytes());
        let mut b = BatchBuilder::new()
            .producer(id, epoch, -1)
            .transactional(true);
        b.control = true;
        b.record(RecordSpec {
            key: Some(key),
            value: Some(value),
            timestamp,
            headers: Vec::new(),
        })
    }

    /// The encoded batch; `None` if it has no records or is absurdly large.
    pub fn build(&self) -> Option<Vec<u8>> {
        let first = self.records.first()?;
        let base_ts = first.timestamp;
        let max_ts = self.records.iter().map(|r| r.timestamp).max()?;
        let mut body = Vec::new();
        for (i, r) in self.records.iter().enumerate() {
            let mut rec = vec![0u8];
            put_varlong(&mut rec, r.timestamp.wrapping_sub(base_ts));
            put_varlong(&mut rec, i as i64);
            put_bytes(&mut rec, r.key.as_deref());
            put_bytes(&mut rec, r.value.as_deref());
            put_varlong(&mut rec, r.headers.len() as i64);
            for (k, v) in &r.headers {
                put_bytes(&mut rec, Some(k.as_bytes()));
                put_bytes(&mut rec, v.as_deref());
            }
            put_varlong(&mut body, rec.len() as i64);
            body.extend_from_slice(&rec);
        }
        let count = i32::try_from(self.records.len()).ok()?;
        let attributes = (i16::from(self.transactional) << 4) | (i16::from(self.control) << 5);
        build_batch(
            &NewHeader {
                base_offset: 0,
                partition_leader_epoch: -1,
                attributes,
                last_offset_delta: count - 1,
                base_timestamp: base_ts,
                max_timestamp: max_ts,
                producer_id: self.producer_id,
                producer_epoch: self.producer_epoch,
                base_sequence: self.base_sequence,
                record_count: count,
            },
            &body,
        )
        .ok()
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => put_varlong(out, -1),
        Some(b) => {
            put_varlong(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}
