//! A produced batch whose CRC is right but whose records are not is refused with the
//! Kafka error a producer expects, and nothing of it reaches the log.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kafka_protocol::error::ResponseError;
use tidelog_records::{assemble_batch, put_varlong, BatchBuilder, BatchFields, Codec};
use tidelog_storage::{CleanupPolicy, Log, LogConfig, StorageError};
use uuid::Uuid;

use super::{Partition, PartitionError};

fn partition(config: LogConfig) -> (tempfile::TempDir, Partition) {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(&dir.path().join("t-0"), config).unwrap();
    (dir, Partition::new("t".into(), Uuid::nil(), 0, 0, log))
}

/// One record with its length prefix: `key_len` and `header_count` are written as
/// given, `pad` bytes follow the fields inside the declared length, and the length is
/// declared `overrun` bytes longer than the record.
struct Raw {
    offset_delta: i64,
    key_len: i64,
    header_count: i64,
    pad: usize,
    overrun: i64,
}

const GOOD: Raw = Raw {
    offset_delta: 0,
    key_len: 1,
    header_count: 0,
    pad: 0,
    overrun: 0,
};

fn encode(r: &Raw) -> Vec<u8> {
    let mut body = vec![0u8]; // attributes
    put_varlong(&mut body, 0); // timestamp delta
    put_varlong(&mut body, r.offset_delta);
    put_varlong(&mut body, r.key_len);
    if r.key_len > 0 {
        body.extend(std::iter::repeat_n(b'k', r.key_len as usize));
    }
    put_varlong(&mut body, 1);
    body.push(b'v');
    put_varlong(&mut body, r.header_count);
    body.extend(std::iter::repeat_n(0u8, r.pad));
    let mut out = Vec::new();
    put_varlong(&mut out, body.len() as i64 + r.overrun);
    out.extend_from_slice(&body);
    out
}

/// A batch declaring `count` records around `records`, with a CRC over them.
fn batch(count: i32, records: &[u8], attributes: i16) -> Vec<u8> {
    let fields = BatchFields {
        base_offset: 0,
        partition_leader_epoch: -1,
        attributes,
        last_offset_delta: count - 1,
        base_timestamp: 1_000,
        max_timestamp: 1_000,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        record_count: count,
    };
    assemble_batch(&fields, records).unwrap()
}

fn two(second: Raw) -> Vec<u8> {
    [encode(&GOOD), encode(&second)].concat()
}

fn refused(p: &Partition, mut bytes: Vec<u8>) -> PartitionError {
    let before = p.offsets().unwrap();
    let size = p.with_log(|log| Ok(log.size_bytes())).unwrap();
    let err = p.append(&mut bytes, 1_000).unwrap_err();
    let after = p.offsets().unwrap();
    assert_eq!(after.high_watermark, before.high_watermark, "{err}");
    assert_eq!(
        p.with_log(|log| Ok(log.log_end_offset())).unwrap(),
        before.high_watermark
    );
    assert_eq!(
        p.with_log(|log| Ok(log.size_bytes())).unwrap(),
        size,
        "{err}"
    );
    err
}

#[test]
fn each_malformed_batch_gets_its_code_and_leaves_the_log_unchanged() {
    let (_dir, p) = partition(LogConfig::default());
    p.append(
        &mut BatchBuilder::new()
            .kv(Some(b"a"), Some(b"1"), 1)
            .build()
            .unwrap(),
        1,
    )
    .unwrap();
    let corrupt = ResponseError::CorruptMessage.code();
    let invalid = ResponseError::InvalidRecord.code();
    let cases: Vec<(&str, Vec<u8>, i16)> = vec![
        (
            "record length past the batch",
            batch(2, &two(Raw { overrun: 9, ..GOOD }), 0),
            corrupt,
        ),
        (
            "key length -2",
            batch(
                2,
                &two(Raw {
                    key_len: -2,
                    ..GOOD
                }),
                0,
            ),
            corrupt,
        ),
        (
            "negative header count",
            batch(
                2,
                &two(Raw {
                    header_count: -1,
                    ..GOOD
                }),
                0,
            ),
            corrupt,
        ),
        (
            "fields not filling the record",
            batch(2, &two(Raw { pad: 3, ..GOOD }), 0),
            corrupt,
        ),
        (
            "fewer records than declared",
            batch(
                3,
                &two(Raw {
                    offset_delta: 1,
                    ..GOOD
                }),
                0,
            ),
            corrupt,
        ),
        (
            "more records than declared",
            batch(
                1,
                &two(Raw {
                    offset_delta: 1,
                    ..GOOD
                }),
                0,
            ),
            corrupt,
        ),
        (
            "offset deltas 0, 5",
            batch(
                2,
                &two(Raw {
                    offset_delta: 5,
                    ..GOOD
                }),
                0,
            ),
            invalid,
        ),
        (
            "control batch from a client",
            BatchBuilder::control_marker(3, 0, true, 0, 1)
                .build()
                .unwrap(),
            invalid,
        ),
    ];
    for (what, bytes, code) in cases {
        let err = refused(&p, bytes);
        assert_eq!(err.code(), code, "{what}: {err}");
    }
    // A good batch and a bad one in one append: neither is written.
    let good = BatchBuilder::new()
        .kv(Some(b"b"), Some(b"2"), 1)
        .build()
        .unwrap();
    let bad = batch(
        2,
        &two(Raw {
            key_len: -5,
            ..GOOD
        }),
        0,
    );
    assert_eq!(refused(&p, [good.clone(), bad].concat()).code(), corrupt);
    // And the partition still takes good batches.
    assert_eq!(p.append(&mut good.clone(), 1).unwrap().base_offset, 1);
}

#[test]
fn compressed_batches_are_checked_inside_and_bounded() {
    let (_dir, p) = partition(LogConfig::default());
    for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
        let records = tidelog_records::compress(
            codec,
            &two(Raw {
                key_len: -2,
                ..GOOD
            }),
        )
        .unwrap();
        let err = refused(&p, batch(2, &records, codec.attribute_bits()));
        assert_eq!(
            err.code(),
            ResponseError::CorruptMessage.code(),
            "{codec:?}: {err}"
        );
    }
    // 1 KiB values of zeros past the 16 MiB bound default max.message.bytes allows.
    let mut bomb = BatchBuilder::new().compression(Codec::Zstd);
    for _ in 0..(17 << 10) {
        bomb = bomb.kv(Some(b"k"), Some(&[0u8; 1024]), 1);
    }
    let bomb = bomb.encode().unwrap();
    assert!(bomb.len() < 1 << 20, "{} bytes on the wire", bomb.len());
    let err = refused(&p, bomb);
    assert!(
        matches!(
            err,
            PartitionError::Storage(StorageError::DecompressedTooLarge { .. })
        ),
        "{err}"
    );
    assert_eq!(err.code(), ResponseError::MessageTooLarge.code());
}

#[test]
fn keyless_records_on_a_compacted_topic_are_named() {
    let config = LogConfig {
        cleanup_policy: CleanupPolicy {
            delete: false,
            compact: true,
        },
        ..LogConfig::default()
    };
    let (_dir, p) = partition(config);
    let mixed = BatchBuilder::new()
        .kv(Some(b"a"), Some(b"1"), 1)
        .kv(None, Some(b"2"), 1)
        .kv(Some(b"c"), Some(b"3"), 1)
        .kv(None, Some(b"4"), 1)
        .build()
        .unwrap();
    let err = refused(&p, mixed);
    assert_eq!(err.code(), ResponseError::InvalidRecord.code());
    let PartitionError::Storage(StorageError::InvalidRecord(refusal)) = err else {
        panic!("not an invalid record: {err}");
    };
    let named: Vec<i32> = refusal
        .record_errors
        .iter()
        .map(|e| e.batch_index)
        .collect();
    assert_eq!(named, vec![1, 3]);
    let keyed = BatchBuilder::new()
        .kv(Some(b"a"), Some(b"1"), 1)
        .build()
        .unwrap();
    assert_eq!(p.append(&mut keyed.clone(), 1).unwrap().base_offset, 0);
}
