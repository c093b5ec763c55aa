//! What opening and closing a log costs on disk: a clean open changes no file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use common::{batch, opts, read_all};
use tidelog_storage::{Log, LogConfig};

fn cfg() -> LogConfig {
    LogConfig {
        segment_bytes: 4000,
        index_interval_bytes: 200,
        ..LogConfig::default()
    }
}

/// Every file of the directory with its bytes and modification time.
fn snapshot(dir: &Path) -> BTreeMap<String, (Vec<u8>, SystemTime)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            let bytes = std::fs::read(e.path()).unwrap();
            (name, (bytes, e.metadata().unwrap().modified().unwrap()))
        })
        .collect()
}

#[test]
fn a_clean_open_and_close_change_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    for i in 0..60 {
        log.append(&mut batch(2, i, "v", 100), &opts(i)).unwrap();
    }
    let written = read_all(&log, 0);
    assert!(log.segment_count() > 3);
    log.close().unwrap();
    let before = snapshot(dir.path());
    assert!(before.contains_key("clean-shutdown"));

    let log = Log::open(dir.path(), cfg()).unwrap();
    assert_eq!(read_all(&log, 0), written);
    assert_eq!(log.recovery_point(), log.log_end_offset());
    assert_eq!(
        snapshot(dir.path()),
        before,
        "a clean open touched the files"
    );
    log.close().unwrap();
    assert_eq!(
        snapshot(dir.path()),
        before,
        "closing an unchanged log touched the files"
    );
}

#[test]
fn the_first_write_after_a_clean_open_makes_a_crash_recoverable() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    for i in 0..10 {
        log.append(&mut batch(2, i, "a", 100), &opts(i)).unwrap();
    }
    log.close().unwrap();
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    assert!(dir.path().join("clean-shutdown").exists());
    // The trimmed indexes of the active segment grow again on the first append.
    for i in 0..30 {
        log.append(&mut batch(2, i, "b", 100), &opts(i)).unwrap();
    }
    assert!(!dir.path().join("clean-shutdown").exists());
    let written = read_all(&log, 0);
    drop(log); // crash
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    assert_eq!(read_all(&log, 0), written);
    let next = log.append(&mut batch(1, 0, "c", 10), &opts(0)).unwrap();
    assert_eq!(next.first_offset, 80);
}

#[test]
fn checkpoints_are_rewritten_only_when_they_change() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    log.append(&mut batch(2, 0, "a", 10), &opts(0)).unwrap();
    log.set_high_watermark(2);
    log.flush().unwrap();
    let start_file = dir.path().join("log-start-offset-checkpoint");
    let first = std::fs::metadata(&start_file).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    log.write_checkpoints().unwrap();
    assert_eq!(
        std::fs::metadata(&start_file).unwrap().modified().unwrap(),
        first
    );
    log.delete_records_before(1).unwrap();
    log.write_checkpoints().unwrap();
    assert_ne!(
        std::fs::metadata(&start_file).unwrap().modified().unwrap(),
        first
    );
    assert_eq!(std::fs::read_to_string(&start_file).unwrap(), "0\n1\n1\n");
}

#[test]
fn the_high_watermark_is_no_longer_kept_in_the_partition_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    log.append(&mut batch(3, 0, "a", 10), &opts(0)).unwrap();
    log.set_high_watermark(3);
    log.flush().unwrap();
    let legacy = dir.path().join("replication-offset-checkpoint");
    assert!(!legacy.exists(), "the log directory's file holds it now");
    log.close().unwrap();

    // A directory an earlier release wrote: its value is read at open, then the file
    // goes with the first checkpoint write.
    std::fs::write(&legacy, "0\n1\n2\n").unwrap();
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    assert_eq!(log.high_watermark(), 2);
    log.append(&mut batch(1, 3, "b", 10), &opts(0)).unwrap();
    log.flush().unwrap();
    assert!(!legacy.exists());
}

#[test]
fn recovery_from_the_recovery_point_rebuilds_the_same_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_bytes: 1 << 20,
        index_interval_bytes: 300,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), cfg.clone()).unwrap();
    // Timestamps that rise and fall, so the time index skips entries.
    for i in 0..60 {
        log.append(&mut batch(2, (i * 37) % 50 * 10, "d", 150), &opts(i))
            .unwrap();
    }
    log.flush().unwrap();
    for i in 0..15 {
        log.append(&mut batch(3, 1000 + (i * 7) % 5, "t", 150), &opts(i))
            .unwrap();
    }
    let mut written = read_all(&log, 0);
    drop(log); // crash: 15 batches after the recovery point
    let active = common::files_with_ext(dir.path(), "log").pop().unwrap();
    let len = std::fs::metadata(&active).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&active)
        .unwrap()
        .set_len(len - 5)
        .unwrap(); // tear the last batch
    written.pop();

    let copy = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), copy.path().join(e.file_name())).unwrap();
    }
    // The copy loses its indexes: recovery there rebuilds from the segment start.
    for ext in ["index", "timeindex"] {
        for f in common::files_with_ext(copy.path(), ext) {
            std::fs::remove_file(f).unwrap();
        }
    }
    let partial = Log::open(dir.path(), cfg.clone()).unwrap();
    let full = Log::open(copy.path(), cfg).unwrap();
    assert_eq!(read_all(&partial, 0), written);
    assert_eq!(read_all(&full, 0), written);
    for ts in [0, 5, 100, 250, 490, 1000, 1003, 2000] {
        assert_eq!(
            partial.offset_for_timestamp(ts).unwrap(),
            full.offset_for_timestamp(ts).unwrap()
        );
    }
    assert_eq!(
        partial.max_timestamp_and_offset().unwrap(),
        full.max_timestamp_and_offset().unwrap()
    );
    for ext in ["index", "timeindex"] {
        let a = std::fs::read(&common::files_with_ext(dir.path(), ext)[0]).unwrap();
        let b = std::fs::read(&common::files_with_ext(copy.path(), ext)[0]).unwrap();
        assert_eq!(a, b, ".{ext} differs from a full rebuild");
    }
}
