//! No fsync on an async worker: a produce that rolls segments, or is the first write
//! after a clean restart, syncs nothing on the worker that runs it; what must be
//! durable is synced on blocking threads (the flusher, a group-commit waiter).

use std::sync::Arc;

use tidelog_storage::{
    fsyncs_on_this_thread, AppendOptions, AppendOrigin, BackgroundFlusher, BatchBuilder, Log,
    LogConfig,
};
use uuid::Uuid;

use super::partition::Partition;
use super::state::ImageAssignment;

fn small_segments(flush_messages: u64) -> LogConfig {
    LogConfig {
        segment_bytes: 4_000,
        index_interval_bytes: 200,
        flush_messages,
        ..LogConfig::default()
    }
}

fn batch(tag: &str) -> Vec<u8> {
    BatchBuilder::new()
        .kv(Some(b"k"), Some(format!("{tag:-<300}").as_bytes()), 1_000)
        .build()
        .unwrap()
}

/// A partition on a log that was closed cleanly (its marker on disk), as after a
/// restart, handing its fsyncs to `flusher`.
fn reopened(dir: &std::path::Path, config: LogConfig, flusher: &BackgroundFlusher) -> Partition {
    let mut log = Log::open(dir, config.clone()).unwrap();
    let opts = AppendOptions {
        leader_epoch: 0,
        now_ms: 1_000,
        origin: AppendOrigin::Client,
    };
    log.append(&mut batch("before"), &opts).unwrap();
    log.close().unwrap();
    let mut log = Log::open(dir, config).unwrap();
    log.set_background_flusher(Some(flusher.clone()));
    Partition::new("t".into(), Uuid::nil(), 0, 0, log)
}

#[tokio::test(flavor = "current_thread")]
async fn produces_that_roll_sync_nothing_on_the_async_worker() {
    let dir = tempfile::tempdir().unwrap();
    let flusher = BackgroundFlusher::start(1).unwrap();
    let p = reopened(&dir.path().join("t-0"), small_segments(u64::MAX), &flusher);
    assert!(p.durability().clean_shutdown_marker_present());
    let worker = fsyncs_on_this_thread();
    for i in 0..40 {
        p.ready_for_writes().await;
        let (_, sync) = p
            .append_deferring_sync(&mut batch(&i.to_string()), 1_000)
            .unwrap();
        assert!(sync.is_none());
    }
    assert_eq!(
        fsyncs_on_this_thread(),
        worker,
        "an fsync ran on the worker"
    );
    assert!(!p.durability().clean_shutdown_marker_present());
    let segments = p.with_log(|log| Ok(log.segment_count())).unwrap();
    assert!(segments > 3, "the produces rolled");
    flusher.shutdown();
    assert_eq!(p.durability().segments_awaiting_sync(), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_produce_waiting_for_flush_messages_waits_off_the_worker() {
    let dir = tempfile::tempdir().unwrap();
    let flusher = BackgroundFlusher::start(1).unwrap();
    let p = Arc::new(reopened(
        &dir.path().join("t-0"),
        small_segments(1),
        &flusher,
    ));
    let worker = fsyncs_on_this_thread();
    let mut end = 0;
    for i in 0..20 {
        p.ready_for_writes().await;
        let (done, sync) = p
            .append_deferring_sync(&mut batch(&i.to_string()), 1_000)
            .unwrap();
        let sync = sync.expect("flush.messages=1 asks for a sync");
        // As the produce path does: the wait runs on a blocking thread.
        tokio::task::spawn_blocking(move || sync.wait())
            .await
            .unwrap()
            .unwrap();
        end = done.end_offset;
    }
    assert_eq!(fsyncs_on_this_thread(), worker);
    assert_eq!(p.durability().durable_offset(), end);
    assert_eq!(
        p.durability().segments_awaiting_sync(),
        0,
        "the waits synced rolled segments"
    );
    flusher.shutdown();
}

#[test]
fn a_follower_append_is_durable_when_flush_messages_asks_before_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let flusher = BackgroundFlusher::manual();
    let leader = {
        let log = Log::open(&dir.path().join("leader"), LogConfig::default()).unwrap();
        Partition::new("t".into(), Uuid::nil(), 0, 0, log)
    };
    let follower = reopened(&dir.path().join("follower"), small_segments(1), &flusher).hosted_by(2);
    let assignment = ImageAssignment {
        leader: 1,
        leader_epoch: 1,
        partition_epoch: 1,
        replicas: vec![1, 2],
        isr: vec![1, 2],
        min_isr: 1,
    };
    follower.apply_assignment(&assignment, 0);
    // The follower's log already holds offset 0 from before its restart.
    let mut first = batch("before");
    leader.append(&mut first, 1_000).unwrap();
    for i in 0..10 {
        leader.append(&mut batch(&i.to_string()), 1_000).unwrap();
    }
    let read = leader.read_for_follower(1, 1 << 20).unwrap();
    let bytes = read.slice.unwrap().read_to_vec().unwrap();
    follower.append_replicated(1, 1, &bytes, 0, 0).unwrap();
    let end = follower.with_log(|log| Ok(log.log_end_offset())).unwrap();
    assert_eq!(end, 11);
    assert_eq!(follower.durability().durable_offset(), end);
}
