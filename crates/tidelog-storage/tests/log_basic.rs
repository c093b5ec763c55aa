//! End-to-end behaviour of `Log` through its public API.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tidelog_storage::{
    AppendOptions, AppendOrigin, BatchBuilder, BatchHeader, Log, LogConfig, StorageError,
};

fn opts(now_ms: i64) -> AppendOptions {
    AppendOptions {
        leader_epoch: 3,
        now_ms,
        origin: AppendOrigin::Client,
    }
}

fn batch(n: usize, ts: i64, tag: &str) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for i in 0..n {
        let v = format!("{tag}-{i}");
        b = b.kv(
            Some(format!("k{i}").as_bytes()),
            Some(v.as_bytes()),
            ts + i as i64,
        );
    }
    b.build().expect("non-empty batch")
}

#[test]
fn append_assigns_dense_offsets_and_reads_back_exact_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let mut a = batch(3, 1000, "a");
    let mut b = batch(2, 2000, "b");
    let ia = log.append(&mut a, &opts(5)).unwrap();
    let ib = log.append(&mut b, &opts(6)).unwrap();
    assert_eq!(
        (ia.first_offset, ia.last_offset, ia.record_count),
        (0, 2, 3)
    );
    assert_eq!((ib.first_offset, ib.last_offset), (3, 4));
    assert_eq!(ib.max_timestamp, 2001);
    assert_eq!(log.log_end_offset(), 5);

    let r = log.read(0, 1 << 20, i64::MAX).unwrap();
    let bytes = r.slice.unwrap().read_to_vec().unwrap();
    let mut expected = a.clone();
    expected.extend_from_slice(&b);
    assert_eq!(bytes, expected);
    let h = BatchHeader::new(&bytes).unwrap();
    assert_eq!(h.base_offset(), 0);
    assert_eq!(h.partition_leader_epoch(), 3);

    // Offset 4 lives in the second batch, which is returned whole.
    let r = log.read(4, 1, i64::MAX).unwrap();
    assert_eq!(r.first_batch_offset, 3);
    assert_eq!(r.slice.unwrap().read_to_vec().unwrap(), b);
    // Upper bound below the second batch's end keeps it out.
    let r = log.read(0, 1 << 20, 4).unwrap();
    assert_eq!(r.slice.unwrap().len, a.len() as u64);
    assert!(log.read(5, 100, i64::MAX).unwrap().slice.is_none());
    assert!(log.read(6, 100, i64::MAX).unwrap_err().is_above_end());
}

#[test]
fn reopen_after_clean_close_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    for i in 0..10 {
        log.append(&mut batch(4, i * 10, "x"), &opts(i)).unwrap();
    }
    log.set_high_watermark(20);
    log.close().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.log_end_offset(), 40);
    // The high watermark is kept by the owner of the logs, one file per log directory
    // (`write_high_watermarks`), and handed back after the open.
    assert_eq!(log.high_watermark(), 0);
    log.set_high_watermark(20);
    assert_eq!(log.high_watermark(), 20);
    assert_eq!(log.offset_for_timestamp(52).unwrap(), Some((22, 52)));
    assert_eq!(log.max_timestamp_and_offset().unwrap(), Some((39, 93)));
}

#[test]
fn corrupt_batch_is_rejected_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let good = batch(2, 0, "g");
    let mut bad = batch(2, 0, "b");
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    let mut both = good.clone();
    both.extend_from_slice(&bad);
    let err = log.append(&mut both, &opts(0)).unwrap_err();
    assert!(matches!(err, StorageError::CorruptMessage(_)), "{err}");
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.size_bytes(), 0);
}

#[test]
fn log_can_be_shared_across_threads_behind_a_mutex() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Log>();
    assert_send_sync::<tidelog_storage::FileSlice>();
}

#[test]
fn idle_producers_expire_but_open_transactions_stay() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    for (pid, ts, txn) in [(1, 1_000, false), (2, 5_000, false), (3, 1_000, true)] {
        let mut b = BatchBuilder::new()
            .producer(pid, 0, 0)
            .transactional(txn)
            .kv(Some(b"k"), Some(b"v"), ts)
            .build()
            .unwrap();
        log.append(&mut b, &opts(ts)).unwrap();
    }
    assert_eq!(log.expire_producers(6_000, 2_000), 1);
    let left: Vec<i64> = log.producer_state().iter().map(|(id, _)| id).collect();
    assert_eq!(left, vec![2, 3]);
}
