use bytes::Bytes;

use crate::{BatchBuilder, BatchHeaderMut, Codec, ControlMarker, LogRecords, RecordsError};

fn at(mut batch: Vec<u8>, base: i64) -> Vec<u8> {
    BatchHeaderMut::new(&mut batch)
        .unwrap()
        .set_base_offset(base);
    batch
}

#[test]
fn records_come_back_with_their_producer_and_markers() {
    let plain = at(
        BatchBuilder::new()
            .kv(Some(b"a"), Some(b"1"), 10)
            .kv(Some(b"b"), None, 11)
            .build()
            .unwrap(),
        0,
    );
    let txn = at(
        BatchBuilder::new()
            .producer(7, 2, 0)
            .transactional(true)
            .compression(Codec::Gzip)
            .kv(Some(b"t"), Some(b"x"), 12)
            .build()
            .unwrap(),
        2,
    );
    let commit = at(
        BatchBuilder::control_marker(7, 2, true, 0, 13)
            .build()
            .unwrap(),
        3,
    );
    let abort = at(
        BatchBuilder::control_marker(8, 0, false, 0, 14)
            .build()
            .unwrap(),
        4,
    );
    let buf = [plain, txn, commit, abort].concat();
    let mut reader = LogRecords::new(Bytes::from(buf));
    let records: Vec<_> = reader.by_ref().map(Result::unwrap).collect();
    let summary: Vec<_> = records
        .iter()
        .map(|r| {
            (
                r.offset,
                r.producer_id,
                r.is_transactional,
                r.is_control,
                r.marker,
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (0, -1, false, false, None),
            (1, -1, false, false, None),
            (2, 7, true, false, None),
            (3, 7, true, true, Some(ControlMarker::Commit)),
            (4, 8, true, true, Some(ControlMarker::Abort)),
        ]
    );
    assert_eq!(records[1].value, None);
    assert_eq!(records[2].key.as_deref(), Some(&b"t"[..]));
    assert_eq!(records[2].timestamp, 12);
    assert_eq!(reader.next_offset(), Some(5));
}

#[test]
fn a_partial_trailing_batch_ends_the_walk_cleanly() {
    let first = at(
        BatchBuilder::new()
            .kv(Some(b"a"), Some(b"1"), 0)
            .build()
            .unwrap(),
        0,
    );
    let second = at(
        BatchBuilder::new()
            .kv(Some(b"b"), Some(b"2"), 0)
            .build()
            .unwrap(),
        1,
    );
    for cut in 0..second.len() {
        let buf = [&first[..], &second[..cut]].concat();
        let mut reader = LogRecords::new(Bytes::from(buf));
        let got: Vec<_> = reader.by_ref().collect();
        assert_eq!(got.len(), 1, "cut at {cut}");
        assert!(got[0].is_ok());
        assert_eq!(reader.next_offset(), Some(1));
        assert_eq!(reader.consumed_bytes(), first.len());
    }
}

#[test]
fn a_corrupt_batch_is_reported_once_and_skipped() {
    let first = at(
        BatchBuilder::new()
            .kv(Some(b"a"), Some(b"1"), 0)
            .build()
            .unwrap(),
        0,
    );
    let mut bad = at(
        BatchBuilder::new()
            .kv(Some(b"b"), Some(b"2"), 0)
            .build()
            .unwrap(),
        1,
    );
    let last = bad.len() - 1;
    bad[last] ^= 0xff; // CRC no longer matches
    let third = at(
        BatchBuilder::new()
            .kv(Some(b"c"), Some(b"3"), 0)
            .build()
            .unwrap(),
        2,
    );
    let buf = [first, bad, third].concat();
    let got: Vec<_> = LogRecords::new(Bytes::from(buf)).collect();
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].as_ref().unwrap().offset, 0);
    let err = got[1].as_ref().unwrap_err();
    assert_eq!(err.base_offset, 1);
    assert!(matches!(err.error, RecordsError::Corrupt(_)));
    assert_eq!(got[2].as_ref().unwrap().offset, 2);
}
