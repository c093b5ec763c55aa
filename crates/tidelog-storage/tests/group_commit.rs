//! Group commit (`Log::append_group_commit` + `PendingSync::wait`), and opening many logs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use common::{batch, opts, read_all};
use tidelog_storage::{open_logs, Log, LogConfig};

fn sync_every_append() -> LogConfig {
    LogConfig {
        flush_messages: 1,
        segment_bytes: 64 * 1024,
        ..LogConfig::default()
    }
}

/// Runs `f` on a thread and fails the test if it does not finish within `limit`.
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).expect("timed out")
}

#[test]
fn appends_written_before_a_sync_share_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Mutex::new(
        Log::open(dir.path(), sync_every_append()).unwrap(),
    ));
    let durability = log.lock().unwrap().durability();
    const THREADS: usize = 16;
    const ROUNDS: usize = 5;
    let barrier = Arc::new(Barrier::new(THREADS));
    let ends = within(Duration::from_secs(60), {
        let log = Arc::clone(&log);
        move || {
            let workers: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (log, barrier) = (Arc::clone(&log), Arc::clone(&barrier));
                    std::thread::spawn(move || {
                        let mut ends = Vec::new();
                        for round in 0..ROUNDS {
                            let (_, pending) = log
                                .lock()
                                .unwrap()
                                .append_group_commit(
                                    &mut batch(2, round as i64, &format!("t{t}"), 50),
                                    &opts(0),
                                )
                                .unwrap();
                            let pending = pending.expect("flush.messages=1 asks for a sync");
                            // Everyone has written before anyone waits: one sync covers all.
                            barrier.wait();
                            pending.wait().unwrap();
                            barrier.wait();
                            ends.push(pending.end_offset());
                        }
                        ends
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap())
                .collect::<Vec<i64>>()
        }
    });
    let log = log.lock().unwrap();
    let end = log.log_end_offset();
    assert_eq!(end, (THREADS * ROUNDS * 2) as i64);
    assert!(ends.iter().all(|&e| e <= durability.durable_offset()));
    assert_eq!(durability.durable_offset(), end);
    // Exactly one fdatasync per round, for 16 appends each.
    assert_eq!(durability.sync_count(), ROUNDS as u64);
    assert_eq!(read_all(&log, 0).len(), THREADS * ROUNDS);
}

#[test]
fn free_running_appenders_all_become_durable_with_fewer_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Mutex::new(
        Log::open(dir.path(), sync_every_append()).unwrap(),
    ));
    let durability = log.lock().unwrap().durability();
    const THREADS: usize = 16;
    const APPENDS: usize = 40;
    let checker = durability.clone();
    within(Duration::from_secs(120), {
        let log = Arc::clone(&log);
        move || {
            let workers: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (log, checker) = (Arc::clone(&log), checker.clone());
                    std::thread::spawn(move || {
                        for i in 0..APPENDS {
                            // 1 KiB batches: the 64 KiB segments roll several times meanwhile.
                            let mut b = batch(1, i as i64, &format!("t{t}"), 1000);
                            let (info, pending) = log
                                .lock()
                                .unwrap()
                                .append_group_commit(&mut b, &opts(0))
                                .unwrap();
                            pending.unwrap().wait().unwrap();
                            assert!(checker.durable_offset() > info.last_offset);
                        }
                    })
                })
                .collect();
            for w in workers {
                w.join().unwrap();
            }
        }
    });
    let mut log = Arc::try_unwrap(log).ok().unwrap().into_inner().unwrap();
    let appends = (THREADS * APPENDS) as u64;
    assert_eq!(log.log_end_offset(), appends as i64);
    assert_eq!(durability.durable_offset(), appends as i64);
    assert!(log.segment_count() > 3, "rolls happened during the run");
    assert!(
        durability.sync_count() <= appends,
        "{} syncs",
        durability.sync_count()
    );
    // The recovery point catches up with what the waiters synced.
    log.write_checkpoints().unwrap();
    assert_eq!(log.recovery_point(), appends as i64);
}

#[test]
fn without_a_flush_policy_no_sync_is_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let (info, pending) = log
        .append_group_commit(&mut batch(3, 0, "x", 10), &opts(0))
        .unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 2));
    assert!(pending.is_none());
    // Waiting on the handle still syncs what is written.
    let d = log.durability();
    d.wait_durable(3).unwrap();
    assert_eq!(d.durable_offset(), 3);
    assert_eq!(d.sync_count(), 1);
    d.wait_durable(3).unwrap();
    assert_eq!(d.sync_count(), 1);
}

#[test]
fn a_wait_for_truncated_data_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), sync_every_append()).unwrap();
    log.append(&mut batch(2, 0, "a", 10), &opts(0)).unwrap();
    let (_, pending) = log
        .append_group_commit(&mut batch(2, 0, "b", 10), &opts(0))
        .unwrap();
    log.truncate_to(2).unwrap();
    let pending = pending.unwrap();
    within(Duration::from_secs(10), move || pending.wait().unwrap());
    let (_, again) = log
        .append_group_commit(&mut batch(1, 0, "c", 10), &opts(0))
        .unwrap();
    let again = again.unwrap();
    assert_eq!(again.end_offset(), 3);
    again.wait().unwrap();
    assert_eq!(log.durability().durable_offset(), 3);
}

#[test]
fn open_logs_opens_many_in_parallel_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let dirs: Vec<_> = (0..20).map(|i| dir.path().join(format!("t-{i}"))).collect();
    for (i, d) in dirs.iter().enumerate() {
        let mut log = Log::open(d, LogConfig::default()).unwrap();
        for _ in 0..=i {
            log.append(&mut batch(1, 0, "v", 10), &opts(0)).unwrap();
        }
        if i % 2 == 0 {
            log.close().unwrap();
        } // odd ones "crash"
    }
    std::fs::write(dir.path().join("not-a-dir"), b"x").unwrap();
    let mut wanted: Vec<_> = dirs
        .iter()
        .map(|d| (d.clone(), LogConfig::default()))
        .collect();
    wanted.push((dir.path().join("not-a-dir"), LogConfig::default()));
    let opened = open_logs(wanted, 4);
    assert_eq!(opened.len(), 21);
    for (i, log) in opened.iter().take(20).enumerate() {
        let log = log.as_ref().unwrap();
        assert_eq!(log.dir(), dirs[i]);
        assert_eq!(log.log_end_offset(), i as i64 + 1);
    }
    assert!(opened[20].is_err());
    assert!(open_logs(Vec::new(), 8).is_empty());
}

#[test]
fn close_logs_closes_each_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let logs: Vec<Log> = (0..10)
        .map(|i| {
            let mut log =
                Log::open(&dir.path().join(format!("t-{i}")), LogConfig::default()).unwrap();
            log.append(&mut batch(1, 0, "v", 10), &opts(0)).unwrap();
            log
        })
        .collect();
    let written: Vec<Vec<Vec<u8>>> = logs.iter().map(|log| read_all(log, 0)).collect();
    // The batch defers every per-file fsync to a few syncfs calls on this thread.
    let before = tidelog_storage::fsyncs_on_this_thread();
    let closed = tidelog_storage::close_logs(logs, 3);
    assert!(tidelog_storage::fsyncs_on_this_thread() - before <= 3);
    assert_eq!(closed.len(), 10);
    for (i, result) in closed.into_iter().enumerate() {
        result.unwrap();
        assert!(dir.path().join(format!("t-{i}/clean-shutdown")).exists());
    }
    // Reopened clean: the checkpoints point at the end, nothing to recover, same data.
    let wanted = (0..10)
        .map(|i| (dir.path().join(format!("t-{i}")), LogConfig::default()))
        .collect();
    let mut logs: Vec<Log> = open_logs(wanted, 3)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    for (log, want) in logs.iter().zip(&written) {
        assert!(log.durability().clean_shutdown_marker_present());
        assert_eq!(log.recovery_point(), log.log_end_offset());
        assert_eq!(&read_all(log, 0), want);
    }

    // The first writes after the clean start: markers removed in one batch.
    let handles: Vec<_> = logs.iter().map(Log::durability).collect();
    for result in tidelog_storage::remove_clean_shutdown_markers(&handles) {
        result.unwrap();
    }
    for (i, handle) in handles.iter().enumerate() {
        assert!(!handle.clean_shutdown_marker_present());
        assert!(!dir.path().join(format!("t-{i}/clean-shutdown")).exists());
    }
    // Nothing left to remove: a second batch is a no-op.
    for result in tidelog_storage::remove_clean_shutdown_markers(&handles) {
        result.unwrap();
    }
    let before = tidelog_storage::fsyncs_on_this_thread();
    for log in &mut logs {
        log.append(&mut batch(1, 1, "w", 10), &opts(1)).unwrap();
    }
    assert_eq!(tidelog_storage::fsyncs_on_this_thread(), before);
    drop(handles);
    let closed = tidelog_storage::close_logs(logs, 2);
    assert!(closed.iter().all(Result::is_ok));
    for i in 0..10 {
        let log = Log::open(&dir.path().join(format!("t-{i}")), LogConfig::default()).unwrap();
        assert_eq!(log.log_end_offset(), 2);
    }
}
