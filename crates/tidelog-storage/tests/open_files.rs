//! Descriptors held by many logs: one per log (its active `.log`) plus a bounded,
//! process-wide cache of closed segments' files; index files keep none.
//! One test in this binary, so nothing else opens files meanwhile.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{batch, opts, read_all};
use tidelog_storage::LogConfig;
use tidelog_storage::{open_logs, open_segment_files_cached, set_max_open_segment_files, Log};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn descriptors_stay_bounded_with_many_segments() {
    const LOGS: usize = 40;
    const CACHE: usize = 8;
    set_max_open_segment_files(CACHE);
    let root = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_bytes: 2000,
        index_interval_bytes: 100,
        segment_index_bytes: 4096,
        ..LogConfig::default()
    };
    let baseline = open_fds();
    let mut logs = Vec::new();
    let mut written = Vec::new();
    for i in 0..LOGS {
        let mut log = Log::open(&root.path().join(format!("t-{i}")), cfg.clone()).unwrap();
        for j in 0..30 {
            log.append(&mut batch(2, j, &format!("p{i}"), 100), &opts(j))
                .unwrap();
        }
        assert!(log.segment_count() >= 4);
        written.push(read_all(&log, 0));
        logs.push(log);
    }
    let held = open_fds() - baseline;
    assert!(held <= LOGS + CACHE, "{held} descriptors for {LOGS} logs");
    assert!(open_segment_files_cached() <= CACHE);

    // Reading every old segment again reopens files, within the same bound.
    for (log, expected) in logs.iter().zip(&written) {
        assert_eq!(&read_all(log, 0), expected);
    }
    let held = open_fds() - baseline;
    assert!(
        held <= LOGS + CACHE,
        "{held} descriptors after reading everything"
    );

    for log in logs {
        log.close().unwrap();
    }
    assert_eq!(open_fds(), baseline, "closed logs leave nothing open");

    let wanted = (0..LOGS)
        .map(|i| (root.path().join(format!("t-{i}")), cfg.clone()))
        .collect();
    let logs: Vec<Log> = open_logs(wanted, 4)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let held = open_fds() - baseline;
    assert!(held <= LOGS + CACHE, "{held} descriptors after reopening");
    for (log, expected) in logs.iter().zip(&written) {
        assert_eq!(&read_all(log, 0), expected);
    }
    // A fetch in flight keeps its file readable even after the cache let it go.
    let slice = logs[0].read(0, 100, i64::MAX).unwrap().slice.unwrap();
    for log in &logs[1..] {
        read_all(log, 0);
    }
    assert!(!slice.read_to_vec().unwrap().is_empty());
    drop(slice);
    drop(logs);
    assert_eq!(open_fds(), baseline, "dropped logs leave nothing open");
}
