//! The read-only probes the broker's metrics use (the fsync observer and the timestamp
//! retention measures a segment by) and the per-thread fsync count tests rely on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tidelog_storage::{
    fsyncs_on_this_thread, AppendOptions, AppendOrigin, BatchBuilder, Log, LogConfig,
};

fn append(log: &mut Log, ts: i64) {
    let mut b = BatchBuilder::new()
        .kv(Some(b"k"), Some(b"v"), ts)
        .build()
        .unwrap();
    let opts = AppendOptions {
        leader_epoch: 0,
        now_ms: ts,
        origin: AppendOrigin::Client,
    };
    log.append(&mut b, &opts).unwrap();
}

#[test]
fn flush_observer_is_told_once_per_fsync_pass() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    log.set_flush_observer(Some(Arc::new(move |_| {
        seen.fetch_add(1, Ordering::SeqCst);
    })));
    append(&mut log, 1_000);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    log.flush().unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    log.set_flush_observer(None);
    log.flush().unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn fsyncs_are_counted_on_the_thread_that_makes_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    append(&mut log, 1_000);
    let before = fsyncs_on_this_thread();
    log.flush().unwrap();
    let here = fsyncs_on_this_thread() - before;
    assert!(here >= 1, "a flush syncs at least the active segment");
    let elsewhere = std::thread::spawn(fsyncs_on_this_thread).join().unwrap();
    assert_eq!(elsewhere, 0, "another thread made none");
}

#[test]
fn segment_max_timestamp_names_the_segment_holding_an_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    append(&mut log, 1_000);
    append(&mut log, 2_000);
    log.roll_if_due(i64::MAX).unwrap();
    append(&mut log, 3_000);
    assert_eq!(log.segment_count(), 2);
    assert_eq!(log.segment_max_timestamp_at(0), Some((2_000, false)));
    assert_eq!(log.segment_max_timestamp_at(1), Some((2_000, false)));
    assert_eq!(log.segment_max_timestamp_at(2), Some((3_000, true)));
    // The log end is where the next record lands: in the active segment.
    assert_eq!(log.segment_max_timestamp_at(3), Some((3_000, true)));
    assert_eq!(log.segment_max_timestamp_at(4), None);
    assert_eq!(log.segment_max_timestamp_at(-1), None);
}

#[test]
fn bytes_after_a_segment_say_when_size_retention_takes_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    for segment in 0..3 {
        append(&mut log, 1_000 + segment);
        append(&mut log, 1_000 + segment);
        log.roll_if_due(i64::MAX).unwrap();
    }
    append(&mut log, 2_000);
    assert_eq!(log.segment_count(), 4);
    let total = log.size_bytes();
    let first = log.bytes_after_segment_at(0).unwrap();
    let second = log.bytes_after_segment_at(2).unwrap();
    assert_eq!(log.bytes_after_segment_at(1), Some(first), "same segment");
    assert!(first > second && second > 0 && first < total);
    assert_eq!(log.bytes_after_segment_at(6), Some(0), "the active segment");
    assert_eq!(log.bytes_after_segment_at(8), None);
    // With retention.bytes at exactly what follows the second segment, retention
    // deletes the first two segments and no more: the edge the figure names.
    log.set_config(LogConfig {
        retention_ms: -1,
        retention_bytes: i64::try_from(second).unwrap(),
        ..LogConfig::default()
    });
    assert_eq!(log.apply_retention(3_000).unwrap(), 2);
    assert_eq!(log.log_start_offset(), 4);
}
