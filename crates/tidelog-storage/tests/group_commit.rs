//! Group commit (`Log::append_group_commit` + `PendingSync::wait`), and opening many logs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use common::{batch, opts, read_all};
use tidelog_storage::{open_logs, CleanShutdownLists, Log, LogConfig, CLEAN_SHUTDOWN_LIST};

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

/// `n` new logs `t-0`.. under `root`, one record each.
fn logs_with_one_record(root: &std::path::Path, n: usize) -> Vec<Log> {
    (0..n)
        .map(|i| {
            let mut log = Log::open(&root.join(format!("t-{i}")), LogConfig::default()).unwrap();
            log.append(&mut batch(1, 0, "v", 10), &opts(0)).unwrap();
            log
        })
        .collect()
}

/// Opens the logs `t-0`..`t-{n}` under `root` as a broker does at start: the log
/// directory's list of logs closed cleanly is taken first.
fn open_as_at_start(root: &std::path::Path, n: usize) -> Vec<Log> {
    let mut lists = CleanShutdownLists::take(&[root.to_path_buf()]).unwrap();
    assert!(
        !root.join(CLEAN_SHUTDOWN_LIST).exists(),
        "gone before any log opens"
    );
    let wanted = (0..n)
        .map(|i| {
            (
                root.join(format!("t-{i}")),
                uuid::Uuid::nil(),
                LogConfig::default(),
            )
        })
        .collect();
    tidelog_storage::open_partition_logs(wanted, &mut lists, 3)
        .into_iter()
        .map(|opened| opened.unwrap().0)
        .collect()
}

#[test]
fn close_logs_closes_each_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let logs = logs_with_one_record(dir.path(), 10);
    let written: Vec<Vec<Vec<u8>>> = logs.iter().map(|log| read_all(log, 0)).collect();
    // The batch defers every per-file fsync to a few syncfs calls on this thread.
    let before = tidelog_storage::fsyncs_on_this_thread();
    let closed = tidelog_storage::close_logs(logs, 3);
    assert!(tidelog_storage::fsyncs_on_this_thread() - before <= 3);
    assert_eq!(closed.len(), 10);
    for (i, result) in closed.into_iter().enumerate() {
        result.unwrap();
        // One list for the log directory instead of a marker per partition.
        assert!(!dir.path().join(format!("t-{i}/clean-shutdown")).exists());
    }
    assert!(dir.path().join(CLEAN_SHUTDOWN_LIST).exists());
    // Reopened clean: the checkpoints point at the end, nothing to recover, same data.
    let mut logs = open_as_at_start(dir.path(), 10);
    for (log, want) in logs.iter().zip(&written) {
        assert!(log.durability().clean_shutdown_marker_present());
        assert_eq!(log.recovery_point(), log.log_end_offset());
        assert_eq!(&read_all(log, 0), want);
    }

    // The first writes after the clean start: nothing on disk to remove (the list went
    // before the logs opened), so no sync at all.
    let handles: Vec<_> = logs.iter().map(Log::durability).collect();
    let before = tidelog_storage::fsyncs_on_this_thread();
    for result in tidelog_storage::remove_clean_shutdown_markers(&handles) {
        result.unwrap();
    }
    for handle in &handles {
        assert!(!handle.clean_shutdown_marker_present());
    }
    for log in &mut logs {
        log.append(&mut batch(1, 1, "w", 10), &opts(1)).unwrap();
    }
    assert_eq!(tidelog_storage::fsyncs_on_this_thread(), before);
    drop(handles);
    let closed = tidelog_storage::close_logs(logs, 2);
    assert!(closed.iter().all(Result::is_ok));
    for log in open_as_at_start(dir.path(), 10) {
        assert!(log.durability().clean_shutdown_marker_present());
        assert_eq!(log.log_end_offset(), 2);
    }
}

#[test]
fn a_log_changed_since_the_list_was_written_is_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let logs = logs_with_one_record(dir.path(), 3);
    assert!(tidelog_storage::close_logs(logs, 2)
        .iter()
        .all(Result::is_ok));
    // Something that does not take the list (an older release, a tool) appends to t-1
    // and crashes: the list still names t-1, but t-1 no longer ends where it says.
    let mut changed = Log::open(&dir.path().join("t-1"), LogConfig::default()).unwrap();
    assert!(!changed.durability().clean_shutdown_marker_present());
    changed
        .append(&mut batch(1, 1, "late", 10), &opts(1))
        .unwrap();
    drop(changed);
    let logs = open_as_at_start(dir.path(), 3);
    let clean: Vec<bool> = logs
        .iter()
        .map(|log| log.durability().clean_shutdown_marker_present())
        .collect();
    assert_eq!(clean, [true, false, true]);
    assert_eq!(
        logs[1].log_end_offset(),
        2,
        "recovered with its late record"
    );

    // A crash after a clean start: the list is gone, so every log is recovered.
    drop(logs);
    for log in open_as_at_start(dir.path(), 3) {
        assert!(!log.durability().clean_shutdown_marker_present());
    }
}

#[test]
fn a_listed_log_keeps_its_epochs_and_its_files_catch_up_after_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let mut log = Log::open(&path, LogConfig::default()).unwrap();
    common::append_in_epochs(&mut log, &[0, 0, 3, 3, 7], 10);
    log.flush().unwrap(); // files as a flusher pass leaves them: epochs 0, 3, 7 up to 10
    common::append_in_epochs(&mut log, &[9, 9], 10);
    let epochs = log.leader_epochs().to_vec();
    let written = read_all(&log, 0);
    let epochs_file = std::fs::read(path.join("leader-epoch-checkpoint")).unwrap();
    let recovery_file = std::fs::read(path.join("recovery-point-offset-checkpoint")).unwrap();
    assert!(tidelog_storage::close_logs(vec![log], 1)
        .iter()
        .all(Result::is_ok));
    // The close wrote neither file: the list entry holds the epochs, and the pair on
    // disk is the older one, consistent on its own.
    assert_eq!(
        std::fs::read(path.join("leader-epoch-checkpoint")).unwrap(),
        epochs_file
    );
    assert_eq!(
        std::fs::read(path.join("recovery-point-offset-checkpoint")).unwrap(),
        recovery_file
    );

    let mut opened = open_as_at_start(dir.path(), 1);
    let log = opened.remove(0);
    assert!(log.durability().clean_shutdown_marker_present());
    assert_eq!(log.leader_epochs(), epochs.as_slice());
    assert_eq!(log.recovery_point(), 14);
    // A crash now: no list any more, the older pair on disk, the rest rescanned.
    drop(log);
    let log = Log::open(&path, LogConfig::default()).unwrap();
    assert!(!log.durability().clean_shutdown_marker_present());
    assert_eq!(log.leader_epochs(), epochs.as_slice());
    assert_eq!(read_all(&log, 0), written);
    drop(log);

    // Closed and started again; the owner's catch-up pass (on this thread without a
    // flusher) writes both files.
    let closed =
        tidelog_storage::close_logs(vec![Log::open(&path, LogConfig::default()).unwrap()], 1);
    assert!(closed.iter().all(Result::is_ok));
    let mut log = open_as_at_start(dir.path(), 1).remove(0);
    assert_eq!(log.leader_epochs(), epochs.as_slice());
    assert!(log.checkpoint_if_stale().unwrap());
    assert!(!log.checkpoint_if_stale().unwrap(), "once");
    assert_eq!(
        std::fs::read_to_string(path.join("recovery-point-offset-checkpoint")).unwrap(),
        "0\n1\n14\n"
    );
    assert_eq!(
        std::fs::read_to_string(path.join("leader-epoch-checkpoint")).unwrap(),
        "0\n4\n0 0\n3 4\n7 8\n9 10\n"
    );
    // Still as the close left it: the pass changed no data.
    assert!(log.durability().clean_shutdown_marker_present());
    drop(log);
    let log = Log::open(&path, LogConfig::default()).unwrap();
    assert_eq!(log.leader_epochs(), epochs.as_slice());
}
