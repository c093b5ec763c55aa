//! One test per way a produced batch can be wrong, and the error it must get.

use super::record_tests::{compressed_variants, with_body};
use crate::{
    compress, put_varlong, validate, BatchBuilder, BatchHeader, Codec, RecordError, RecordsError,
    Rules, TimestampWindow, BATCH_HEADER_LEN,
};

const CLIENT: Rules = Rules {
    from_client: true,
    require_keys: false,
    max_inflated_bytes: 1 << 20,
    timestamps: None,
};
const COMPACTED: Rules = Rules {
    require_keys: true,
    ..CLIENT
};

/// A record's body (after its length) from raw parts; `key_len` / `value_len` are
/// written as given, so they can lie.
fn body(offset_delta: i64, key_len: i64, key: &[u8], value_len: i64, value: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8]; // attributes
    put_varlong(&mut b, 0); // timestamp delta
    put_varlong(&mut b, offset_delta);
    put_varlong(&mut b, key_len);
    b.extend_from_slice(key);
    put_varlong(&mut b, value_len);
    b.extend_from_slice(value);
    b
}

/// A well-formed record body with no headers.
fn good(offset_delta: i64) -> Vec<u8> {
    let mut b = body(offset_delta, 1, b"k", 1, b"v");
    put_varlong(&mut b, 0);
    b
}

/// `body` with its length prefix (declared as `body.len() + extra`).
fn framed(body: &[u8], extra: i64) -> Vec<u8> {
    let mut out = Vec::new();
    put_varlong(&mut out, body.len() as i64 + extra);
    out.extend_from_slice(body);
    out
}

/// A batch of `count` declared records (lastOffsetDelta `count - 1`) around `records`,
/// CRC computed over the (malformed) contents as a buggy client would.
fn batch_of(count: i32, records: &[u8], codec: Codec) -> Vec<u8> {
    let mut template = BatchBuilder::new();
    for i in 0..count.max(1) {
        template.push::<&[u8], &[u8]>(0, Some(b"k"), Some(format!("{i}").as_bytes()), &[]);
    }
    let template = template.encode().unwrap();
    let mut batch = with_body(
        &template,
        &compress(codec, records).unwrap(),
        codec.attribute_bits(),
    );
    if count != template_count(&template) {
        set_count(&mut batch, count);
    }
    batch
}

fn template_count(batch: &[u8]) -> i32 {
    BatchHeader::new(batch).unwrap().record_count()
}

/// Rewrites recordCount and lastOffsetDelta and fixes the CRC.
fn set_count(batch: &mut [u8], count: i32) {
    batch[57..61].copy_from_slice(&count.to_be_bytes());
    batch[23..27].copy_from_slice(&(count - 1).to_be_bytes());
    crate::BatchHeaderMut::new(batch).unwrap().refresh_crc();
}

fn assert_corrupt(batch: &[u8], rules: &Rules, what: &str) {
    match validate(batch, rules) {
        Err(RecordsError::Corrupt(why)) => eprintln!("{what}: {why}"),
        other => panic!("{what}: expected CORRUPT_MESSAGE, got {other:?}"),
    }
}

fn assert_invalid(batch: &[u8], rules: &Rules, what: &str) -> Vec<RecordError> {
    match validate(batch, rules) {
        Err(RecordsError::Invalid {
            message,
            record_errors,
        }) => {
            eprintln!("{what}: {message}");
            record_errors
        }
        other => panic!("{what}: expected INVALID_RECORD, got {other:?}"),
    }
}

#[test]
fn well_formed_batches_of_every_codec_pass() {
    for codec in Codec::ALL {
        let mut b = BatchBuilder::new().compression(codec).producer(3, 0, 0);
        b.push(1, Some(b"k"), None, &[("h", Some("x")), ("h", None)]);
        b.push(2, Some(b""), Some(b"value"), &[] as &[(&str, Option<&str>)]);
        let batch = b.encode().unwrap();
        assert_eq!(validate(&batch, &COMPACTED), Ok(batch.len()), "{codec:?}");
    }
    let hand = super::header_tests::hand_built();
    assert_eq!(validate(&hand, &CLIENT), Ok(70));
}

#[test]
fn other_encoders_compressed_batches_pass() {
    let mut b = BatchBuilder::new();
    for i in 0..20u8 {
        b = b.kv(Some(&[i]), Some(&[i; 50]), 5);
    }
    let plain = b.build().unwrap();
    for (name, batch) in compressed_variants(&plain) {
        assert!(validate(&batch, &CLIENT).is_ok(), "{name}");
    }
}

#[test]
fn record_length_running_past_the_batch_is_corrupt() {
    for codec in Codec::ALL {
        let records = [framed(&good(0), 0), framed(&good(1), 40)].concat();
        assert_corrupt(&batch_of(2, &records, codec), &CLIENT, "length past end");
    }
    let negative = [framed(&good(0), -(good(0).len() as i64) - 3)].concat();
    assert_corrupt(
        &batch_of(1, &negative, Codec::None),
        &CLIENT,
        "negative length",
    );
}

#[test]
fn key_or_value_length_below_minus_one_is_corrupt() {
    for codec in Codec::ALL {
        let mut key = body(0, -2, b"", 1, b"v");
        put_varlong(&mut key, 0);
        assert_corrupt(&batch_of(1, &framed(&key, 0), codec), &CLIENT, "key -2");
        let mut value = body(0, 1, b"k", -7, b"");
        put_varlong(&mut value, 0);
        assert_corrupt(&batch_of(1, &framed(&value, 0), codec), &CLIENT, "value -7");
    }
    // Longer than the record (though not the batch).
    let mut long = body(0, 30, b"k", 1, b"v");
    put_varlong(&mut long, 0);
    let records = [framed(&long, 0), framed(&good(1), 0)].concat();
    assert_corrupt(
        &batch_of(2, &records, Codec::None),
        &CLIENT,
        "key past record",
    );
}

#[test]
fn bad_header_counts_and_null_header_keys_are_corrupt() {
    for codec in Codec::ALL {
        let mut negative = body(0, 1, b"k", 1, b"v");
        put_varlong(&mut negative, -1);
        assert_corrupt(
            &batch_of(1, &framed(&negative, 0), codec),
            &CLIENT,
            "count -1",
        );
        let mut huge = body(0, 1, b"k", 1, b"v");
        put_varlong(&mut huge, i64::from(i32::MAX));
        assert_corrupt(
            &batch_of(1, &framed(&huge, 0), codec),
            &CLIENT,
            "count 2^31-1",
        );
        let mut null_key = body(0, 1, b"k", 1, b"v");
        put_varlong(&mut null_key, 1);
        put_varlong(&mut null_key, -1);
        put_varlong(&mut null_key, -1);
        assert_corrupt(
            &batch_of(1, &framed(&null_key, 0), codec),
            &CLIENT,
            "null header key",
        );
    }
}

#[test]
fn fields_not_filling_the_record_are_corrupt() {
    for codec in Codec::ALL {
        let mut padded = good(0);
        padded.extend_from_slice(&[0, 0]);
        let records = [framed(&padded, 0), framed(&good(1), 0)].concat();
        assert_corrupt(&batch_of(2, &records, codec), &CLIENT, "padding in record");
    }
}

#[test]
fn record_count_not_matching_the_records_is_corrupt() {
    for codec in Codec::ALL {
        let two = [framed(&good(0), 0), framed(&good(1), 0)].concat();
        assert_corrupt(
            &batch_of(3, &two, codec),
            &CLIENT,
            "fewer records than declared",
        );
        assert_corrupt(
            &batch_of(1, &two, codec),
            &CLIENT,
            "more records than declared",
        );
    }
}

#[test]
fn header_fields_a_producer_never_writes_are_invalid() {
    let two = [framed(&good(0), 0), framed(&good(1), 0)].concat();
    let mut count = batch_of(2, &two, Codec::None);
    count[23..27].copy_from_slice(&5i32.to_be_bytes()); // lastOffsetDelta 5, count 2
    crate::BatchHeaderMut::new(&mut count)
        .unwrap()
        .refresh_crc();
    assert!(assert_invalid(&count, &CLIENT, "count vs lastOffsetDelta").is_empty());

    let mut zero = batch_of(2, &two, Codec::None);
    zero[57..61].copy_from_slice(&0i32.to_be_bytes());
    crate::BatchHeaderMut::new(&mut zero).unwrap().refresh_crc();
    assert_invalid(&zero, &CLIENT, "record count 0");

    // The broker's own transactional offset commits carry no sequence (see the module).
    let no_sequence = BatchBuilder::new()
        .producer(9, 0, -1)
        .transactional(true)
        .kv(Some(b"k"), Some(b"v"), 0)
        .build()
        .unwrap();
    assert!(validate(&no_sequence, &CLIENT).is_ok());

    let marker = BatchBuilder::control_marker(9, 0, true, 0, 0)
        .build()
        .unwrap();
    assert_invalid(&marker, &CLIENT, "control batch from a client");
    let broker = Rules {
        from_client: false,
        ..COMPACTED
    };
    assert!(
        validate(&marker, &broker).is_ok(),
        "the broker writes markers"
    );
}

#[test]
fn offset_deltas_out_of_sequence_are_invalid() {
    for codec in Codec::ALL {
        let skipped = [framed(&good(0), 0), framed(&good(2), 0)].concat();
        let errors = assert_invalid(&batch_of(2, &skipped, codec), &CLIENT, "deltas 0, 2");
        assert_eq!(
            errors.iter().map(|e| e.batch_index).collect::<Vec<_>>(),
            vec![1]
        );
        let swapped = [framed(&good(1), 0), framed(&good(0), 0)].concat();
        assert_invalid(&batch_of(2, &swapped, codec), &CLIENT, "deltas 1, 0");
    }
}

#[test]
fn keyless_records_on_a_compacted_topic_are_named() {
    for codec in Codec::ALL {
        let mut b = BatchBuilder::new().compression(codec);
        for i in 0..5u8 {
            let key = [i];
            b = b.kv((i % 2 == 0).then_some(&key[..]), Some(b"v"), 0);
        }
        let batch = b.encode().unwrap();
        let errors = assert_invalid(&batch, &COMPACTED, "keyless");
        assert_eq!(
            errors.iter().map(|e| e.batch_index).collect::<Vec<_>>(),
            vec![1, 3]
        );
        assert!(
            validate(&batch, &CLIENT).is_ok(),
            "keys are optional elsewhere"
        );
    }
}

#[test]
fn create_time_records_outside_the_window_are_named_with_invalid_timestamp() {
    let window = TimestampWindow::around(10_000, 1_000, 500);
    assert_eq!(
        window,
        Some(TimestampWindow {
            earliest: 9_000,
            latest: 10_500
        })
    );
    assert_eq!(TimestampWindow::around(10_000, i64::MAX, i64::MAX), None);
    let rules = Rules {
        timestamps: window,
        ..CLIENT
    };
    for codec in Codec::ALL {
        let batch = BatchBuilder::new()
            .compression(codec)
            .kv(Some(b"a"), Some(b"v"), 9_000)
            .kv(Some(b"b"), Some(b"v"), 8_999)
            .kv(Some(b"c"), Some(b"v"), 10_500)
            .kv(Some(b"d"), Some(b"v"), 10_501)
            .encode()
            .unwrap();
        match validate(&batch, &rules) {
            Err(RecordsError::InvalidTimestamp { record_errors, .. }) => assert_eq!(
                record_errors
                    .iter()
                    .map(|e| e.batch_index)
                    .collect::<Vec<_>>(),
                vec![1, 3],
                "{codec:?}"
            ),
            other => panic!("{codec:?}: {other:?}"),
        }
        let inside = BatchBuilder::new()
            .compression(codec)
            .kv(Some(b"a"), Some(b"v"), 9_500)
            .encode()
            .unwrap();
        assert!(validate(&inside, &rules).is_ok(), "{codec:?}");
    }
}

#[test]
fn records_inflating_past_the_bound_are_refused() {
    let rules = Rules {
        max_inflated_bytes: 64 << 10,
        ..CLIENT
    };
    for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
        let mut b = BatchBuilder::new().compression(codec);
        for _ in 0..100 {
            b = b.kv(Some(b"k"), Some(&[0u8; 1000]), 0);
        }
        let batch = b.encode().unwrap();
        assert!(
            batch.len() < 64 << 10,
            "{codec:?} should compress zeros well"
        );
        assert_eq!(
            validate(&batch, &rules),
            Err(RecordsError::InflatedTooLarge { limit: 64 << 10 }),
            "{codec:?}"
        );
        assert!(validate(&batch, &CLIENT).is_ok(), "{codec:?} within 1 MiB");
    }
    // One record declaring more than the bound is refused before anything is allocated.
    let mut huge = Vec::new();
    put_varlong(&mut huge, 1 << 40);
    let batch = batch_of(1, &huge, Codec::Zstd);
    assert!(matches!(
        validate(&batch, &rules),
        Err(RecordsError::Corrupt(_) | RecordsError::InflatedTooLarge { .. })
    ));
}

#[test]
fn undecompressible_data_is_corrupt() {
    let plain = BatchBuilder::new()
        .kv(Some(b"k"), Some(b"v"), 0)
        .build()
        .unwrap();
    for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
        let garbage = with_body(&plain, &[0xAB; 40], codec.attribute_bits());
        assert_corrupt(&garbage, &CLIENT, &format!("{codec:?} garbage"));
    }
}

#[test]
fn a_negative_record_count_is_corrupt_from_anyone() {
    let mut batch = batch_of(1, &framed(&good(0), 0), Codec::None);
    set_count(&mut batch, -1);
    let replica = Rules {
        from_client: false,
        ..CLIENT
    };
    assert_corrupt(&batch, &replica, "record count -1 from a replica");
    // Count 0 with no records is what compaction can leave behind: a replica may send it.
    set_count(&mut batch, 0);
    batch[23..27].copy_from_slice(&0i32.to_be_bytes()); // lastOffsetDelta kept
    validate(&with_body(&batch, &[], 0), &replica).unwrap();
}

#[test]
fn bytes_after_the_gzip_stream_are_corrupt() {
    let records = framed(&good(0), 0);
    let mut gzip = compress(Codec::Gzip, &records).unwrap();
    let plain = batch_of(1, &records, Codec::None);
    validate(
        &with_body(&plain, &gzip, Codec::Gzip.attribute_bits()),
        &CLIENT,
    )
    .unwrap();
    gzip.extend_from_slice(b"trailing");
    let padded = with_body(&plain, &gzip, Codec::Gzip.attribute_bits());
    assert_corrupt(&padded, &CLIENT, "bytes after the gzip member");
}

#[test]
fn xerial_snappy_is_read_as_snappy_java_reads_it() {
    let records = framed(&good(0), 0);
    let mut xerial = compress(Codec::Snappy, &records).unwrap();
    assert_eq!(
        &xerial[..8],
        b"\x82SNAPPY\0",
        "the encoder writes xerial framing"
    );
    let plain = batch_of(1, &records, Codec::None);
    // A minimum compatible version other than 1 is ignored, as snappy-java ignores it.
    xerial[12..16].copy_from_slice(&7i32.to_be_bytes());
    let odd_compat = with_body(&plain, &xerial, Codec::Snappy.attribute_bits());
    validate(&odd_compat, &CLIENT).unwrap();
    // A format version below 1 is refused, as snappy-java refuses it.
    xerial[8..12].copy_from_slice(&0i32.to_be_bytes());
    let old = with_body(&plain, &xerial, Codec::Snappy.attribute_bits());
    assert_corrupt(&old, &CLIENT, "xerial version 0");
}

#[test]
fn every_truncation_and_byte_flip_of_the_records_is_refused_or_harmless() {
    let mut b = BatchBuilder::new();
    b.push(1, Some(b"key"), Some(b"value"), &[("h", Some("1"))]);
    b.push(2, None, Some(b"v2"), &[("h", Some("2"))]);
    let batch = b.encode().unwrap();
    let body = &batch[BATCH_HEADER_LEN..];
    for cut in 0..body.len() {
        let short = with_body(&batch, &body[..cut], 0);
        assert!(validate(&short, &CLIENT).is_err(), "cut at {cut} accepted");
    }
    for at in 0..body.len() {
        let mut flipped = body.to_vec();
        flipped[at] ^= 0x80;
        // Never a panic; a flip either breaks the structure or changes a field's value.
        let _ = validate(&with_body(&batch, &flipped, 0), &CLIENT);
    }
}
