//! Writing and reading RecordBatch v2 ourselves rather than through the codec's record
//! encoder/decoder, which fold repeated header keys into one; Kafka allows repeats and
//! clients rely on them. Compression still uses the codec's (size-capped) implementations.
//!
//! Batch layout (big-endian): baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 |
//! magic i8 | crc u32 | attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 |
//! maxTimestamp i64 | producerId i64 | producerEpoch i16 | baseSequence i32 |
//! recordCount i32 | records (compressed as a whole per attributes bits 0-2).
//! The CRC-32C covers everything from attributes to the end of the batch.
//!
//! Record layout: length varint | attributes i8 | timestampDelta varlong |
//! offsetDelta varint | keyLength varint | key | valueLength varint | value |
//! headerCount varint | (keyLength varint | key | valueLength varint | value)*.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::compression::{
    Compressor, Decompressor, Gzip, Lz4, None as Plain, Snappy, Zstd,
};
use kafka_protocol::records::Compression;

use crate::error::{ClientError, Result};
use crate::records::{ConsumedRecord, ProduceRecord};

pub(crate) const HEADER_LEN: usize = 61;
/// baseOffset + batchLength: the part of the batch that batchLength does not count.
const LOG_OVERHEAD: usize = 12;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const RECORD_COUNT_AT: usize = 57;

/// Fixed header fields the reader needs.
#[derive(Debug, Clone, Copy)]
struct Header {
    base_offset: i64,
    attributes: i16,
    base_timestamp: i64,
    max_timestamp: i64,
    record_count: i32,
}

fn header(batch: &[u8]) -> Header {
    let mut b = batch;
    let base_offset = b.get_i64();
    let field_i64 = |at: usize| (&batch[at..at + 8]).get_i64();
    Header {
        base_offset,
        attributes: (&batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2]).get_i16(),
        base_timestamp: field_i64(BASE_TIMESTAMP_AT),
        max_timestamp: field_i64(MAX_TIMESTAMP_AT),
        record_count: (&batch[RECORD_COUNT_AT..RECORD_COUNT_AT + 4]).get_i32(),
    }
}

/// Decodes one complete batch (`batch.len() >= HEADER_LEN`, length already checked by the
/// caller) into data records at or after `from_offset`. Control batches yield nothing.
pub(crate) fn read_batch(
    batch: Bytes,
    partition: i32,
    from_offset: i64,
) -> Result<Vec<ConsumedRecord>> {
    let h = header(&batch);
    let corrupt =
        |what: &str| ClientError::Protocol(format!("batch at offset {}: {what}", h.base_offset));
    let stored_crc = (&batch[CRC_AT..CRC_AT + 4]).get_u32();
    if crc32c::crc32c(&batch[ATTRIBUTES_AT..]) != stored_crc {
        return Err(corrupt("CRC-32C mismatch"));
    }
    if h.attributes & (1 << 5) != 0 {
        return Ok(Vec::new());
    }
    let log_append_time = h.attributes & (1 << 3) != 0;
    let mut body =
        decompress(h.attributes & 0x7, batch.slice(HEADER_LEN..)).map_err(|e| corrupt(&e))?;
    let count = usize::try_from(h.record_count).map_err(|_| corrupt("negative record count"))?;
    // A record takes at least 7 bytes: never reserve more than the body could hold.
    let mut out = Vec::with_capacity(count.min(body.len() / 7));
    for _ in 0..count {
        let r = read_record(&mut body).map_err(|e| corrupt(&e))?;
        let offset = h.base_offset.saturating_add(r.offset_delta);
        if offset < from_offset {
            continue;
        }
        out.push(ConsumedRecord {
            partition,
            offset,
            timestamp: if log_append_time {
                h.max_timestamp
            } else {
                h.base_timestamp.saturating_add(r.timestamp_delta)
            },
            log_append_time,
            key: r.key,
            value: r.value,
            headers: r.headers,
        });
    }
    Ok(out)
}

fn decompress(codec: i16, mut data: Bytes) -> std::result::Result<Bytes, String> {
    // The codec's closures return its own error type; `Ok` lets inference name it.
    let result = match codec {
        0 => Plain::decompress(&mut data, |b: &mut Bytes| Ok(b.split_to(b.len()))),
        1 => Gzip::decompress(&mut data, |b: &mut Bytes| Ok(b.split_to(b.len()))),
        2 => Snappy::decompress(&mut data, |b: &mut Bytes| Ok(b.split_to(b.len()))),
        3 => Lz4::decompress(&mut data, |b: &mut Bytes| Ok(b.split_to(b.len()))),
        4 => Zstd::decompress(&mut data, |b: &mut Bytes| Ok(b.split_to(b.len()))),
        other => return Err(format!("unknown compression codec {other}")),
    };
    result.map_err(|e| format!("decompressing: {e}"))
}

/// Writes `records` as one RecordBatch v2 as a non-idempotent producer sends it: base
/// offset 0, no producer id/epoch/sequence (-1), CreateTime. `now_ms` stands in for
/// missing timestamps.
pub(crate) fn write_batch(
    records: &[ProduceRecord],
    codec: Compression,
    now_ms: i64,
) -> Result<Bytes> {
    let too_big = |what: &str| ClientError::InvalidArgument(format!("{what} is too large"));
    let first = records
        .first()
        .ok_or_else(|| ClientError::InvalidArgument("a batch needs a record".into()))?;
    let base_ts = first.timestamp.unwrap_or(now_ms);
    let mut max_ts = base_ts;
    let mut body = BytesMut::new();
    let mut record = BytesMut::new();
    for (i, r) in records.iter().enumerate() {
        let ts = r.timestamp.unwrap_or(now_ms);
        max_ts = max_ts.max(ts);
        record.clear();
        record.put_i8(0);
        put_varint(&mut record, ts.wrapping_sub(base_ts));
        put_varint(&mut record, i64::try_from(i).map_err(|_| too_big("batch"))?);
        put_bytes(&mut record, r.key.as_deref()).ok_or_else(|| too_big("key"))?;
        put_bytes(&mut record, r.value.as_deref()).ok_or_else(|| too_big("value"))?;
        put_varint(&mut record, r.headers.len() as i64);
        for (k, v) in &r.headers {
            put_bytes(&mut record, Some(k.as_bytes())).ok_or_else(|| too_big("header"))?;
            put_bytes(&mut record, v.as_deref()).ok_or_else(|| too_big("header"))?;
        }
        put_varint(&mut body, record.len() as i64);
        body.extend_from_slice(&record);
    }
    let payload = compress(codec, &body).map_err(ClientError::Protocol)?;
    let count = i32::try_from(records.len()).map_err(|_| too_big("batch"))?;
    let batch_length =
        i32::try_from(HEADER_LEN - LOG_OVERHEAD + payload.len()).map_err(|_| too_big("batch"))?;

    let mut out = BytesMut::with_capacity(HEADER_LEN + payload.len());
    out.put_i64(0); // base offset: the broker assigns it
    out.put_i32(batch_length);
    out.put_i32(-1); // partition leader epoch: the broker sets it
    out.put_i8(2); // magic
    out.put_u32(0); // CRC, filled below
    out.put_i16(codec as i16);
    out.put_i32(count - 1); // last offset delta
    out.put_i64(base_ts);
    out.put_i64(max_ts);
    out.put_i64(-1); // producer id
    out.put_i16(-1); // producer epoch
    out.put_i32(-1); // base sequence
    out.put_i32(count);
    out.extend_from_slice(&payload);
    let crc = crc32c::crc32c(&out[ATTRIBUTES_AT..]);
    out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(out.freeze())
}

fn compress(codec: Compression, body: &[u8]) -> std::result::Result<Bytes, String> {
    let mut out = BytesMut::new();
    // The codec's closures return its own error type; `Ok` lets inference name it.
    let fill = |b: &mut BytesMut| {
        b.put_slice(body);
        Ok(())
    };
    let result = match codec {
        Compression::None => return Ok(Bytes::copy_from_slice(body)),
        Compression::Gzip => Gzip::compress(&mut out, fill),
        Compression::Snappy => Snappy::compress(&mut out, fill),
        Compression::Lz4 => Lz4::compress(&mut out, fill),
        Compression::Zstd => Zstd::compress(&mut out, fill),
    };
    result.map_err(|e| format!("compressing with {codec:?}: {e}"))?;
    Ok(out.freeze())
}

/// Zigzag varint, as record fields use.
fn put_varint(out: &mut BytesMut, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.put_u8((z as u8) | 0x80);
        z >>= 7;
    }
    out.put_u8(z as u8);
}

/// Length-prefixed bytes, -1 for null; `None` when longer than an i32 length allows.
fn put_bytes(out: &mut BytesMut, data: Option<&[u8]>) -> Option<()> {
    match data {
        None => put_varint(out, -1),
        Some(d) => {
            put_varint(out, i64::from(i32::try_from(d.len()).ok()?));
            out.put_slice(d);
        }
    }
    Some(())
}

struct RawRecord {
    timestamp_delta: i64,
    offset_delta: i64,
    key: Option<Bytes>,
    value: Option<Bytes>,
    headers: Vec<(String, Option<Bytes>)>,
}

fn read_record(body: &mut Bytes) -> std::result::Result<RawRecord, String> {
    let length = varint(body)?;
    let length = usize::try_from(length).map_err(|_| format!("record length {length}"))?;
    if length > body.len() {
        return Err(format!(
            "record length {length} exceeds the {} bytes left",
            body.len()
        ));
    }
    let mut r = body.split_to(length);
    if !r.has_remaining() {
        return Err("empty record".into());
    }
    let _attributes = r.get_i8();
    let timestamp_delta = varint(&mut r)?;
    let offset_delta = varint(&mut r)?;
    let key = bytes_field(&mut r)?;
    let value = bytes_field(&mut r)?;
    let header_count = varint(&mut r)?;
    let header_count =
        usize::try_from(header_count).map_err(|_| format!("header count {header_count}"))?;
    // A header takes at least 2 bytes.
    let mut headers = Vec::with_capacity(header_count.min(r.len() / 2));
    for _ in 0..header_count {
        let name = bytes_field(&mut r)?.ok_or("null header key")?;
        let name = String::from_utf8(name.to_vec()).map_err(|_| "header key is not UTF-8")?;
        headers.push((name, bytes_field(&mut r)?));
    }
    Ok(RawRecord {
        timestamp_delta,
        offset_delta,
        key,
        value,
        headers,
    })
}

/// A length-prefixed byte string; length -1 is null.
fn bytes_field(r: &mut Bytes) -> std::result::Result<Option<Bytes>, String> {
    let len = varint(r)?;
    if len < 0 {
        return Ok(None);
    }
    let len = usize::try_from(len).map_err(|_| format!("length {len}"))?;
    if len > r.len() {
        return Err(format!(
            "field length {len} exceeds the {} bytes left",
            r.len()
        ));
    }
    Ok(Some(r.split_to(len)))
}

/// A zigzag-encoded variable-length integer (at most 10 bytes).
fn varint(r: &mut Bytes) -> std::result::Result<i64, String> {
    let mut raw: u64 = 0;
    for i in 0..10 {
        if !r.has_remaining() {
            return Err("truncated varint".into());
        }
        let byte = r.get_u8();
        raw |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    Err("varint longer than 10 bytes".into())
}
