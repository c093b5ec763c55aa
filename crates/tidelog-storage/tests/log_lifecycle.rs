//! Roll, retention, DeleteRecords, truncation, LogAppendTime, follower appends.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{base_offsets, batch, files_with_ext, opts, read_all};
use tidelog_storage::{
    AppendOptions, AppendOrigin, BatchBuilder, BatchHeader, Log, LogConfig, StorageError,
    TimestampType,
};

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 1000,
        index_interval_bytes: 100,
        ..LogConfig::default()
    }
}

#[test]
fn rolls_at_segment_bytes_and_reads_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_segments()).unwrap();
    let mut written = Vec::new();
    for i in 0..20 {
        let mut b = batch(3, i * 10, "r", 60);
        log.append(&mut b, &opts(i)).unwrap();
        written.push(b);
    }
    assert!(
        log.segment_count() >= 5,
        "only {} segments",
        log.segment_count()
    );
    for s in log.segment_base_offsets() {
        assert_eq!(s % 3, 0, "segments start on batch boundaries");
    }
    let logs = files_with_ext(dir.path(), "log");
    assert_eq!(logs.len(), log.segment_count());
    let name = logs[1].file_name().unwrap().to_str().unwrap().to_owned();
    assert_eq!(name.len(), 24);
    assert!(logs
        .iter()
        .all(|p| std::fs::metadata(p).unwrap().len() <= 1000));
    // Closed segments' indexes are trimmed to whole entries.
    for p in &files_with_ext(dir.path(), "index")[..log.segment_count() - 1] {
        assert_eq!(std::fs::metadata(p).unwrap().len() % 8, 0);
        assert!(std::fs::metadata(p).unwrap().len() < 1000);
    }
    assert_eq!(read_all(&log, 0), written);
    // Each read stays within one segment.
    let r = log.read(0, 1 << 20, i64::MAX).unwrap();
    assert!(r.slice.unwrap().len <= 1000);
    // Reading from the middle of a batch returns that batch.
    let r = log.read(31, 1, i64::MAX).unwrap();
    assert_eq!(r.first_batch_offset, 30);
    assert_eq!(r.slice.unwrap().read_to_vec().unwrap(), written[10]);
}

#[test]
fn rolls_when_the_index_is_full_and_on_segment_ms() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_index_bytes: 64, // 8 offset entries, 5 time entries
        index_interval_bytes: 1,
        segment_ms: 1000,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), cfg).unwrap();
    for i in 0..12 {
        log.append(&mut batch(1, i, "x", 10), &opts(0)).unwrap();
    }
    assert!(log.segment_count() >= 2);
    let before = log.segment_count();
    log.roll_if_due(999).unwrap();
    assert_eq!(log.segment_count(), before);
    log.roll_if_due(1000).unwrap();
    assert_eq!(log.segment_count(), before + 1);
    // The new empty segment does not roll again.
    log.roll_if_due(50_000).unwrap();
    assert_eq!(log.segment_count(), before + 1);
    assert_eq!(log.segment_base_offsets().last(), Some(&12));
    assert_eq!(read_all(&log, 0).len(), 12);
}

#[test]
fn retention_by_time_and_size_never_touches_the_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_segments();
    cfg.retention_ms = 1000;
    let mut log = Log::open(dir.path(), cfg.clone()).unwrap();
    for i in 0..20 {
        log.append(&mut batch(3, i * 100, "t", 60), &opts(0))
            .unwrap();
    }
    let segments = log.segment_base_offsets();
    // Segment max timestamps grow with position; at now=1500 those with max < 500 go.
    let deleted = log.apply_retention(1500).unwrap();
    assert!(deleted >= 1);
    let start = log.log_start_offset();
    assert_eq!(start, segments[deleted] as i64);
    assert!(log.read(0, 100, i64::MAX).unwrap_err().is_below_start());
    assert_eq!(base_offsets(&read_all(&log, start))[0], start);
    // Everything expired: all but the active segment goes.
    log.apply_retention(1_000_000).unwrap();
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.log_end_offset(), 60);
    // Size retention.
    for i in 0..20 {
        log.append(&mut batch(3, 10_000_000 + i, "s", 60), &opts(0))
            .unwrap();
    }
    let mut cfg2 = cfg.clone();
    cfg2.retention_ms = -1;
    cfg2.retention_bytes = 1500;
    log.set_config(cfg2);
    log.apply_retention(0).unwrap();
    assert!(log.size_bytes() <= 1500 + 1000);
    assert!(log.segment_count() >= 2);
    let start = log.log_start_offset();
    // The log start offset survives a crash (no clean close).
    drop(log);
    let log = Log::open(dir.path(), cfg).unwrap();
    assert_eq!(log.log_start_offset(), start);
    assert_eq!(log.log_end_offset(), 120);
}

#[test]
fn delete_records_moves_the_start_and_persists() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_segments()).unwrap();
    for i in 0..20 {
        log.append(&mut batch(3, i, "d", 60), &opts(0)).unwrap();
    }
    let segs = log.segment_count();
    assert_eq!(log.delete_records_before(31).unwrap(), 31);
    assert!(log.segment_count() < segs);
    assert_eq!(
        log.delete_records_before(10).unwrap(),
        31,
        "start never moves back"
    );
    assert!(log.read(30, 10, i64::MAX).unwrap_err().is_below_start());
    // The batch containing the new start is returned whole, as Kafka does.
    assert_eq!(log.read(31, 10, i64::MAX).unwrap().first_batch_offset, 30);
    assert!(log.delete_records_before(61).unwrap_err().is_above_end());
    log.close().unwrap();
    let log = Log::open(dir.path(), small_segments()).unwrap();
    assert_eq!(log.log_start_offset(), 31);
}

#[test]
fn truncate_removes_whole_batches_and_offsets_continue() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_segments()).unwrap();
    let mut written = Vec::new();
    for i in 0..20 {
        let epoch_opts = AppendOptions {
            leader_epoch: (i / 5) as i32,
            ..opts(0)
        };
        let mut b = batch(3, i, "u", 60);
        log.append(&mut b, &epoch_opts).unwrap();
        written.push(b);
    }
    log.set_high_watermark(60);
    log.truncate_to(31).unwrap(); // inside batch 30..32: that batch goes
    assert_eq!(log.log_end_offset(), 30);
    assert_eq!(log.high_watermark(), 30);
    assert_eq!(read_all(&log, 0), written[..10].to_vec());
    assert_eq!(log.leader_epochs().last().unwrap().epoch, 1);
    assert_eq!(log.end_offset_for_epoch(1), Some((1, 30)));
    let info = log.append(&mut batch(2, 0, "v", 10), &opts(0)).unwrap();
    assert_eq!(info.first_offset, 30);
    // Truncating to a segment base keeps the earlier segments intact.
    let bases = log.segment_base_offsets();
    log.truncate_to(bases[1]).unwrap();
    assert_eq!(log.log_end_offset(), bases[1]);
    assert_eq!(log.segment_count(), 1);
    log.append(&mut batch(1, 0, "w", 10), &opts(0)).unwrap();
    drop(log); // crash
    let log = Log::open(dir.path(), small_segments()).unwrap();
    assert_eq!(log.log_end_offset(), bases[1] + 1);
    // Truncating below the start empties the log and restarts it there.
    let mut log = log;
    log.delete_records_before(6).unwrap();
    log.truncate_to(3).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (3, 3));
    assert_eq!(
        log.append(&mut batch(1, 0, "z", 1), &opts(0))
            .unwrap()
            .first_offset,
        3
    );
    // Restarting at the base of an existing segment reuses it, emptied.
    log.append(&mut batch(2, 0, "y", 1), &opts(0)).unwrap();
    log.delete_records_before(5).unwrap();
    log.truncate_to(3).unwrap();
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.segment_count()
        ),
        (3, 3, 1)
    );
    assert_eq!(log.size_bytes(), 0);
    assert_eq!(
        log.append(&mut batch(1, 0, "x", 1), &opts(0))
            .unwrap()
            .first_offset,
        3
    );
    log.close().unwrap();
    let log = Log::open(dir.path(), small_segments()).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (3, 4));
}

#[test]
fn log_append_time_stamps_batches() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        message_timestamp_type: TimestampType::LogAppendTime,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), cfg).unwrap();
    let info = log.append(&mut batch(4, 5, "l", 1), &opts(777)).unwrap();
    assert_eq!(info.log_append_time_ms, 777);
    assert_eq!(info.max_timestamp, 777);
    let stored = &read_all(&log, 0)[0];
    let h = BatchHeader::new(stored).unwrap();
    assert!(h.is_log_append_time());
    assert_eq!(h.max_timestamp(), 777);
    assert_eq!(h.crc(), crc32c::crc32c(&stored[21..]));
    assert_eq!(log.offset_for_timestamp(700).unwrap(), Some((0, 777)));
    assert_eq!(log.offset_for_timestamp(778).unwrap(), None);
}

#[test]
fn follower_appends_keep_offsets_and_learn_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let mut a = batch(2, 0, "f", 1);
    let mut b = batch(3, 0, "f", 1);
    tidelog_storage_test_set(&mut a, 0, 4);
    tidelog_storage_test_set(&mut b, 2, 6);
    let mut both = a.clone();
    both.extend_from_slice(&b);
    let info = log.append_as_follower(&both).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 4));
    assert_eq!(read_all(&log, 0), vec![a.clone(), b]);
    assert_eq!(log.end_offset_for_epoch(4), Some((4, 2)));
    assert_eq!(log.end_offset_for_epoch(6), Some((6, 5)));
    assert!(matches!(
        log.append_as_follower(&a),
        Err(StorageError::UnexpectedOffset {
            expected: 5,
            got: 0
        })
    ));
}

/// Sets base offset and leader epoch like a leader would have.
fn tidelog_storage_test_set(batch: &mut [u8], base: i64, epoch: i32) {
    batch[0..8].copy_from_slice(&base.to_be_bytes());
    batch[12..16].copy_from_slice(&epoch.to_be_bytes());
}

#[test]
fn control_batches_and_aborted_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let mut marker = BatchBuilder::control_marker(7, 0, false, 1, 5)
        .build()
        .unwrap();
    assert!(matches!(
        log.append(&mut marker.clone(), &opts(0)),
        Err(StorageError::InvalidRecord(_))
    ));
    let mut txn = BatchBuilder::new().producer(7, 0, 0).transactional(true);
    for _ in 0..3 {
        txn = txn.kv(Some(b"k"), Some(b"v"), 1);
    }
    log.append(&mut batch(2, 0, "pre", 1), &opts(0)).unwrap();
    log.append(&mut txn.build().unwrap(), &opts(0)).unwrap();
    assert_eq!(log.producer_state().first_unstable_offset(), Some(2));
    let coord = AppendOptions {
        origin: AppendOrigin::Coordinator,
        ..opts(0)
    };
    log.append(&mut marker, &coord).unwrap();
    assert_eq!(log.producer_state().first_unstable_offset(), None);
    let aborted = log.aborted_txns(0, 100);
    assert_eq!(aborted.len(), 1);
    assert_eq!(
        (
            aborted[0].producer_id,
            aborted[0].first_offset,
            aborted[0].last_offset
        ),
        (7, 2, 5)
    );
    assert!(log.aborted_txns(6, 100).is_empty());
    // Lost .txnindex after a crash is rebuilt from the abort marker.
    drop(log);
    for p in files_with_ext(dir.path(), "txnindex") {
        std::fs::remove_file(p).unwrap();
    }
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.aborted_txns(0, 100), aborted);
    let pid = log.producer_state().get(7).unwrap();
    assert_eq!(pid.batches.len(), 1);
    assert_eq!(pid.batches[0].last_offset, 4);
}
