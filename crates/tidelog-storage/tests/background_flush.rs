//! The background flusher: a roll on the append path syncs nothing on the appending
//! thread, the recovery point follows only what a flusher pass actually synced, and a
//! crash before that pass loses nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::{append_in_epochs, batch, files_with_ext, opts, read_all};
use tidelog_storage::{
    fsyncs_on_this_thread, AppendOptions, AppendOrigin, BackgroundFlusher, FlushFailureObserver,
    Log, LogConfig,
};

fn cfg() -> LogConfig {
    LogConfig {
        segment_bytes: 4000,
        index_interval_bytes: 200,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, config: LogConfig, flusher: &BackgroundFlusher) -> Log {
    let mut log = Log::open(dir, config).unwrap();
    log.set_background_flusher(Some(flusher.clone()));
    log
}

/// `n` batches of two ~100-byte records: with `cfg()` a segment rolls every dozen.
fn append_many(log: &mut Log, n: i64, tag: &str) {
    for i in 0..n {
        log.append(&mut batch(2, i, tag, 100), &opts(i)).unwrap();
    }
}

fn recovery_checkpoint(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join("recovery-point-offset-checkpoint")).ok()
}

#[test]
fn a_roll_on_append_syncs_nothing_on_the_appending_thread() {
    let dir = tempfile::tempdir().unwrap();
    let flusher = BackgroundFlusher::start(1).unwrap();
    let mut log = open(dir.path(), cfg(), &flusher);
    let appender = std::thread::current().id();
    let observed_here = Arc::new(Mutex::new(0usize));
    let seen = Arc::clone(&observed_here);
    log.set_flush_observer(Some(Arc::new(move |_| {
        if std::thread::current().id() == appender {
            *seen.lock().unwrap() += 1;
        }
    })));
    let before = fsyncs_on_this_thread();
    append_many(&mut log, 60, "v");
    log.roll_if_due(i64::MAX).unwrap();
    log.write_checkpoints().unwrap();
    assert!(log.segment_count() > 5, "the appends rolled");
    assert_eq!(
        fsyncs_on_this_thread(),
        before,
        "an fsync ran on the appender"
    );
    assert_eq!(*observed_here.lock().unwrap(), 0);

    flusher.shutdown();
    let durability = log.durability();
    assert_eq!(durability.segments_awaiting_sync(), 0);
    let active = *log.segment_base_offsets().last().unwrap();
    assert_eq!(log.recovery_point(), active);
    assert_eq!(
        recovery_checkpoint(dir.path()),
        Some(format!("0\n1\n{active}\n"))
    );
    log.close().unwrap();
}

#[test]
fn a_crash_before_the_background_flush_recovers_every_batch() {
    let dir = tempfile::tempdir().unwrap();
    let flusher = BackgroundFlusher::manual();
    let mut log = open(dir.path(), cfg(), &flusher);
    append_many(&mut log, 60, "v");
    let written = read_all(&log, 0);
    assert!(log.segment_count() > 3);
    assert!(log.durability().segments_awaiting_sync() > 2);
    assert_eq!(log.recovery_point(), 0);
    drop(log); // crash: the flusher never ran
    assert_eq!(
        flusher.run_pending(),
        1,
        "the queued pass finds the log gone"
    );
    assert_eq!(recovery_checkpoint(dir.path()), None);

    let log = open(dir.path(), cfg(), &flusher);
    assert_eq!(read_all(&log, 0), written);
    // The reopened log syncs the rescanned segments like freshly rolled ones.
    assert!(log.durability().segments_awaiting_sync() > 2);
    assert_eq!(log.recovery_point(), 0);
}

#[test]
fn an_unsynced_rolled_segment_is_rescanned_and_a_bad_batch_in_it_never_served() {
    let dir = tempfile::tempdir().unwrap();
    let flusher = BackgroundFlusher::manual();
    let mut log = open(dir.path(), cfg(), &flusher);
    append_many(&mut log, 60, "v");
    let written = read_all(&log, 0);
    drop(log);
    // The crash damaged the first segment, which had rolled but was never synced.
    let first = &files_with_ext(dir.path(), "log")[0];
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(first)
        .unwrap();
    let batch_len = written[0].len() as u64;
    let pos = 3 * batch_len + 90;
    let mut byte = [0u8];
    f.read_exact_at(&mut byte, pos).unwrap();
    f.write_all_at(&[byte[0] ^ 0x10], pos).unwrap();

    let log = open(dir.path(), cfg(), &flusher);
    assert_eq!(read_all(&log, 0), written[..3].to_vec());
    assert_eq!(log.segment_count(), 1, "segments after the cut are dropped");
}

#[test]
fn the_recovery_point_follows_only_what_a_flusher_pass_synced() {
    let dir = tempfile::tempdir().unwrap();
    let flusher = BackgroundFlusher::manual();
    let mut log = open(dir.path(), cfg(), &flusher);
    append_many(&mut log, 30, "v");
    log.write_checkpoints().unwrap();
    assert!(log.segment_count() > 1);
    assert_eq!(log.recovery_point(), 0);
    assert_eq!(recovery_checkpoint(dir.path()), None);

    assert_eq!(flusher.run_pending(), 1);
    let active = *log.segment_base_offsets().last().unwrap();
    // The rolled segments are synced; the active one's tail is not.
    assert_eq!(log.recovery_point(), active);
    assert!(active < log.log_end_offset());
    assert_eq!(
        recovery_checkpoint(dir.path()),
        Some(format!("0\n1\n{active}\n"))
    );

    // flush.ms asks the flusher for the active segment too.
    log.set_config(LogConfig {
        flush_ms: 10,
        ..cfg()
    });
    log.flush_if_due(1_000).unwrap();
    log.append(&mut batch(1, 0, "w", 10), &opts(1_000)).unwrap();
    log.flush_if_due(1_020).unwrap();
    assert!(
        log.recovery_point() < log.log_end_offset(),
        "not synced yet"
    );
    flusher.run_pending();
    assert_eq!(log.recovery_point(), log.log_end_offset());
}

#[test]
fn a_group_commit_wait_after_a_roll_syncs_the_rolled_segment_first() {
    let dir = tempfile::tempdir().unwrap();
    let flusher = BackgroundFlusher::manual();
    let config = LogConfig {
        flush_messages: 1,
        ..cfg()
    };
    let mut log = open(dir.path(), config, &flusher);
    let mut last = None;
    for i in 0..30 {
        let (_, pending) = log
            .append_group_commit(&mut batch(2, i, "v", 100), &opts(i))
            .unwrap();
        last = pending;
    }
    assert!(log.segment_count() > 1);
    let before = fsyncs_on_this_thread();
    std::thread::spawn(move || last.unwrap().wait().unwrap())
        .join()
        .unwrap();
    assert_eq!(fsyncs_on_this_thread(), before);
    let durability = log.durability();
    assert_eq!(durability.durable_offset(), log.log_end_offset());
    assert_eq!(durability.segments_awaiting_sync(), 0);
    assert_eq!(log.recovery_point(), log.log_end_offset());
}

#[test]
fn epochs_the_checkpoint_missed_are_rebuilt_from_the_rescanned_batches() {
    let dir = tempfile::tempdir().unwrap();
    let flusher = BackgroundFlusher::manual();
    let mut log = open(dir.path(), cfg(), &flusher);
    append_in_epochs(&mut log, &[0, 0, 3, 3, 5, 9], 500);
    let epochs = log.leader_epochs().to_vec();
    assert_eq!(epochs.len(), 4);
    assert!(!dir.path().join("leader-epoch-checkpoint").exists());
    drop(log);
    let log = open(dir.path(), cfg(), &flusher);
    assert_eq!(log.leader_epochs(), epochs.as_slice());
}

#[test]
fn a_new_leader_epoch_costs_no_fsync() {
    let dir = tempfile::tempdir().unwrap();
    // No flusher: a pass asked for would run, and sync, on this thread.
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    let before = fsyncs_on_this_thread();
    append_in_epochs(&mut log, &[0, 2, 2, 7], 10);
    assert_eq!(fsyncs_on_this_thread(), before);
    assert!(!dir.path().join("leader-epoch-checkpoint").exists());
}

#[test]
fn the_epochs_file_holds_every_epoch_below_a_recovery_point_written() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        flush_messages: 1,
        ..cfg()
    };
    let mut log = Log::open(dir.path(), config).unwrap();
    append_in_epochs(&mut log, &[0, 4], 10);
    // A group-commit fdatasync moves the durable offset past epoch 4's start without
    // any checkpoint pass; a checkpoint written from outside the log (DeleteRecords
    // does) must then carry the epoch with the recovery point.
    let o = AppendOptions {
        leader_epoch: 6,
        now_ms: 9,
        origin: AppendOrigin::Client,
    };
    let (_, pending) = log
        .append_group_commit(&mut batch(2, 9, "e", 10), &o)
        .unwrap();
    pending.unwrap().wait().unwrap();
    log.durability().write_checkpoints().unwrap();
    let end = log.log_end_offset();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("recovery-point-offset-checkpoint")).unwrap(),
        format!("0\n1\n{end}\n")
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("leader-epoch-checkpoint")).unwrap(),
        "0\n3\n0 0\n4 2\n6 4\n"
    );
}

#[test]
fn close_makes_everything_durable_and_a_late_pass_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let flusher = BackgroundFlusher::manual();
    let mut log = open(dir.path(), cfg(), &flusher);
    append_many(&mut log, 30, "v");
    let written = read_all(&log, 0);
    let end = log.log_end_offset();
    log.close().unwrap();
    assert!(dir.path().join("clean-shutdown").exists());
    assert_eq!(
        recovery_checkpoint(dir.path()),
        Some(format!("0\n1\n{end}\n"))
    );
    let checkpoint_time = std::fs::metadata(dir.path().join("recovery-point-offset-checkpoint"))
        .unwrap()
        .modified()
        .unwrap();
    flusher.run_pending();
    assert_eq!(
        std::fs::metadata(dir.path().join("recovery-point-offset-checkpoint"))
            .unwrap()
            .modified()
            .unwrap(),
        checkpoint_time
    );
    let log = open(dir.path(), cfg(), &flusher);
    assert_eq!(read_all(&log, 0), written);
    assert_eq!(log.recovery_point(), end);
}

#[test]
fn with_the_marker_removed_beforehand_the_first_writes_sync_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let flusher = BackgroundFlusher::start(1).unwrap();
    let mut log = open(dir.path(), cfg(), &flusher);
    log.append(&mut batch(2, 0, "a", 100), &opts(0)).unwrap();
    log.close().unwrap();

    let mut log = open(dir.path(), cfg(), &flusher);
    let durability = log.durability();
    assert!(durability.clean_shutdown_marker_present());
    // The owner removes it off its lock, on another thread.
    std::thread::spawn(move || durability.remove_clean_shutdown_marker().unwrap())
        .join()
        .unwrap();
    assert!(!dir.path().join("clean-shutdown").exists());
    let before = fsyncs_on_this_thread();
    append_many(&mut log, 40, "b");
    assert!(log.segment_count() > 2);
    assert_eq!(fsyncs_on_this_thread(), before);
    let written = read_all(&log, 0);
    flusher.shutdown();
    drop(log); // crash
    let log = Log::open(dir.path(), cfg()).unwrap();
    assert_eq!(read_all(&log, 0), written);
}

#[test]
fn a_failed_pass_is_reported_and_later_waits_fail() {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = dir.path().join("t-0");
    let flusher = BackgroundFlusher::manual();
    let failures = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&failures);
    let observer: FlushFailureObserver = Arc::new(move |dir, _| {
        seen.lock().unwrap().push(dir.to_path_buf());
    });
    flusher.set_failure_observer(Some(observer));
    let mut log = open(&log_dir, cfg(), &flusher);
    append_many(&mut log, 30, "v");
    // The directory vanishes under the log (a disk unmounted, an operator's rm).
    std::fs::remove_dir_all(&log_dir).unwrap();
    assert_eq!(flusher.run_pending(), 1);
    assert_eq!(*failures.lock().unwrap(), vec![log_dir.clone()]);
    assert_eq!(log.recovery_point(), 0, "nothing was claimed durable");
    assert!(log.durability().wait_durable(log.log_end_offset()).is_err());
}

#[test]
fn an_unsynced_rolled_segment_that_lost_its_tail_drops_the_later_segments() {
    let dir = tempfile::tempdir().unwrap();
    let flusher = BackgroundFlusher::manual();
    let mut log = open(dir.path(), cfg(), &flusher);
    append_many(&mut log, 60, "v");
    let written = read_all(&log, 0);
    assert!(log.segment_count() > 3);
    drop(log);
    // A power cut kept the later segments' pages but not the end of the first one,
    // which had rolled and was never synced: it now ends cleanly after three batches.
    let first = &files_with_ext(dir.path(), "log")[0];
    let batch_len = written[0].len() as u64;
    OpenOptions::new()
        .write(true)
        .open(first)
        .unwrap()
        .set_len(3 * batch_len)
        .unwrap();

    let log = open(dir.path(), cfg(), &flusher);
    assert_eq!(read_all(&log, 0), written[..3].to_vec());
    assert_eq!(log.log_end_offset(), 6, "no hole is served");
    assert_eq!(log.segment_count(), 1, "segments after the cut are dropped");
}

#[test]
fn a_follower_gap_starts_the_next_segment_where_the_last_ended_and_survives_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let flusher = BackgroundFlusher::manual();
    let mut log = open(dir.path(), cfg(), &flusher);
    // The leader compacted five offsets away after every two-record batch.
    let mut sent = Vec::new();
    for i in 0..40i64 {
        let mut b = batch(2, i, "f", 100);
        b[0..8].copy_from_slice(&(i * 7).to_be_bytes());
        log.append_as_follower(&b).unwrap();
        sent.push(b);
    }
    let bases = log.segment_base_offsets();
    assert!(bases.len() > 2, "the appends rolled");
    for base in &bases[1..] {
        assert_eq!(
            base % 7,
            2,
            "segment {base} starts at the end of the last batch"
        );
    }
    drop(log); // crash: nothing was synced
    let log = open(dir.path(), cfg(), &flusher);
    assert_eq!(
        read_all(&log, 0),
        sent,
        "a follower's gaps are not lost tails"
    );
    assert_eq!(log.segment_base_offsets(), bases);
    assert_eq!(log.log_end_offset(), 39 * 7 + 2);
}
