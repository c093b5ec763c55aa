use crate::batch::BatchHeader;
use crate::checkpoint;
use crate::epoch_cache::LeaderEpochCache;
use crate::producer_state::{MarkerInfo, ProducerStateTable};
use crate::txn_index::{AbortedTxn, TxnIndex};
use crate::BatchBuilder;

fn producer_batch(
    pid: i64,
    epoch: i16,
    seq: i32,
    n: usize,
    base_offset: i64,
    txn: bool,
) -> Vec<u8> {
    let mut b = BatchBuilder::new()
        .producer(pid, epoch, seq)
        .transactional(txn);
    for _ in 0..n {
        b = b.kv(Some(b"k"), Some(b"v"), 5);
    }
    let mut bytes = b.build().unwrap();
    crate::batch::BatchHeaderMut::new(&mut bytes)
        .unwrap()
        .set_base_offset(base_offset);
    bytes
}

#[test]
fn producer_table_keeps_the_last_five_batches_per_epoch() {
    let mut t = ProducerStateTable::default();
    for i in 0..7 {
        let b = producer_batch(1, 0, i * 2, 2, i64::from(i) * 2, false);
        assert!(t.update(&BatchHeader::new(&b).unwrap(), None).is_none());
    }
    let e = t.get(1).unwrap();
    assert_eq!(e.batches.len(), 5);
    assert_eq!(e.batches[0].first_seq, 4);
    assert_eq!(e.last_seq(), Some(13));
    assert_eq!(e.find_duplicate(10, 11).unwrap().first_offset, 10);
    let bumped = producer_batch(1, 1, 0, 1, 100, false);
    t.update(&BatchHeader::new(&bumped).unwrap(), None);
    let e = t.get(1).unwrap();
    assert_eq!((e.epoch, e.batches.len()), (1, 1));
    let anon = producer_batch(-1, -1, -1, 1, 101, false);
    t.update(&BatchHeader::new(&anon).unwrap(), None);
    assert_eq!(t.len(), 1);
}

#[test]
fn transactions_open_and_complete() {
    let mut t = ProducerStateTable::default();
    let data = producer_batch(9, 0, 0, 3, 40, true);
    t.update(&BatchHeader::new(&data).unwrap(), None);
    assert_eq!(t.first_unstable_offset(), Some(40));
    let mut marker = BatchBuilder::control_marker(9, 0, false, 1, 6)
        .build()
        .unwrap();
    crate::batch::BatchHeaderMut::new(&mut marker)
        .unwrap()
        .set_base_offset(43);
    let done = t
        .update(
            &BatchHeader::new(&marker).unwrap(),
            Some(MarkerInfo::of(&marker)),
        )
        .unwrap();
    assert_eq!(
        (done.first_offset, done.marker_offset, done.aborted),
        (40, 43, true)
    );
    assert_eq!(t.first_unstable_offset(), None);
    assert_eq!(
        t.get(9).unwrap().coordinator_epoch,
        1,
        "the marker's coordinator epoch is kept"
    );
}

#[test]
fn a_version_1_snapshot_reads_with_no_coordinator_epoch() {
    let mut body = Vec::new();
    body.extend_from_slice(&1u32.to_be_bytes());
    body.extend_from_slice(&7i64.to_be_bytes()); // producer id
    body.extend_from_slice(&3i16.to_be_bytes()); // epoch
    body.extend_from_slice(&(-1i64).to_be_bytes()); // no open transaction
    body.push(1);
    for field in [0i32, 4] {
        body.extend_from_slice(&field.to_be_bytes()); // first_seq, last_seq
    }
    for field in [100i64, 104, 9] {
        body.extend_from_slice(&field.to_be_bytes()); // first_offset, last_offset, timestamp
    }
    let mut bytes = b"TLPS".to_vec();
    bytes.extend_from_slice(&1u16.to_be_bytes());
    bytes.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    bytes.extend_from_slice(&body);
    let t = ProducerStateTable::decode(&bytes).unwrap();
    let e = t.get(7).unwrap();
    assert_eq!(
        (e.epoch, e.coordinator_epoch, e.last_seq()),
        (3, -1, Some(4))
    );
}

#[test]
fn snapshot_round_trips_and_rejects_damage() {
    let mut t = ProducerStateTable::default();
    for pid in 0..3 {
        let b = producer_batch(pid, 2, 0, 4, pid * 10, pid == 1);
        t.update(&BatchHeader::new(&b).unwrap(), None);
    }
    let marker = BatchBuilder::control_marker(1, 2, true, 5, 6)
        .build()
        .unwrap();
    t.update(
        &BatchHeader::new(&marker).unwrap(),
        Some(MarkerInfo::of(&marker)),
    );
    assert_eq!(t.get(1).unwrap().coordinator_epoch, 5);
    let bytes = t.encode();
    assert_eq!(ProducerStateTable::decode(&bytes).unwrap(), t);
    for i in 0..bytes.len() {
        let mut d = bytes.clone();
        d[i] ^= 0x40;
        assert!(
            ProducerStateTable::decode(&d).is_none(),
            "flip at {i} accepted"
        );
    }
    assert!(ProducerStateTable::decode(&bytes[..bytes.len() - 1]).is_none());
}

#[test]
fn checkpoints_are_atomic_text_files() {
    let dir = tempfile::tempdir().unwrap();
    checkpoint::write_offset(dir.path(), "x", 1234).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("x")).unwrap(),
        "0\n1\n1234\n"
    );
    assert_eq!(checkpoint::read_offset(dir.path(), "x"), Some(1234));
    assert!(!dir.path().join("x.tmp").exists());
    std::fs::write(dir.path().join("x"), "0\n2\n1\n").unwrap();
    assert_eq!(checkpoint::read_offset(dir.path(), "x"), None);
    assert_eq!(checkpoint::read_offset(dir.path(), "absent"), None);
    checkpoint::write_epochs(dir.path(), &[(1, 0), (4, 100)]).unwrap();
    assert_eq!(
        checkpoint::read_epochs(dir.path()),
        Some(vec![(1, 0), (4, 100)])
    );
}

#[test]
fn a_log_directory_keeps_every_high_watermark_in_one_kafka_style_file() {
    let dir = tempfile::tempdir().unwrap();
    assert!(checkpoint::read_high_watermarks(dir.path()).is_empty());
    let entries = vec![
        ("orders".to_string(), 0, 17),
        ("orders".to_string(), 1, 0),
        ("__consumer_offsets".to_string(), 42, 9_000_000_000),
    ];
    checkpoint::write_high_watermarks(dir.path(), &entries).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("replication-offset-checkpoint")).unwrap(),
        "0\n3\norders 0 17\norders 1 0\n__consumer_offsets 42 9000000000\n"
    );
    let read = checkpoint::read_high_watermarks(dir.path());
    assert_eq!(read.len(), 3);
    assert_eq!(read.get(&("orders".to_string(), 0)), Some(&17));
    assert_eq!(
        read.get(&("__consumer_offsets".to_string(), 42)),
        Some(&9_000_000_000)
    );
    // A torn or foreign file is ignored as a whole, never half-read.
    for bad in [
        "0\n2\norders 0 17\n",
        "0\n1\norders x 17\n",
        "1\n0\n",
        "0\n1\norders 0 1 2\n",
    ] {
        std::fs::write(dir.path().join("replication-offset-checkpoint"), bad).unwrap();
        assert!(
            checkpoint::read_high_watermarks(dir.path()).is_empty(),
            "{bad:?}"
        );
    }
}

#[test]
fn epoch_cache_answers_offset_for_leader_epoch() {
    let mut c = LeaderEpochCache::default();
    assert!(c.assign(1, 0));
    assert!(!c.assign(1, 10));
    assert!(c.assign(3, 50));
    assert!(!c.assign(2, 60), "older epoch accepted");
    // Older than every known epoch: it ends where the first known one starts.
    assert_eq!(c.end_offset_for(0, 80), Some((0, 0)));
    assert_eq!(c.end_offset_for(1, 80), Some((1, 50)));
    assert_eq!(c.end_offset_for(2, 80), Some((1, 50)));
    assert_eq!(c.end_offset_for(3, 80), Some((3, 80)));
    assert_eq!(c.end_offset_for(9, 80), Some((3, 80)));
    assert!(c.truncate_from_start(20));
    assert_eq!(c.pairs(), vec![(1, 20), (3, 50)]);
    assert_eq!(c.end_offset_for(0, 80), Some((0, 20)));
    assert_eq!(LeaderEpochCache::default().end_offset_for(0, 80), None);
    assert!(c.truncate_from_end(50));
    assert_eq!(c.pairs(), vec![(1, 20)]);
}

#[test]
fn txn_index_persists_and_truncates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.txnindex");
    let mut idx = TxnIndex::load(&path).unwrap();
    let a = AbortedTxn {
        producer_id: 1,
        first_offset: 0,
        last_offset: 5,
        last_stable_offset: 6,
    };
    let b = AbortedTxn {
        producer_id: 2,
        first_offset: 3,
        last_offset: 9,
        last_stable_offset: 10,
    };
    idx.append(a).unwrap();
    idx.append(b).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 68);
    assert_eq!(TxnIndex::load(&path).unwrap().entries(), &[a, b]);
    idx.truncate_to(9).unwrap();
    assert_eq!(TxnIndex::load(&path).unwrap().entries(), &[a]);
}
