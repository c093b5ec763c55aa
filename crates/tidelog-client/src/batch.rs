//! Reading the records of one fetched RecordBatch v2 without the codec's record decoder,
//! which folds repeated header keys into one; Kafka allows repeats and clients rely on them.
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

use bytes::{Buf, Bytes};
use kafka_protocol::compression::{Decompressor, Gzip, Lz4, None as Plain, Snappy, Zstd};

use crate::error::{ClientError, Result};
use crate::records::ConsumedRecord;

pub(crate) const HEADER_LEN: usize = 61;
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
