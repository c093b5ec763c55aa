//! Fetch responses whose record bytes never pass through the broker's heap.
//!
//! [`encode_fetch_response`] produces the complete framed response (size prefix, response
//! header, body) as a list of [`Chunk`]s. Record payloads that live in segment files are
//! [`Chunk::External`] placeholders of known length, which the connection writer fills with
//! `sendfile` from the file slice it holds under that id. Everything else is encoded here,
//! byte for byte as `kafka_protocol`'s own `FetchResponse` encoder would (the tests compare
//! the two for every version and random contents).

mod parts;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{EpochEndOffset, LeaderIdAndEpoch, SnapshotId};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::Encodable;

pub use parts::{Chunk, FetchPartitionParts, FetchResponseParts, FetchTopicParts, RecordsPayload};

use crate::error::ProtocolError;
use crate::header::response_header_version;

/// Oldest Fetch version this encoder writes.
pub const FETCH_MIN_VERSION: i16 = 4;
/// Newest Fetch version this encoder writes (the newest `kafka-protocol` 0.18 knows).
pub const FETCH_MAX_VERSION: i16 = 18;

/// Record payloads shorter than this are copied into the surrounding chunk; longer ones
/// get their own chunk (a reference count, no copy).
const INLINE_PAYLOAD_MAX: usize = 1024;

/// Collects the output: memory segments, interrupted by shared payloads and external
/// placeholders. Segments stay mutable until `finish`, so the size prefix at the start of
/// the first one can be written once the total is known.
struct ChunkWriter {
    done: Vec<Segment>,
    current: BytesMut,
    total: u64,
}

enum Segment {
    Encoded(BytesMut),
    Ready(Chunk),
}

impl ChunkWriter {
    fn new() -> Self {
        Self {
            done: Vec::new(),
            current: BytesMut::with_capacity(256),
            total: 0,
        }
    }

    fn flush(&mut self) {
        if !self.current.is_empty() {
            self.total += self.current.len() as u64;
            self.done
                .push(Segment::Encoded(std::mem::take(&mut self.current)));
        }
    }

    fn payload(&mut self, bytes: &Bytes) {
        if bytes.len() < INLINE_PAYLOAD_MAX {
            self.current.put_slice(bytes);
        } else {
            self.flush();
            self.total += bytes.len() as u64;
            self.done.push(Segment::Ready(Chunk::Bytes(bytes.clone())));
        }
    }

    fn external(&mut self, id: usize, len: u64) {
        self.flush();
        self.total += len;
        self.done.push(Segment::Ready(Chunk::External { id, len }));
    }

    /// Writes the size prefix (total minus the prefix itself) and returns the chunks.
    fn finish(mut self) -> Result<Vec<Chunk>, ProtocolError> {
        self.flush();
        let body = self.total.saturating_sub(4);
        let prefix = i32::try_from(body).map_err(|_| ProtocolError::TooLarge { size: body })?;
        if let Some(Segment::Encoded(first)) = self.done.first_mut() {
            if first.len() >= 4 {
                first[..4].copy_from_slice(&prefix.to_be_bytes());
            }
        }
        Ok(self
            .done
            .into_iter()
            .map(|s| match s {
                Segment::Encoded(b) => Chunk::Bytes(b.freeze()),
                Segment::Ready(c) => c,
            })
            .collect())
    }
}

fn put_uvarint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

fn uvarint_len(v: u32) -> usize {
    match v {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        0x4000..=0x1f_ffff => 3,
        0x20_0000..=0xfff_ffff => 4,
        _ => 5,
    }
}

fn invalid(version: i16, why: &str) -> ProtocolError {
    ProtocolError::Encode {
        what: "FetchResponse",
        version,
        source: why.into(),
    }
}

fn too_long(version: i16, len: usize) -> ProtocolError {
    invalid(version, &format!("length {len} does not fit the field"))
}

/// Array or nullable-array length: i32 before v12, unsigned varint of len + 1 after.
fn put_len(w: &mut ChunkWriter, version: i16, len: Option<usize>) -> Result<(), ProtocolError> {
    match (version >= 12, len) {
        (false, None) => w.current.put_i32(-1),
        (false, Some(n)) => w
            .current
            .put_i32(i32::try_from(n).map_err(|_| too_long(version, n))?),
        (true, None) => put_uvarint(&mut w.current, 0),
        (true, Some(n)) => {
            let n = u32::try_from(n)
                .ok()
                .and_then(|n| n.checked_add(1))
                .ok_or_else(|| too_long(version, n))?;
            put_uvarint(&mut w.current, n);
        }
    }
    Ok(())
}

fn put_struct<T: Encodable>(w: &mut ChunkWriter, version: i16, v: &T) -> Result<(), ProtocolError> {
    v.encode(&mut w.current, version)
        .map_err(|e| ProtocolError::Encode {
            what: "FetchResponse",
            version,
            source: e.into(),
        })
}

/// A tagged field holding a struct: tag, size, struct.
fn put_tagged<T: Encodable>(
    w: &mut ChunkWriter,
    version: i16,
    tag: u32,
    v: &T,
) -> Result<(), ProtocolError> {
    let size = v.compute_size(version).map_err(|e| ProtocolError::Encode {
        what: "FetchResponse",
        version,
        source: e.into(),
    })?;
    put_uvarint(&mut w.current, tag);
    put_uvarint(
        &mut w.current,
        u32::try_from(size).map_err(|_| too_long(version, size))?,
    );
    put_struct(w, version, v)
}

fn put_array<T: Encodable>(
    w: &mut ChunkWriter,
    version: i16,
    items: Option<&[T]>,
) -> Result<(), ProtocolError> {
    put_len(w, version, items.map(<[T]>::len))?;
    for item in items.unwrap_or_default() {
        put_struct(w, version, item)?;
    }
    Ok(())
}

fn put_records(
    w: &mut ChunkWriter,
    version: i16,
    records: &RecordsPayload,
) -> Result<(), ProtocolError> {
    let len = match records {
        RecordsPayload::None => None,
        RecordsPayload::Bytes(b) => Some(b.len()),
        RecordsPayload::External { len, .. } => {
            Some(usize::try_from(*len).map_err(|_| too_long(version, usize::MAX))?)
        }
    };
    put_len(w, version, len)?;
    match records {
        RecordsPayload::None => {}
        RecordsPayload::Bytes(b) => w.payload(b),
        RecordsPayload::External { id, len } => w.external(*id, *len),
    }
    Ok(())
}

fn put_partition(
    w: &mut ChunkWriter,
    version: i16,
    p: &FetchPartitionParts,
) -> Result<(), ProtocolError> {
    w.current.put_i32(p.partition_index);
    w.current.put_i16(p.error_code);
    w.current.put_i64(p.high_watermark);
    w.current.put_i64(p.last_stable_offset);
    if version >= 5 {
        w.current.put_i64(p.log_start_offset);
    }
    put_array(w, version, p.aborted_transactions.as_deref())?;
    if version >= 11 {
        w.current.put_i32(p.preferred_read_replica);
    } else if p.preferred_read_replica != -1 {
        return Err(invalid(version, "preferred_read_replica needs v11+"));
    }
    put_records(w, version, &p.records)?;
    if version >= 12 {
        let diverging = p.diverging_epoch != EpochEndOffset::default();
        let leader = p.current_leader != LeaderIdAndEpoch::default();
        let snapshot = p.snapshot_id != SnapshotId::default();
        let tags = [diverging, leader, snapshot].iter().filter(|&&b| b).count();
        put_uvarint(&mut w.current, tags as u32);
        if diverging {
            put_tagged(w, version, 0, &p.diverging_epoch)?;
        }
        if leader {
            put_tagged(w, version, 1, &p.current_leader)?;
        }
        if snapshot {
            put_tagged(w, version, 2, &p.snapshot_id)?;
        }
    }
    Ok(())
}

fn put_topic(w: &mut ChunkWriter, version: i16, t: &FetchTopicParts) -> Result<(), ProtocolError> {
    if version <= 12 {
        let name = t.name.0.as_bytes();
        if version >= 12 {
            put_len(w, version, Some(name.len()))?;
        } else {
            let n = i16::try_from(name.len()).map_err(|_| too_long(version, name.len()))?;
            w.current.put_i16(n);
        }
        w.current.put_slice(name);
    }
    if version >= 13 {
        w.current.put_slice(t.topic_id.as_bytes());
    }
    put_len(w, version, Some(t.partitions.len()))?;
    for p in &t.partitions {
        put_partition(w, version, p)?;
    }
    if version >= 12 {
        put_uvarint(&mut w.current, 0);
    }
    Ok(())
}

/// Encodes a complete framed Fetch response (size prefix, response header, body) at
/// `version` (4..=18). [`Chunk::External`] entries stand exactly where their record bytes go.
///
/// Fails, like `kafka_protocol`'s encoder, when a field is set that `version` cannot carry
/// (`session_id` below v7, `preferred_read_replica` below v11), and when the response
/// would not fit an i32 size prefix.
pub fn encode_fetch_response(
    correlation_id: i32,
    version: i16,
    resp: &FetchResponseParts,
) -> Result<Vec<Chunk>, ProtocolError> {
    if !(FETCH_MIN_VERSION..=FETCH_MAX_VERSION).contains(&version) {
        return Err(ProtocolError::UnsupportedVersion {
            api_key: ApiKey::Fetch,
            version,
        });
    }
    let mut w = ChunkWriter::new();
    w.current.put_i32(0); // size prefix, written by `finish`
    w.current.put_i32(correlation_id);
    if response_header_version(ApiKey::Fetch, version) >= 1 {
        put_uvarint(&mut w.current, 0);
    }
    w.current.put_i32(resp.throttle_time_ms);
    if version >= 7 {
        w.current.put_i16(resp.error_code);
        w.current.put_i32(resp.session_id);
    } else if resp.session_id != 0 {
        return Err(invalid(version, "session_id needs v7+"));
    }
    put_len(&mut w, version, Some(resp.topics.len()))?;
    for t in &resp.topics {
        put_topic(&mut w, version, t)?;
    }
    if version >= 12 {
        let endpoints = version >= 16 && !resp.node_endpoints.is_empty();
        put_uvarint(&mut w.current, u32::from(endpoints));
        if endpoints {
            let mut size = uvarint_len(resp.node_endpoints.len() as u32 + 1);
            for e in &resp.node_endpoints {
                size += e
                    .compute_size(version)
                    .map_err(|err| ProtocolError::Encode {
                        what: "FetchResponse",
                        version,
                        source: err.into(),
                    })?;
            }
            put_uvarint(&mut w.current, 0);
            put_uvarint(
                &mut w.current,
                u32::try_from(size).map_err(|_| too_long(version, size))?,
            );
            put_array(&mut w, version, Some(&resp.node_endpoints))?;
        }
    }
    w.finish()
}
