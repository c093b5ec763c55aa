//! Record batches with valid CRCs but hostile contents (mutated fields, overflowing
//! deltas, lying lengths) decode to an error or to records, never to a panic.

#![allow(clippy::unwrap_used)] // the seed batch is built from fixed inputs

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use proptest::prelude::*;

fn seed_batch(compression: Compression) -> Vec<u8> {
    let records: Vec<Record> = (0..3)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: i as i32,
            timestamp: 1_700_000_000_000 + i,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("value {i}"))),
            headers: [(
                kafka_protocol::protocol::StrBytes::from_static_str("h"),
                Some(Bytes::from_static(b"v")),
            )]
            .into_iter()
            .collect(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options).unwrap();
    buf.to_vec()
}

/// Recomputes the batch CRC-32C (over attributes..end) so mutations get past the check.
fn fix_crc(batch: &mut [u8]) {
    if batch.len() >= 21 {
        let crc = crc32c::crc32c(&batch[21..]);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
    }
}

fn codec() -> impl Strategy<Value = Compression> {
    prop_oneof![
        Just(Compression::None),
        Just(Compression::Gzip),
        Just(Compression::Snappy),
        Just(Compression::Lz4),
        Just(Compression::Zstd),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_batches_never_panic(
        compression in codec(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let mut batch = seed_batch(compression);
        // Keep the magic byte (offset 16) so decoding gets past the version check.
        for (at, value) in edits {
            let i = at.index(batch.len());
            if i != 16 && !(17..21).contains(&i) {
                batch[i] = value;
            }
        }
        if let Some(cut) = cut {
            let keep = cut.index(batch.len());
            batch.truncate(keep.max(21));
        }
        fix_crc(&mut batch);
        let _ = RecordBatchDecoder::decode_all(&mut Bytes::from(batch));
    }
}

#[test]
fn overflowing_timestamp_and_offset_deltas_do_not_panic() {
    let mut batch = seed_batch(Compression::None);
    // base offset and first timestamp at their maximum: any positive delta overflows.
    batch[0..8].copy_from_slice(&i64::MAX.to_be_bytes());
    batch[27..35].copy_from_slice(&i64::MAX.to_be_bytes());
    fix_crc(&mut batch);
    let sets = RecordBatchDecoder::decode_all(&mut Bytes::from(batch)).unwrap();
    // Wrapped like Kafka's Java decoder: record 1 is at offset MIN, timestamp MIN.
    assert_eq!(sets[0].records[1].offset, i64::MIN);
    assert_eq!(sets[0].records[1].timestamp, i64::MIN);
}
