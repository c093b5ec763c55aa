use super::reference_crc32c;
use crate::batch::{check_batch, split_batches, write, BatchHeader, Codec, BATCH_HEADER_LEN};
use crate::error::StorageError;

/// A batch assembled byte by byte: one record, key "k", value "v", offset delta 0.
fn hand_built() -> Vec<u8> {
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
    assert_eq!(check_batch(&b, 1000).unwrap(), 70);
}

#[test]
fn every_crc_covered_byte_is_protected() {
    let b = hand_built();
    for i in 21..b.len() {
        let mut c = b.clone();
        c[i] ^= 0x01;
        assert!(
            matches!(check_batch(&c, 1000), Err(StorageError::CorruptMessage(_))),
            "flip at {i} accepted"
        );
    }
    // The fields the log rewrites are outside the CRC.
    let mut c = b.clone();
    write::set_base_offset(&mut c, 123);
    write::set_partition_leader_epoch(&mut c, 9);
    assert_eq!(check_batch(&c, 1000).unwrap(), 70);
}

#[test]
fn structural_errors_are_distinct() {
    let b = hand_built();
    assert!(matches!(
        check_batch(&b, 69),
        Err(StorageError::MessageTooLarge { size: 70, max: 69 })
    ));
    assert!(matches!(
        check_batch(&b[..69], 1000),
        Err(StorageError::CorruptMessage(_))
    ));
    assert!(matches!(
        check_batch(&b[..60], 1000),
        Err(StorageError::CorruptMessage(_))
    ));
    let mut m = b.clone();
    m[16] = 1;
    assert!(matches!(
        check_batch(&m, 1000),
        Err(StorageError::CorruptMessage(_))
    ));
    let mut neg = b.clone();
    neg[8..12].copy_from_slice(&(-5i32).to_be_bytes());
    assert!(matches!(
        check_batch(&neg, 1000),
        Err(StorageError::CorruptMessage(_))
    ));
    let mut two = b.clone();
    two.extend_from_slice(&b);
    assert_eq!(split_batches(&two, 1000).unwrap(), vec![(0, 70), (70, 70)]);
    two.push(0);
    assert!(split_batches(&two, 1000).is_err());
    assert!(split_batches(&[], 1000).is_err());
}

#[test]
fn log_append_time_stamp_keeps_the_batch_valid() {
    let mut b = hand_built();
    write::stamp_log_append_time(&mut b, 99);
    let h = BatchHeader::new(&b).unwrap();
    assert!(h.is_log_append_time());
    assert_eq!(h.max_timestamp(), 99);
    assert_eq!(h.base_timestamp(), 1_700_000_000_000);
    assert_eq!(h.crc(), reference_crc32c(&b[21..]));
    check_batch(&b, 1000).unwrap();
}

#[test]
fn builder_output_is_a_valid_batch() {
    let b = crate::BatchBuilder::new()
        .producer(5, 0, 100)
        .kv(Some(b"a"), Some(b"1"), 10)
        .kv(Some(b"b"), None, 30)
        .kv(None, Some(b"3"), 20)
        .build()
        .unwrap();
    check_batch(&b, 10_000).unwrap();
    let h = BatchHeader::new(&b).unwrap();
    assert_eq!((h.record_count(), h.last_offset_delta()), (3, 2));
    assert_eq!((h.base_timestamp(), h.max_timestamp()), (10, 30));
    assert_eq!(h.last_sequence(), 102);
    assert_eq!(h.crc(), reference_crc32c(&b[21..]));
}
