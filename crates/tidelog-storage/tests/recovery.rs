//! Crash recovery: torn tails, corrupt batches, lost or damaged indexes, durability.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;

use common::{append_in_epochs, batch, files_with_ext, opts, read_all};
use tidelog_storage::{BatchBuilder, Log, LogConfig};

fn cfg() -> LogConfig {
    LogConfig {
        segment_bytes: 4000,
        index_interval_bytes: 200,
        ..LogConfig::default()
    }
}

fn fill(log: &mut Log, n: i64) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut b = batch(2, i * 10, "c", 100);
            log.append(&mut b, &opts(i)).unwrap();
            b
        })
        .collect()
}

#[test]
fn torn_tail_is_cut_at_the_last_whole_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    let written = fill(&mut log, 30);
    log.flush().unwrap();
    let durable = log.log_end_offset();
    let more = fill(&mut log, 3);
    drop(log); // crash: no clean-shutdown marker
    let active = files_with_ext(dir.path(), "log").pop().unwrap();
    let len = std::fs::metadata(&active).unwrap().len();
    let f = OpenOptions::new().write(true).open(&active).unwrap();
    f.set_len(len - 7).unwrap(); // tear the last batch
    let log = Log::open(dir.path(), cfg()).unwrap();
    assert_eq!(log.log_end_offset(), durable + 4);
    let mut expected = written;
    expected.extend_from_slice(&more[..2]);
    assert_eq!(read_all(&log, 0), expected);
    assert_eq!(log.recovery_point(), log.log_end_offset());
}

#[test]
fn a_crc_failure_cuts_the_log_there_and_is_never_served() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    let written = fill(&mut log, 30);
    log.flush().unwrap();
    let more = fill(&mut log, 4);
    drop(log);
    let active = files_with_ext(dir.path(), "log").pop().unwrap();
    let len = std::fs::metadata(&active).unwrap().len();
    let batch_len = more[0].len() as u64;
    // Damage a value byte in the second-to-last batch.
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&active)
        .unwrap();
    let pos = len - 2 * batch_len + 80;
    let mut byte = [0u8];
    f.read_exact_at(&mut byte, pos).unwrap();
    f.write_all_at(&[byte[0] ^ 0x20], pos).unwrap();
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    let mut expected = written;
    expected.extend_from_slice(&more[..2]);
    assert_eq!(read_all(&log, 0), expected);
    // Offsets continue from the cut.
    let next = log.append(&mut batch(1, 0, "n", 1), &opts(0)).unwrap();
    assert_eq!(next.first_offset, 64);
}

#[test]
fn flush_messages_one_makes_every_append_durable() {
    let dir = tempfile::tempdir().unwrap();
    let c = LogConfig {
        flush_messages: 1,
        ..cfg()
    };
    let mut log = Log::open(dir.path(), c.clone()).unwrap();
    for i in 0..5 {
        log.append(&mut batch(1, i, "s", 10), &opts(i)).unwrap();
        assert_eq!(log.recovery_point(), log.log_end_offset());
    }
    let c2 = LogConfig {
        flush_messages: 10,
        ..cfg()
    };
    log.set_config(c2);
    log.append(&mut batch(3, 0, "s", 10), &opts(0)).unwrap();
    assert_eq!(log.recovery_point(), 5);
    log.append(&mut batch(7, 0, "s", 10), &opts(0)).unwrap();
    assert_eq!(log.recovery_point(), 15);
    // flush.ms
    let c3 = LogConfig {
        flush_ms: 100,
        ..cfg()
    };
    log.set_config(c3);
    log.flush_if_due(1000).unwrap();
    log.append(&mut batch(1, 0, "s", 10), &opts(0)).unwrap();
    log.flush_if_due(1050).unwrap();
    assert_eq!(log.recovery_point(), 15);
    log.flush_if_due(1100).unwrap();
    assert_eq!(log.recovery_point(), 16);
}

#[test]
fn missing_and_corrupt_indexes_are_rebuilt_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    let written = fill(&mut log, 60);
    let ts_hit = log.offset_for_timestamp(333).unwrap();
    assert_eq!(ts_hit, Some((68, 340)));
    log.close().unwrap();
    let indexes = files_with_ext(dir.path(), "index");
    assert!(indexes.len() >= 3);
    std::fs::remove_file(&indexes[0]).unwrap();
    std::fs::write(&indexes[1], [0xffu8; 24]).unwrap();
    let times = files_with_ext(dir.path(), "timeindex");
    std::fs::write(&times[1], [0x7fu8; 7]).unwrap();
    let log = Log::open(dir.path(), cfg()).unwrap();
    assert_eq!(read_all(&log, 0), written);
    assert_eq!(log.offset_for_timestamp(333).unwrap(), ts_hit);
    for i in (0..120).step_by(7) {
        let r = log.read(i, 1, i64::MAX).unwrap();
        assert_eq!(r.first_batch_offset, i - i % 2);
    }
    assert!(files_with_ext(dir.path(), "index")[0].exists());
}

#[test]
fn producer_state_survives_crash_and_clean_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    for i in 0..40 {
        let mut b = BatchBuilder::new().producer(i % 3, 0, (i / 3) as i32 * 2);
        b = b
            .kv(Some(b"k"), Some(&[0u8; 150]), 1)
            .kv(Some(b"k"), Some(b"v"), 2);
        log.append(&mut b.build().unwrap(), &opts(0)).unwrap();
    }
    assert!(log.segment_count() > 2);
    let state = log.producer_state().clone();
    assert_eq!(state.get(0).unwrap().batches.len(), 5);
    drop(log);
    let log = Log::open(dir.path(), cfg()).unwrap();
    assert_eq!(log.producer_state(), &state);
    log.close().unwrap();
    let log = Log::open(dir.path(), cfg()).unwrap();
    assert_eq!(log.producer_state(), &state);
    assert!(!files_with_ext(dir.path(), "snapshot").is_empty());
}

#[test]
fn leader_epochs_missing_from_their_checkpoint_are_rebuilt_from_the_rescan() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    append_in_epochs(&mut log, &[0, 0, 3, 3, 5, 9], 100);
    let epochs = log.leader_epochs().to_vec();
    assert_eq!(epochs.len(), 4);
    // A new epoch asks for no checkpoint pass of its own: nothing wrote the file yet.
    assert!(!dir.path().join("leader-epoch-checkpoint").exists());
    drop(log); // crash
    let log = Log::open(dir.path(), cfg()).unwrap();
    assert_eq!(log.leader_epochs(), epochs.as_slice());
}
