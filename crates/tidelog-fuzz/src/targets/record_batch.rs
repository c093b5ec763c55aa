//! Produce validation. The first input byte picks the rules (from a client or a
//! replica, compacted or not) and whether the batch's CRC is first recomputed over
//! whatever the records are (how a hostile or broken producer gets malformed records
//! past the CRC, and how the fuzzer gets past it to the records); the rest is the batch. A batch the validator accepts
//! must be readable in full by every reader that will meet it: kafka-protocol's decoder
//! (what Rust clients use) and tidelog's own log reader (what the coordinators and the
//! cleaner use), each finding exactly `recordCount` records at the offsets the header
//! gives. A batch accepted but unreadable is the bug that stalls a consumer forever.

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;
use tidelog_records::{
    compute_crc, records_block, validate, BatchHeader, Codec, LogRecords, RecordIter, Rules,
};

/// Decompressed bound for the fuzzed batches (small: the fuzzer must run fast).
const MAX_INFLATED: usize = 1 << 20;

pub(super) fn run(data: &[u8]) {
    let Some((&flags, batch)) = data.split_first() else {
        return;
    };
    let mut batch = batch.to_vec();
    if flags & 4 != 0 {
        reseal(&mut batch);
    }
    let batch = &batch[..];
    let rules = Rules {
        from_client: flags & 1 != 0,
        require_keys: flags & 2 != 0,
        max_inflated_bytes: MAX_INFLATED,
        timestamps: None,
    };
    let Ok(size) = validate(batch, &rules) else {
        return;
    };
    let batch = &batch[..size];
    let Ok(header) = BatchHeader::new(batch) else {
        panic!("validated batch has no readable header");
    };
    let count = usize::try_from(header.record_count()).unwrap_or(0);
    let base = header.base_offset();

    // An empty compressed batch: Kafka's readers see count 0 and decompress nothing;
    // kafka-protocol insists on a compressed stream. Kafka itself writes empty batches
    // uncompressed, and a producer's batch cannot be empty (checked above for clients).
    let empty_compressed = count == 0 && header.codec() != Some(Codec::None);
    if !empty_compressed
        && !odd_xerial_header(&header, batch)
        && header_keys_are_utf8(&header, batch)
    {
        let mut buf = Bytes::copy_from_slice(batch);
        let sets = RecordBatchDecoder::decode_all_with_limit(&mut buf, MAX_INFLATED)
            .unwrap_or_else(|e| panic!("validated batch does not decode with kafka-protocol: {e}"));
        let decoded: usize = sets.iter().map(|s| s.records.len()).sum();
        assert_eq!(decoded, count, "kafka-protocol found another record count");
    }

    let ours: Vec<_> = LogRecords::new(Bytes::copy_from_slice(batch))
        .with_inflate_limit(MAX_INFLATED)
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("validated batch does not read back: {e}"));
    assert_eq!(
        ours.len(),
        count,
        "the log reader found another record count"
    );
    if rules.from_client {
        // A producer's offset deltas are 0..n-1, so the offsets are exactly these.
        let offsets: Vec<i64> = ours.iter().map(|r| r.offset).collect();
        let expected: Vec<i64> = (0..count as i64).map(|d| base.wrapping_add(d)).collect();
        assert_eq!(offsets, expected, "record offsets of a client batch");
    }
}

/// A snappy batch whose xerial header has the magic but versions other than 1 and 1:
/// snappy-java (Kafka's broker and Java clients) and librdkafka read it as xerial
/// chunks, as tidelog does, while kafka-protocol reads only the exact standard header
/// as xerial and fails on the rest. No encoder writes such a header.
fn odd_xerial_header(header: &BatchHeader<'_>, batch: &[u8]) -> bool {
    const STANDARD: &[u8; 16] = b"\x82SNAPPY\0\0\0\0\x01\0\0\0\x01";
    let body = batch
        .get(tidelog_records::BATCH_HEADER_LEN..)
        .unwrap_or_default();
    header.codec() == Some(Codec::Snappy)
        && body.len() >= STANDARD.len()
        && body[..8] == STANDARD[..8]
        && body[..16] != STANDARD[..]
}

/// Whether every record header key is UTF-8. Kafka stores keys that are not (its broker
/// does not check; the Java client reads them with replacement characters, librdkafka as
/// bytes), so tidelog accepts them too, but kafka-protocol refuses to decode them.
fn header_keys_are_utf8(header: &BatchHeader<'_>, batch: &[u8]) -> bool {
    let Ok(block) = records_block(batch, MAX_INFLATED) else {
        return true;
    };
    RecordIter::new(&block, header.record_count())
        .all(|record| record.is_ok_and(|r| r.headers().all(|h| std::str::from_utf8(h.key).is_ok())))
}

/// Writes the CRC-32C of the batch's bytes after the CRC field (as far as its
/// batchLength says, or the input ends) into the CRC field.
fn reseal(batch: &mut [u8]) {
    /// Offsets in the v2 batch header.
    const LENGTH_AT: usize = 8;
    const CRC_AT: usize = 17;
    let Some(length) = batch.get(LENGTH_AT..LENGTH_AT + 4) else {
        return;
    };
    let length = i32::from_be_bytes([length[0], length[1], length[2], length[3]]);
    let end = usize::try_from(length)
        .ok()
        .and_then(|l| l.checked_add(12))
        .map_or(batch.len(), |e| e.min(batch.len()));
    if end <= CRC_AT + 4 {
        return;
    }
    let crc = compute_crc(&batch[..end]);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}
