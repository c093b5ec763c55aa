use super::reference_crc32c;
use crate::BATCH_HEADER_LEN;
use crate::{check_batch, BatchBuilder, BatchHeader, BatchHeaderMut, Codec, RecordsError};

/// A batch assembled byte by byte: one record, key "k", value "v", offset delta 0.
pub(super) fn hand_built() -> Vec<u8> {
    let record: [u8; 9] = [
        0x10, // length 8 (zig-zag)
        0x00, // attributes
        0x00, // timestamp delta 0
        0x00, // offset delta 0
        0x02, b'k', // key length 1
        0x02, b'v', // value length 1
        0x00, // no headers
    ];
    let mut b = Vec::new();
    b.extend_from_slice(&0i64.to_be_bytes()); // base offset
    b.extend_from_slice(&((BATCH_HEADER_LEN - 12 + record.len()) as i32).to_be_bytes());
    b.extend_from_slice(&7i32.to_be_bytes()); // leader epoch
    b.push(2); // magic
    b.extend_from_slice(&[0; 4]); // crc placeholder
    b.extend_from_slice(&0i16.to_be_bytes()); // attributes
    b.extend_from_slice(&0i32.to_be_bytes()); // last offset delta
    b.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
    b.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
    b.extend_from_slice(&42i64.to_be_bytes()); // producer id
    b.extend_from_slice(&1i16.to_be_bytes()); // producer epoch
    b.extend_from_slice(&9i32.to_be_bytes()); // base sequence
    b.extend_from_slice(&1i32.to_be_bytes()); // record count
    b.extend_from_slice(&record);
    let crc = reference_crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

#[test]
fn reference_crc_matches_the_standard_check_value_and_the_crate() {
    assert_eq!(reference_crc32c(b"123456789"), 0xE306_9283);
    assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
}

#[test]
fn header_view_reads_every_field_of_a_hand_built_batch() {
    let b = hand_built();
    assert_eq!(b.len(), 70);
    let h = BatchHeader::new(&b).unwrap();
    assert_eq!(h.base_offset(), 0);
    assert_eq!(h.batch_length(), 58);
    assert_eq!(h.total_size(), Some(70));
    assert_eq!(h.partition_leader_epoch(), 7);
    assert_eq!(h.magic(), 2);
    assert_eq!(h.crc(), reference_crc32c(&b[21..]));
    assert_eq!(h.codec(), Some(Codec::None));
    assert!(!h.is_control() && !h.is_transactional() && !h.is_log_append_time());
    assert_eq!(h.last_offset_delta(), 0);
    assert_eq!(h.max_timestamp(), 1_700_000_000_000);
    assert_eq!((h.producer_id(), h.producer_epoch()), (42, 1));
    assert_eq!((h.base_sequence(), h.last_sequence()), (9, 9));
    assert_eq!(h.record_count(), 1);
    assert_eq!(check_batch(&b).unwrap(), 70);
}

#[test]
fn every_crc_covered_byte_is_protected() {
    let b = hand_built();
    for i in 21..b.len() {
        let mut c = b.clone();
        c[i] ^= 0x01;
        assert!(
            matches!(check_batch(&c), Err(RecordsError::Corrupt(_))),
            "flip at {i} accepted"
        );
    }
    // The fields the log rewrites are outside the CRC.
    let mut c = b.clone();
    let mut h = BatchHeaderMut::new(&mut c).unwrap();
    h.set_base_offset(123);
    h.set_partition_leader_epoch(9);
    assert_eq!(check_batch(&c).unwrap(), 70);
    assert_eq!(BatchHeader::new(&c).unwrap().base_offset(), 123);
}

#[test]
fn structural_errors_are_distinct() {
    let b = hand_built();
    let corrupt = |bytes: &[u8]| matches!(check_batch(bytes), Err(RecordsError::Corrupt(_)));
    assert!(corrupt(&b[..69]), "truncated batch");
    assert!(corrupt(&b[..60]), "truncated header");
    let mut m = b.clone();
    m[16] = 1;
    assert!(corrupt(&m), "magic 1");
    let mut neg = b.clone();
    neg[8..12].copy_from_slice(&(-5i32).to_be_bytes());
    assert!(corrupt(&neg), "negative length");
    let mut codec = b.clone();
    codec[22] |= 0x07;
    BatchHeaderMut::new(&mut codec).unwrap().refresh_crc();
    assert!(corrupt(&codec), "codec 7");
}

#[test]
fn log_append_time_stamp_keeps_the_batch_valid() {
    let mut b = hand_built();
    BatchHeaderMut::new(&mut b)
        .unwrap()
        .stamp_log_append_time(99);
    let h = BatchHeader::new(&b).unwrap();
    assert!(h.is_log_append_time());
    assert_eq!(h.max_timestamp(), 99);
    assert_eq!(h.base_timestamp(), 1_700_000_000_000);
    assert_eq!(h.crc(), reference_crc32c(&b[21..]));
    check_batch(&b).unwrap();
}

#[test]
fn builder_output_is_a_valid_batch() {
    let b = BatchBuilder::new()
        .producer(5, 0, 100)
        .kv(Some(b"a"), Some(b"1"), 10)
        .kv(Some(b"b"), None, 30)
        .kv(None, Some(b"3"), 20)
        .build()
        .unwrap();
    check_batch(&b).unwrap();
    let h = BatchHeader::new(&b).unwrap();
    assert_eq!((h.record_count(), h.last_offset_delta()), (3, 2));
    assert_eq!((h.base_timestamp(), h.max_timestamp()), (10, 30));
    assert_eq!(h.last_sequence(), 102);
    assert_eq!(h.crc(), reference_crc32c(&b[21..]));
}

#[test]
fn builder_sets_flags_and_refuses_an_empty_batch() {
    assert!(BatchBuilder::new().build().is_none());
    let b = BatchBuilder::new()
        .transactional(true)
        .compression(Codec::Lz4)
        .log_append_time(777)
        .kv(Some(b"a"), Some(b"1"), 10)
        .encode()
        .unwrap();
    let h = BatchHeader::new(&b).unwrap();
    assert!(h.is_transactional() && h.is_log_append_time() && !h.is_control());
    assert_eq!(h.codec(), Some(Codec::Lz4));
    assert_eq!((h.max_timestamp(), h.record_timestamp(5)), (777, 777));
    for codec in Codec::ALL {
        assert_eq!(Codec::from_attributes(codec.attribute_bits()), Some(codec));
    }
}

#[test]
fn short_slices_never_panic() {
    for len in 0..BATCH_HEADER_LEN {
        let bytes = vec![0u8; len];
        assert!(BatchHeader::new(&bytes).is_err());
        assert!(check_batch(&bytes).is_err());
        assert_eq!(crate::compute_crc(&bytes), crate::compute_crc(&bytes));
        let mut m = bytes.clone();
        assert!(BatchHeaderMut::new(&mut m).is_err());
    }
}
