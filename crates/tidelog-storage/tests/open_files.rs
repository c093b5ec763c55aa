//! Descriptors held by many logs: every segment's `.log`, the active one's included,
//! goes through one bounded, process-wide cache; index files keep none.
//! One test in this binary (run in phases), so nothing else opens files meanwhile.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{batch, opts, read_all};
use tidelog_storage::LogConfig;
use tidelog_storage::{open_logs, open_segment_files_cached, set_max_open_segment_files, Log};

/// Descriptors beyond the cache: a slice in flight, the directory listing itself.
const SLACK: usize = 2;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Whether this process holds a descriptor on `path` right now.
fn is_open(path: &std::path::Path) -> bool {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .any(|target| target == path)
}

#[test]
fn descriptors_stay_bounded() {
    many_segments();
    many_active_segments();
}

fn many_segments() {
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
    assert!(held <= CACHE + SLACK, "{held} descriptors for {LOGS} logs");
    assert!(open_segment_files_cached() <= CACHE);

    // Reading every old segment again reopens files, within the same bound.
    for (log, expected) in logs.iter().zip(&written) {
        assert_eq!(&read_all(log, 0), expected);
    }
    let held = open_fds() - baseline;
    assert!(
        held <= CACHE + SLACK,
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
    assert!(held <= CACHE + SLACK, "{held} descriptors after reopening");
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

/// Logs that each have only an active segment, more logs than the cache holds:
/// appends, reads, flushes and reopens stay within the cache, an append to a log whose
/// descriptor was evicted lands where it should, and its fsync happens on a reopened
/// descriptor, so the data survives both a clean close and a crash-style drop.
fn many_active_segments() {
    const LOGS: usize = 48;
    const CACHE: usize = 6;
    const ROUNDS: i64 = 5;
    set_max_open_segment_files(CACHE);
    let root = tempfile::tempdir().unwrap();
    let cfg = LogConfig::default();
    let dir = |i: usize| root.path().join(format!("a-{i}"));
    let baseline = open_fds();
    let mut logs: Vec<Log> = (0..LOGS)
        .map(|i| Log::open(&dir(i), cfg.clone()).unwrap())
        .collect();
    assert!(open_fds() - baseline <= CACHE + SLACK);
    let mut expected: Vec<Vec<Vec<u8>>> = vec![Vec::new(); LOGS];
    for round in 0..ROUNDS {
        for (i, log) in logs.iter_mut().enumerate() {
            let mut b = batch(3, round, &format!("log{i}-round{round}"), 50 + i);
            log.append(&mut b, &opts(round)).unwrap();
            expected[i].push(b);
            let held = open_fds() - baseline;
            assert!(held <= CACHE + SLACK, "{held} descriptors while appending");
        }
    }
    for log in &logs {
        assert_eq!(log.segment_count(), 1, "one active segment each");
    }
    // Less than index.interval.bytes each: no index entry, so no index file mapped
    // (a process may hold only vm.max_map_count maps).
    let root_name = root.path().to_string_lossy().into_owned();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let mapped = maps.lines().filter(|l| l.contains(&root_name)).count();
    assert_eq!(mapped, 0, "index files without entries are not mapped");
    for (log, want) in logs.iter().zip(&expected) {
        assert_eq!(&read_all(log, 0), want, "byte for byte");
        assert!(open_fds() - baseline <= CACHE + SLACK);
    }

    // Log 0's descriptor is long evicted: append to it (reopens), let the cache evict
    // it again by reading the others, then fsync it through the durability state.
    let first_log = dir(0).join(format!("{:020}.log", 0));
    let mut extra = batch(2, 99, "after-eviction", 80);
    logs[0].append(&mut extra, &opts(99)).unwrap();
    expected[0].push(extra);
    for log in &logs[1..] {
        read_all(log, 0);
    }
    assert!(!is_open(&first_log), "log 0's descriptor was evicted");
    assert!(logs[0].recovery_point() < logs[0].log_end_offset());
    let handle = logs[0].durability();
    logs[0].flush().unwrap();
    assert_eq!(handle.durable_offset(), logs[0].log_end_offset());
    assert_eq!(logs[0].recovery_point(), logs[0].log_end_offset());
    // Every other log flushes too, each reopening its file within the bound.
    for log in &mut logs[1..] {
        log.flush().unwrap();
        assert!(open_fds() - baseline <= CACHE + SLACK);
    }
    drop(handle);

    // A crash-style drop (no clean-shutdown marker): recovery scans the logs again.
    drop(logs);
    assert_eq!(open_fds(), baseline, "dropped logs leave nothing open");
    let wanted = (0..LOGS).map(|i| (dir(i), cfg.clone())).collect();
    let mut logs: Vec<Log> = open_logs(wanted, 4)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert!(open_fds() - baseline <= CACHE + SLACK, "after recovery");
    for (log, want) in logs.iter().zip(&expected) {
        assert_eq!(&read_all(log, 0), want, "survives a reopen after evictions");
    }
    // Appends after the reopen, then a clean close and another reopen.
    for (i, log) in logs.iter_mut().enumerate() {
        let mut b = batch(1, 200, &format!("log{i}-reopened"), 30);
        log.append(&mut b, &opts(200)).unwrap();
        expected[i].push(b);
        assert!(open_fds() - baseline <= CACHE + SLACK);
    }
    for log in logs {
        log.close().unwrap();
    }
    assert_eq!(open_fds(), baseline, "closed logs leave nothing open");
    let wanted = (0..LOGS).map(|i| (dir(i), cfg.clone())).collect();
    let logs: Vec<Log> = open_logs(wanted, 4)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    for (log, want) in logs.iter().zip(&expected) {
        assert!(log.durability().clean_shutdown_marker_present());
        assert_eq!(&read_all(log, 0), want);
    }
    assert!(open_fds() - baseline <= CACHE + SLACK);
    drop(logs);
    assert_eq!(open_fds(), baseline);
}
