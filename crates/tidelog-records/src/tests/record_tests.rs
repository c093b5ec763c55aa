use std::io::Write;

use crate::{
    assemble_batch, batch_control_marker, batch_transaction_marker, check_batch, put_varlong,
    records_block, BatchBuilder, BatchFields, BatchHeader, ControlMarker, RecordIter, RecordSpec,
    BATCH_HEADER_LEN,
};

fn sample() -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for i in 0..50u8 {
        let value = vec![i; 100];
        b = b.kv(Some(&[b'k', i]), Some(&value), 1000 + i64::from(i));
    }
    b.build().unwrap()
}

/// Re-packs `batch` with its records block replaced by `body` and codec bits `codec`.
pub(super) fn with_body(batch: &[u8], body: &[u8], codec: i16) -> Vec<u8> {
    let h = BatchHeader::new(batch).unwrap();
    assemble_batch(
        &BatchFields {
            base_offset: h.base_offset(),
            partition_leader_epoch: h.partition_leader_epoch(),
            attributes: h.attributes() | codec,
            last_offset_delta: h.last_offset_delta(),
            base_timestamp: h.base_timestamp(),
            max_timestamp: h.max_timestamp(),
            producer_id: h.producer_id(),
            producer_epoch: h.producer_epoch(),
            base_sequence: h.base_sequence(),
            record_count: h.record_count(),
        },
        body,
    )
    .unwrap()
}

/// Compressed forms of `plain`'s records written by other encoders than ours.
pub(super) fn compressed_variants(plain: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let body = &plain[BATCH_HEADER_LEN..];
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(body).unwrap();
    let gz = gz.finish().unwrap();
    let raw_snappy = snap::raw::Encoder::new().compress_vec(body).unwrap();
    let mut xerial = vec![
        0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1,
    ];
    for chunk in body.chunks(1000) {
        let c = snap::raw::Encoder::new().compress_vec(chunk).unwrap();
        xerial.extend_from_slice(&(c.len() as u32).to_be_bytes());
        xerial.extend_from_slice(&c);
    }
    let mut lz = lz4::EncoderBuilder::new().build(Vec::new()).unwrap();
    lz.write_all(body).unwrap();
    let (lz, res) = lz.finish();
    res.unwrap();
    let zs = zstd::encode_all(body, 3).unwrap();
    vec![
        ("gzip", with_body(plain, &gz, 1)),
        ("snappy-raw", with_body(plain, &raw_snappy, 2)),
        ("snappy-xerial", with_body(plain, &xerial, 2)),
        ("lz4", with_body(plain, &lz, 3)),
        ("zstd", with_body(plain, &zs, 4)),
    ]
}

#[test]
fn every_codec_decompresses_to_the_original_records() {
    let plain = sample();
    let original = &plain[BATCH_HEADER_LEN..];
    for (name, batch) in compressed_variants(&plain) {
        check_batch(&batch).unwrap();
        assert!(batch.len() < plain.len(), "{name} did not compress");
        let block = records_block(&batch, 1 << 20).unwrap();
        assert_eq!(&block[..], original, "{name}");
        assert!(
            records_block(&batch, original.len() - 1).is_err(),
            "{name} ignored the limit"
        );
        // Exactly at the limit is still fine.
        assert!(records_block(&batch, original.len()).is_ok(), "{name}");
    }
}

#[test]
fn record_iterator_yields_every_field() {
    let b = BatchBuilder::new()
        .kv(Some(b"key"), Some(b"value"), 100)
        .kv(None, None, 90)
        .record(RecordSpec {
            key: Some(b"h".to_vec()),
            value: Some(vec![]),
            timestamp: 150,
            headers: vec![("x".into(), Some(b"y".to_vec())), ("z".into(), None)],
        })
        .build()
        .unwrap();
    let block = records_block(&b, 1 << 20).unwrap();
    let recs: Vec<_> = RecordIter::new(&block, 3).map(Result::unwrap).collect();
    assert_eq!(recs.len(), 3);
    assert_eq!(
        (recs[0].key, recs[0].value),
        (Some(&b"key"[..]), Some(&b"value"[..]))
    );
    assert_eq!(
        (recs[1].key, recs[1].value, recs[1].timestamp_delta),
        (None, None, -10)
    );
    assert_eq!((recs[2].offset_delta, recs[2].timestamp_delta), (2, 50));
    assert_eq!(recs[2].value, Some(&b""[..]));
    let headers: Vec<_> = recs[2].headers().map(|h| (h.key, h.value)).collect();
    assert_eq!(
        headers,
        vec![(&b"x"[..], Some(&b"y"[..])), (&b"z"[..], None)]
    );
    let total: usize = recs.iter().map(|r| r.raw.len()).sum();
    assert_eq!(total, block.len());
    // Claiming more records than present fails instead of reading past the end.
    let mut over = RecordIter::new(&block, 4);
    assert!(over.nth(3).unwrap().is_err());
    // Truncated block.
    assert!(RecordIter::new(&block[..block.len() - 1], 3).any(|r| r.is_err()));
    // Fewer declared than present: the rest shows as trailing bytes.
    let mut under = RecordIter::new(&block, 2);
    assert_eq!(under.by_ref().count(), 2);
    assert_eq!(under.trailing_bytes(), recs[2].raw.len());
}

#[test]
fn repeated_header_keys_are_kept_in_order() {
    let mut b = BatchBuilder::new();
    b.push(
        5,
        None,
        Some(b"v"),
        &[("k", Some("1")), ("other", None), ("k", Some("2"))],
    );
    let batch = b.encode().unwrap();
    let block = records_block(&batch, 1 << 20).unwrap();
    let r = RecordIter::new(&block, 1).next().unwrap().unwrap();
    let headers: Vec<_> = r.headers().map(|h| (h.key, h.value)).collect();
    assert_eq!(
        headers,
        vec![
            (&b"k"[..], Some(&b"1"[..])),
            (&b"other"[..], None),
            (&b"k"[..], Some(&b"2"[..]))
        ]
    );
    assert_eq!(r.header_count(), 3);
}

#[test]
fn varints_round_trip_at_the_edges() {
    for v in [
        0i64,
        1,
        -1,
        63,
        -64,
        64,
        300,
        i64::from(i32::MAX),
        i64::from(i32::MIN),
        i64::MAX,
        i64::MIN,
    ] {
        let mut buf = Vec::new();
        put_varlong(&mut buf, v);
        // Decode through a one-field record: length, attrs, ts delta = v, ...
        let mut rec = vec![0u8];
        rec.extend_from_slice(&buf);
        rec.extend_from_slice(&[0, 1, 1, 0]); // offset delta, null key, null value, 0 headers
        let mut block = Vec::new();
        put_varlong(&mut block, rec.len() as i64);
        block.extend_from_slice(&rec);
        let r = RecordIter::new(&block, 1).next().unwrap().unwrap();
        assert_eq!(r.timestamp_delta, v);
    }
}

#[test]
fn control_marker_type_is_read_from_the_key() {
    let abort = BatchBuilder::control_marker(7, 1, false, 3, 10)
        .build()
        .unwrap();
    let commit = BatchBuilder::control_marker(7, 1, true, 3, 10)
        .build()
        .unwrap();
    assert!(BatchHeader::new(&abort).unwrap().is_control());
    assert_eq!(batch_control_marker(&abort), Some(ControlMarker::Abort));
    assert_eq!(batch_control_marker(&commit), Some(ControlMarker::Commit));
    assert_eq!(batch_control_marker(&sample()), None, "not a control batch");
    assert_eq!(
        batch_transaction_marker(&commit),
        Some((ControlMarker::Commit, Some(3))),
        "the coordinator epoch comes from the value"
    );
}
