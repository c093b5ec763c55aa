//! Batches encoded by a real Kafka client library (the `kafka-protocol` crate's
//! `RecordBatchEncoder`), one per codec: our header view, CRC check, offset assignment,
//! reads and timestamp lookups must agree with it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tidelog_storage::{BatchHeader, Codec, Log, LogConfig};

use common::{decode_records, opts, read_all};

const CODECS: [(Compression, Codec); 5] = [
    (Compression::None, Codec::None),
    (Compression::Gzip, Codec::Gzip),
    (Compression::Snappy, Codec::Snappy),
    (Compression::Lz4, Codec::Lz4),
    (Compression::Zstd, Codec::Zstd),
];

/// 40 records from one idempotent producer; timestamps wander (not monotonic).
fn client_records(producer_id: i64, first_seq: i32) -> Vec<Record> {
    (0..40)
        .map(|i: i64| {
            let mut headers = IndexMap::new();
            headers.insert(
                StrBytes::from_static_str("h"),
                Some(Bytes::from(vec![i as u8; 3])),
            );
            Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id,
                producer_epoch: 0,
                timestamp_type: TimestampType::Creation,
                offset: i,
                sequence: first_seq + i as i32,
                timestamp: 1_000_000 + (i * 37) % 100 * 10,
                key: Some(Bytes::from(format!("key-{i}"))),
                value: (i % 9 != 4).then(|| Bytes::from(format!("value-{i}-").repeat(20))),
                headers,
            }
        })
        .collect()
}

fn encode(records: &[Record], compression: Compression) -> Vec<u8> {
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .unwrap();
    buf.to_vec()
}

#[test]
fn every_codec_is_stored_verbatim_and_decodes_identically() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let mut all_records = Vec::new();
    let mut stored = Vec::new();
    for (n, (compression, codec)) in CODECS.into_iter().enumerate() {
        let records = client_records(77, n as i32 * 40);
        let mut bytes = encode(&records, compression);
        let h = BatchHeader::new(&bytes).unwrap();
        assert_eq!(h.codec(), Some(codec));
        assert_eq!(h.total_size(), Some(bytes.len()));
        assert_eq!((h.record_count(), h.last_offset_delta()), (40, 39));
        assert_eq!(h.base_timestamp(), 1_000_000);
        assert_eq!(
            h.max_timestamp(),
            records.iter().map(|r| r.timestamp).max().unwrap()
        );
        assert_eq!((h.producer_id(), h.base_sequence()), (77, n as i32 * 40));
        assert_eq!(h.crc(), crc32c::crc32c(&bytes[21..]), "{codec:?}");
        let original = bytes.clone();
        let info = log.append(&mut bytes, &opts(0)).unwrap();
        assert_eq!(
            (info.first_offset, info.last_offset),
            (n as i64 * 40, n as i64 * 40 + 39)
        );
        // Only baseOffset and partitionLeaderEpoch (outside the CRC) changed.
        assert_eq!(bytes[16..], original[16..], "{codec:?}");
        stored.push(bytes);
        for (i, r) in records.iter().enumerate() {
            all_records.push((
                n as i64 * 40 + i as i64,
                r.key.as_ref().map(|k| k.to_vec()),
                r.value.as_ref().map(|v| v.to_vec()),
                r.timestamp,
            ));
        }
    }
    let read = read_all(&log, 0);
    assert_eq!(read, stored);
    assert_eq!(decode_records(&read), all_records);
    let state = log.producer_state().get(77).unwrap();
    assert_eq!(state.last_seq(), Some(199));
    assert_eq!(state.batches.len(), 5);

    // offset_for_timestamp agrees with a brute-force search over the decoded records.
    for ts in [
        0, 999_999, 1_000_000, 1_000_005, 1_000_370, 1_000_500, 1_000_990, 1_000_991,
    ] {
        let expected = all_records.iter().find(|r| r.3 >= ts).map(|r| (r.0, r.3));
        assert_eq!(log.offset_for_timestamp(ts).unwrap(), expected, "ts {ts}");
    }
    let max = all_records.iter().map(|r| r.3).max().unwrap();
    let first_max = all_records.iter().find(|r| r.3 == max).unwrap().0;
    assert_eq!(
        log.max_timestamp_and_offset().unwrap(),
        Some((first_max, max))
    );
}

#[test]
fn compressed_batches_survive_compaction_with_the_right_survivors() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        cleanup_policy: tidelog_storage::CleanupPolicy {
            delete: false,
            compact: true,
        },
        segment_bytes: 1,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), cfg).unwrap();
    for (compression, _) in CODECS {
        let mut b = encode(&client_records(-1, -1), compression);
        log.append(&mut b, &opts(0)).unwrap();
    }
    log.append(&mut common::batch(1, 0, "tail", 1), &opts(0))
        .unwrap();
    log.set_high_watermark(log.log_end_offset());
    let stats = log.compact(0).unwrap();
    assert_eq!(stats.horizon, 200);
    let got = decode_records(&read_all(&log, 0));
    // Keys repeat in every batch: only the last codec's batch keeps its records.
    let survivors: Vec<i64> = got.iter().map(|r| r.0).collect();
    let mut expected: Vec<i64> = (160..200).collect();
    expected.push(200);
    assert_eq!(survivors, expected);
}
