//! RecordBatch v2 for the client, through the workspace's codec (`tidelog-records`),
//! whose headers keep repeated keys (Kafka allows them and clients rely on them). The
//! byte layouts are documented there.

use bytes::Bytes;
use kafka_protocol::records::Compression;
use tidelog_records::{check_batch, records_block, BatchBuilder, BatchHeader, Codec, RecordIter};

use crate::error::{ClientError, Result};
use crate::records::{ConsumedRecord, ProduceRecord};

pub(crate) use tidelog_records::BATCH_HEADER_LEN as HEADER_LEN;

/// Most bytes one fetched compressed batch may inflate to: what a broker accepts at most.
const MAX_INFLATED: usize = tidelog_records::INFLATE_CEILING;

fn codec_of(compression: Compression) -> Codec {
    match compression {
        Compression::None => Codec::None,
        Compression::Gzip => Codec::Gzip,
        Compression::Snappy => Codec::Snappy,
        Compression::Lz4 => Codec::Lz4,
        Compression::Zstd => Codec::Zstd,
    }
}

/// Decodes one complete batch (`batch.len() >= HEADER_LEN`, length already checked by the
/// caller) into data records at or after `from_offset`. Control batches yield no records;
/// their producer id comes back instead (a read_committed consumer needs to know where an
/// aborted transaction ends).
pub(crate) fn read_batch(
    batch: Bytes,
    partition: i32,
    from_offset: i64,
) -> Result<(Vec<ConsumedRecord>, Option<i64>)> {
    let h = BatchHeader::new(&batch).map_err(|e| ClientError::Protocol(e.to_string()))?;
    let corrupt =
        |what: &str| ClientError::Protocol(format!("batch at offset {}: {what}", h.base_offset()));
    check_batch(&batch).map_err(|e| corrupt(&e.to_string()))?;
    if h.is_control() {
        return Ok((Vec::new(), Some(h.producer_id())));
    }
    let block = match h.codec() {
        Some(Codec::None) => batch.slice(HEADER_LEN..),
        _ => Bytes::from(
            records_block(&batch, MAX_INFLATED)
                .map_err(|e| corrupt(&e.to_string()))?
                .into_owned(),
        ),
    };
    let count = usize::try_from(h.record_count()).map_err(|_| corrupt("negative record count"))?;
    // A record takes at least 7 bytes: never reserve more than the block could hold.
    let mut out = Vec::with_capacity(count.min(block.len() / 7));
    for record in RecordIter::new(&block, h.record_count()) {
        let r = record.map_err(|e| corrupt(&e.to_string()))?;
        let offset = h.base_offset().saturating_add(i64::from(r.offset_delta));
        if offset < from_offset {
            continue;
        }
        let mut headers = Vec::with_capacity(r.header_count());
        for header in r.headers() {
            let name = std::str::from_utf8(header.key)
                .map_err(|_| corrupt("header key is not UTF-8"))?
                .to_owned();
            headers.push((name, header.value.map(|v| block.slice_ref(v))));
        }
        out.push(ConsumedRecord {
            partition,
            offset,
            timestamp: h.record_timestamp(r.timestamp_delta),
            log_append_time: h.is_log_append_time(),
            key: r.key.map(|k| block.slice_ref(k)),
            value: r.value.map(|v| block.slice_ref(v)),
            headers,
            producer_id: h.producer_id(),
        });
    }
    Ok((out, None))
}

/// Writes `records` as one RecordBatch v2: base offset 0, CreateTime, and either no
/// producer (-1s, as a non-idempotent producer sends it) or `(producer id, epoch, base
/// sequence)` of an idempotent one, marked transactional for a transactional producer. `now_ms` stands in for missing timestamps.
pub(crate) fn write_batch(
    records: &[ProduceRecord],
    codec: Compression,
    now_ms: i64,
    producer: Option<(i64, i16, i32)>,
    transactional: bool,
) -> Result<Bytes> {
    let mut builder = BatchBuilder::new()
        .compression(codec_of(codec))
        .transactional(transactional && producer.is_some());
    if let Some((id, epoch, sequence)) = producer {
        builder = builder.producer(id, epoch, sequence);
    }
    for r in records {
        builder.push(
            r.timestamp.unwrap_or(now_ms),
            r.key.as_deref(),
            r.value.as_deref(),
            &r.headers,
        );
    }
    builder
        .encode()
        .map(Bytes::from)
        .map_err(|e| ClientError::InvalidArgument(e.to_string()))
}
