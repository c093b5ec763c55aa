//! Decompression of record batches is capped: a few bytes of a hostile batch must not
//! expand into unbounded memory, and honest batches within the cap decode byte for byte.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns build fixed inputs

mod support;

use bytes::{Bytes, BytesMut};
use kafka_protocol::compression::{Decompressor, Snappy, Zstd, MAX_DECOMPRESSED_BYTES};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use support::largest_allocation;

const MIB: usize = 1024 * 1024;

fn records(count: usize, value_len: usize) -> Vec<Record> {
    (0..count)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // offset - sequence must be constant for the encoder to keep one batch
            sequence: i as i32,
            timestamp: 1_700_000_000_000 + i as i64,
            key: Some(Bytes::from(format!("key-{i}"))),
            value: Some(Bytes::from(vec![b'a' + (i % 26) as u8; value_len])),
            headers: Default::default(),
        })
        .collect()
}

fn batch(compression: Compression, recs: &[Record]) -> Bytes {
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, recs.iter(), &options).unwrap();
    buf.freeze()
}

#[test]
fn every_codec_is_capped_and_round_trips_under_the_cap() {
    // 2 MiB of highly compressible values per batch.
    let recs = records(32, 64 * 1024);
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let bytes = batch(codec, &recs);
        assert!(bytes.len() < MIB, "{codec:?} did not compress");
        let refused = RecordBatchDecoder::decode_all_with_limit(&mut bytes.clone(), MIB);
        assert!(refused.is_err(), "{codec:?}: 2 MiB passed a 1 MiB cap");
        let sets = RecordBatchDecoder::decode_all_with_limit(&mut bytes.clone(), 4 * MIB).unwrap();
        assert_eq!(sets.len(), 1);
        assert_eq!(sets[0].compression, codec);
        assert_eq!(sets[0].records, recs, "{codec:?} changed the records");
    }
}

#[test]
fn the_cap_is_shared_by_all_batches_of_one_call() {
    // Three batches of ~1.1 MiB each decompressed: each fits 2 MiB, together they do not.
    let recs = records(18, 64 * 1024);
    let one = batch(Compression::Zstd, &recs);
    let mut three = BytesMut::new();
    for _ in 0..3 {
        three.extend_from_slice(&one);
    }
    let three = three.freeze();
    assert!(RecordBatchDecoder::decode_all_with_limit(&mut one.clone(), 2 * MIB).is_ok());
    assert!(RecordBatchDecoder::decode_all_with_limit(&mut three.clone(), 2 * MIB).is_err());
    assert_eq!(
        RecordBatchDecoder::decode_all_with_limit(&mut three.clone(), 8 * MIB)
            .unwrap()
            .len(),
        3
    );
}

/// A zstd frame of `blocks` RLE blocks of 128 KiB zeros each: ~4 bytes per 128 KiB.
fn zstd_rle_bomb(blocks: usize) -> Bytes {
    let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd]; // magic
    frame.push(0x00); // no checksum, no content size, not single segment
    frame.push(0x38); // window log 17 (128 KiB)
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        let header = (128 * 1024u32) << 3 | 1 << 1 | last; // RLE block
        frame.extend_from_slice(&header.to_le_bytes()[..3]);
        frame.push(0x00);
    }
    Bytes::from(frame)
}

#[test]
fn zstd_bomb_stops_at_the_limit() {
    // 64 MiB from ~2 KB of input, limit 1 MiB.
    let mut bomb = zstd_rle_bomb(512);
    let (result, largest) = largest_allocation(|| {
        Zstd::decompress_limited(&mut bomb, MIB, |b: &mut Bytes| Ok(b.len()))
    });
    assert!(result.is_err());
    assert!(largest <= 2 * MIB + 256 * 1024, "allocated {largest} bytes");
    // and the same frame within a generous limit really is 64 MiB, so the cap did the work
    let mut bomb = zstd_rle_bomb(512);
    let n = Zstd::decompress_limited(&mut bomb, 65 * MIB, |b: &mut Bytes| Ok(b.len())).unwrap();
    assert_eq!(n, 64 * MIB);
}

#[test]
fn zstd_bomb_hits_the_default_cap() {
    // 129 MiB of zeros through the default entry point.
    let mut bomb = zstd_rle_bomb(129 * 8);
    let result = Zstd::decompress(&mut bomb, |b: &mut Bytes| Ok(b.len()));
    assert!(result.is_err());
    assert_eq!(MAX_DECOMPRESSED_BYTES, 128 * MIB);
}

#[test]
fn snappy_declared_length_is_checked_before_allocating() {
    // Raw snappy whose header varint declares 4 GiB - 1, followed by a little junk.
    let mut raw = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 0x01, 0x02]);
    let (result, largest) =
        largest_allocation(|| Snappy::decompress(&mut raw, |b: &mut Bytes| Ok(b.len())));
    assert!(result.is_err());
    assert!(largest < 64 * 1024, "allocated {largest} bytes");
}
