use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use tidelog_storage::{BatchBuilder, Log, LogConfig};
use uuid::Uuid;

use super::super::partition::Partition;
use super::super::state::{ImageAssignment, Role};
use super::*;

fn assignment(leader: i32, epoch: i32, isr: &[i32], min_isr: usize) -> ImageAssignment {
    ImageAssignment {
        leader,
        leader_epoch: epoch,
        partition_epoch: epoch,
        replicas: vec![1, 2, 3],
        isr: isr.to_vec(),
        min_isr,
    }
}

fn partition(dir: &tempfile::TempDir, name: &str, node: i32) -> Arc<Partition> {
    let log = Log::open(&dir.path().join(name), LogConfig::default()).unwrap();
    Arc::new(Partition::new("t".into(), Uuid::nil(), 0, 0, log).hosted_by(node))
}

fn batch(values: &[&str]) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for v in values {
        b = b.kv(Some(b"k"), Some(v.as_bytes()), 1000);
    }
    b.build().unwrap()
}

const SHORT: Duration = Duration::from_millis(50);
const LONG: Duration = Duration::from_secs(5);

#[tokio::test]
async fn acks_all_waits_for_every_isr_member() {
    let dir = tempfile::tempdir().unwrap();
    let p = partition(&dir, "t-0", 1);
    p.apply_assignment(&assignment(1, 1, &[1, 2, 3], 2), 0);
    assert_eq!(p.check_min_isr(), Ok(()));
    let done = p.append(&mut batch(&["a", "b"]), 1000).unwrap();
    assert_eq!(
        (done.base_offset, done.end_offset, done.leader_epoch),
        (0, 2, 1)
    );
    assert_eq!(p.offsets().unwrap().high_watermark, 0);
    // Nobody has fetched: times out.
    assert_eq!(
        p.wait_replicated(2, 1, SHORT)
            .await
            .map_err(ReplicaError::code),
        Err(ResponseError::RequestTimedOut.code())
    );
    // Consumers see nothing above the HW.
    assert!(p.read(0, 1 << 20, false).unwrap().slice.is_none());
    let waiter = {
        let p = Arc::clone(&p);
        tokio::spawn(async move { p.wait_replicated(2, 1, LONG).await })
    };
    assert_eq!(p.record_follower_fetch(2, 2, 0, 10, 2_000), Ok(false));
    assert_eq!(p.offsets().unwrap().high_watermark, 0, "3 holds it back");
    assert_eq!(p.record_follower_fetch(3, 2, 0, 11, 2_000), Ok(false));
    assert_eq!(p.offsets().unwrap().high_watermark, 2);
    assert_eq!(waiter.await.unwrap(), Ok(()));
    assert!(p.read(0, 1 << 20, false).unwrap().slice.is_some());
    // A follower reads above the HW; a broker that is no replica is refused.
    p.append(&mut batch(&["c"]), 1000).unwrap();
    assert!(p.read_for_follower(2, 1 << 20).unwrap().slice.is_some());
    assert!(p.read(2, 1 << 20, false).unwrap().slice.is_none());
    assert_eq!(
        p.record_follower_fetch(9, 3, 0, 12, 2_000)
            .map_err(ReplicaError::code),
        Err(ResponseError::NotLeaderOrFollower.code())
    );
}

#[tokio::test]
async fn too_small_an_isr_is_refused_before_the_append_and_holds_the_hw_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = partition(&dir, "t-0", 1);
    p.apply_assignment(&assignment(1, 1, &[1], 2), 0);
    assert_eq!(
        p.check_min_isr().map_err(ReplicaError::code),
        Err(ResponseError::NotEnoughReplicas.code())
    );

    p.apply_assignment(&assignment(1, 1, &[1, 2], 2), 0);
    p.record_follower_fetch(2, 0, 0, 1, 2_000).unwrap();
    let done = p.append(&mut batch(&["a"]), 1000).unwrap();
    let waiter = {
        let p = Arc::clone(&p);
        tokio::spawn(async move { p.wait_replicated(done.end_offset, 1, LONG).await })
    };
    tokio::time::sleep(SHORT).await;
    // The controller shrinks the ISR to the leader alone: fewer than
    // min.insync.replicas hold the batch, so the HW stays below it and the writer
    // keeps waiting instead of being told its kept record failed.
    let mut shrunk = assignment(1, 1, &[1], 2);
    shrunk.partition_epoch = 2;
    p.apply_assignment(&shrunk, 2);
    tokio::time::sleep(SHORT).await;
    assert_eq!(p.offsets().unwrap().high_watermark, 0);
    assert!(!waiter.is_finished());
    // The follower catches up and is back in the ISR: the write is committed.
    p.record_follower_fetch(2, done.end_offset, 0, 3, 2_000)
        .unwrap();
    let mut whole = assignment(1, 1, &[1, 2], 2);
    whole.partition_epoch = 3;
    p.apply_assignment(&whole, 3);
    assert_eq!(waiter.await.unwrap(), Ok(()));
    assert_eq!(p.offsets().unwrap().high_watermark, done.end_offset);
}

#[tokio::test]
async fn losing_leadership_answers_not_leader() {
    let dir = tempfile::tempdir().unwrap();
    let p = partition(&dir, "t-0", 1);
    p.apply_assignment(&assignment(1, 1, &[1, 2], 1), 0);
    let done = p.append(&mut batch(&["a"]), 1000).unwrap();
    let waiter = {
        let p = Arc::clone(&p);
        tokio::spawn(async move { p.wait_replicated(done.end_offset, 1, LONG).await })
    };
    tokio::time::sleep(SHORT).await;
    p.apply_assignment(&assignment(2, 2, &[2], 1), 1);
    assert_eq!(
        waiter.await.unwrap().map_err(ReplicaError::code),
        Err(ResponseError::NotLeaderOrFollower.code())
    );
    assert_eq!(p.role(), Role::Follower { leader: 2 });
    assert!(matches!(
        p.append(&mut batch(&["b"]), 1000),
        Err(super::super::PartitionError::NotLeader)
    ));
}

#[test]
fn a_sole_replica_commits_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let p = partition(&dir, "t-0", 1);
    let mut one = assignment(1, 0, &[1], 1);
    one.replicas = vec![1];
    p.apply_assignment(&one, 0);
    let done = p.append(&mut batch(&["a", "b", "c"]), 1000).unwrap();
    assert_eq!(p.offsets().unwrap().high_watermark, 3);
    let s = *p.hw_watch().borrow();
    assert_eq!(replication_outcome(&s, done.end_offset, 0), Some(Ok(())));
}

/// Copies everything the leader has past the follower's end, as a fetch would.
fn replicate(leader: &Partition, follower: &Partition, leader_id: i32) -> usize {
    let (offset, last_epoch, _) = follower.follower_position().unwrap();
    if let Some((epoch, end)) = leader.diverging_epoch(last_epoch, offset) {
        follower.truncate_to_divergence(epoch, end).unwrap();
        return 0;
    }
    leader
        .record_follower_fetch(2, offset, 0, 0, 2_000)
        .unwrap();
    let read = leader.read_for_follower(offset, 1 << 20).unwrap();
    let bytes = read
        .slice
        .map(|s| s.read_to_vec().unwrap())
        .unwrap_or_default();
    let o = leader.offsets().unwrap();
    follower
        .append_replicated(
            leader_id,
            follower.leader_epoch(),
            &bytes,
            o.high_watermark,
            o.log_start,
        )
        .unwrap()
}

#[test]
fn a_follower_copies_the_leader_and_truncates_where_they_diverge() {
    let dir = tempfile::tempdir().unwrap();
    let a = partition(&dir, "a", 1);
    let b = partition(&dir, "b", 2);
    let mut two = assignment(1, 1, &[1, 2], 1);
    two.replicas = vec![1, 2];
    a.apply_assignment(&two, 0);
    b.apply_assignment(&two, 0);
    a.append(&mut batch(&["x0", "x1"]), 1000).unwrap();
    assert!(replicate(&a, &b, 1) > 0);
    replicate(&a, &b, 1);
    assert_eq!(
        b.offsets().unwrap().high_watermark,
        2,
        "HW learnt from the leader"
    );
    // Leader 1 writes offsets 2..4 in epoch 1 that never reach follower 2.
    a.append(&mut batch(&["lost0", "lost1"]), 1000).unwrap();
    // 2 becomes leader in epoch 2 and writes its own offsets 2..3.
    let mut b_leads = assignment(2, 2, &[2], 1);
    b_leads.replicas = vec![1, 2];
    b.apply_assignment(&b_leads, 1);
    a.apply_assignment(&b_leads, 1);
    b.append(&mut batch(&["y2"]), 1000).unwrap();
    // 1 fetches with last epoch 1 at offset 4: diverges at 2 and is cut there.
    let (offset, last_epoch, _) = a.follower_position().unwrap();
    assert_eq!((offset, last_epoch), (4, 1));
    assert_eq!(b.diverging_epoch(1, 4), Some((1, 2)));
    let cut = a.truncate_to_divergence(1, 2).unwrap().unwrap();
    assert_eq!((cut.old_end, cut.new_end), (4, 2));
    assert_eq!(
        cut.committed_records_lost(),
        0,
        "the cut records were never committed"
    );
    // Then it copies the new leader's epoch-2 batch: both logs hold the same bytes.
    let bytes = b
        .read_for_follower(2, 1 << 20)
        .unwrap()
        .slice
        .unwrap()
        .read_to_vec()
        .unwrap();
    a.append_replicated(2, 2, &bytes, 3, 0).unwrap();
    assert_eq!(a.follower_position().unwrap(), (3, 2, 0));
    let on_a = a
        .read_for_follower(0, 1 << 20)
        .unwrap()
        .slice
        .unwrap()
        .read_to_vec()
        .unwrap();
    let on_b = b
        .read_for_follower(0, 1 << 20)
        .unwrap()
        .slice
        .unwrap()
        .read_to_vec()
        .unwrap();
    assert_eq!(on_a, on_b);
    // A fetch in a stale epoch does not append.
    assert!(a.append_replicated(2, 1, &bytes, 3, 0).is_err());
}

#[test]
fn truncating_below_the_old_high_watermark_is_counted_as_loss() {
    let t = Truncation {
        old_end: 10,
        new_end: 4,
        old_high_watermark: 8,
    };
    assert_eq!(t.committed_records_lost(), 4);
    let t = Truncation {
        old_end: 10,
        new_end: 9,
        old_high_watermark: 8,
    };
    assert_eq!(t.committed_records_lost(), 0);
}

#[test]
fn fifty_partitions_created_at_once_keep_their_full_isr() {
    // Like __consumer_offsets: 50 partitions opened in the image's leader epoch (0), led
    // here, followed by nodes 2 and 3 whose one fetcher each starts late and then long-polls.
    const LAG: i64 = 2_000;
    let dir = tempfile::tempdir().unwrap();
    let created = 1_000_000;
    let parts: Vec<Arc<Partition>> = (0..50)
        .map(|i| {
            let log = Log::open(&dir.path().join(format!("o-{i}")), LogConfig::default()).unwrap();
            let p = Arc::new(Partition::new("o".into(), Uuid::nil(), i, 0, log).hosted_by(1));
            p.apply_assignment(&assignment(1, 0, &[1, 2, 3], 2), created);
            p
        })
        .collect();
    let wanted = |now: i64| -> Vec<(i32, Vec<i32>)> {
        parts
            .iter()
            .filter_map(|p| {
                let hw = p.offsets().unwrap().high_watermark;
                p.replica_state()
                    .wanted_isr_change(hw, now, LAG)
                    .map(|isr| (p.index, isr))
            })
            .collect()
    };
    assert_eq!(wanted(created + 250), vec![]);
    assert_eq!(wanted(created + LAG), vec![]);
    // The fetchers' first requests arrive 1.5 s after creation, then every 500 ms.
    let mut t = created + 1_500;
    while t <= created + 5 * LAG {
        for p in &parts {
            for follower in [2, 3] {
                assert_eq!(p.record_follower_fetch(follower, 0, 0, t, 2_000), Ok(false));
            }
        }
        assert_eq!(wanted(t + 499), vec![], "at {} ms", t + 499 - created);
        t += 500;
    }
    // Node 3 stops: every partition drops it after the lag time, and only it.
    let stopped = t - 500;
    while t <= stopped + LAG + 500 {
        for p in &parts {
            p.record_follower_fetch(2, 0, 0, t, 2_000).unwrap();
        }
        t += 500;
    }
    let now = stopped + LAG + 1;
    assert!(wanted(now).iter().all(|(_, isr)| *isr == vec![1, 2]));
    assert_eq!(wanted(now).len(), 50);
}

#[test]
fn an_isr_change_is_begun_once_per_snapshot() {
    // The ISR check once sent the same change twice when a wake-up came before the
    // task that marked it pending ran.
    let dir = tempfile::tempdir().unwrap();
    let p = partition(&dir, "t-0", 1);
    p.apply_assignment(&assignment(1, 1, &[1, 2, 3], 2), 0);
    let seen = p.replica_state();
    let change = super::super::state::PendingIsr {
        new_isr: vec![1, 2],
        from_partition_epoch: seen.partition_epoch,
    };
    assert!(p.begin_isr_change(&seen, change.clone()));
    assert!(
        !p.begin_isr_change(&seen, change.clone()),
        "already in flight"
    );
    assert_eq!(p.replica_state().pending_isr, Some(change.clone()));
    // The image shows the change: a new change may begin, but not from the old snapshot.
    let mut shrunk = assignment(1, 1, &[1, 2], 2);
    shrunk.partition_epoch = 2;
    p.apply_assignment(&shrunk, 10);
    assert_eq!(p.replica_state().pending_isr, None);
    assert!(
        !p.begin_isr_change(&seen, change),
        "planned against epoch 1"
    );
    let now = p.replica_state();
    let expand = super::super::state::PendingIsr {
        new_isr: vec![1, 2, 3],
        from_partition_epoch: 2,
    };
    assert!(p.begin_isr_change(&now, expand.clone()));
    // Refused (or accepted as a no-op): the mark goes, and only that one.
    let other = super::super::state::PendingIsr {
        new_isr: vec![1],
        from_partition_epoch: 2,
    };
    p.clear_pending_isr(&other, 0);
    assert_eq!(p.replica_state().pending_isr, Some(expand.clone()));
    p.clear_pending_isr(&expand, 5_000);
    assert_eq!(p.replica_state().isr_retry_at_ms, 5_000);
    assert_eq!(p.replica_state().pending_isr, None);
    assert!(p.begin_isr_change(&now, expand), "may be asked again");
}

#[tokio::test]
async fn delete_records_waits_for_every_isr_member_to_move_its_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let p = partition(&dir, "t-0", 1);
    p.apply_assignment(&assignment(1, 1, &[1, 2, 3], 2), 0);
    p.append(&mut batch(&["a", "b", "c"]), 1000).unwrap();
    p.record_follower_fetch(2, 3, 0, 10, 2_000).unwrap();
    p.record_follower_fetch(3, 3, 0, 10, 2_000).unwrap();
    assert_eq!(p.offsets().unwrap().high_watermark, 3);

    p.with_log(|log| log.delete_records_before(2)).unwrap();
    p.log_start_moved();
    assert_eq!(
        p.hw_watch().borrow().low_watermark,
        0,
        "the followers still start at 0"
    );
    assert_eq!(
        p.wait_low_watermark(2, SHORT)
            .await
            .map_err(ReplicaError::code),
        Err(ResponseError::RequestTimedOut.code())
    );
    let waiter = {
        let p = Arc::clone(&p);
        tokio::spawn(async move { p.wait_low_watermark(2, LONG).await })
    };
    p.record_follower_fetch(2, 3, 2, 20, 2_000).unwrap();
    tokio::time::sleep(SHORT).await;
    assert!(!waiter.is_finished(), "3 still starts at 0");
    p.record_follower_fetch(3, 3, 2, 21, 2_000).unwrap();
    assert_eq!(waiter.await.unwrap(), Ok(2));

    // A follower that leaves the ISR no longer holds the low watermark back.
    p.with_log(|log| log.delete_records_before(3)).unwrap();
    p.log_start_moved();
    p.record_follower_fetch(2, 3, 3, 30, 2_000).unwrap();
    assert_eq!(p.hw_watch().borrow().low_watermark, 2);
    p.apply_assignment(&assignment(1, 1, &[1, 2], 2), 31);
    assert_eq!(p.wait_low_watermark(3, SHORT).await, Ok(3));
}

#[test]
fn an_isr_shrunk_after_the_hw_passed_the_batch_answers_not_enough_replicas_after_append() {
    let s = HwSnapshot {
        high_watermark: 10,
        low_watermark: 0,
        leader_epoch: 1,
        is_leader: true,
        isr_len: 1,
        min_isr: 2,
    };
    assert_eq!(
        replication_outcome(&s, 10, 1).map(|r| r.map_err(ReplicaError::code)),
        Some(Err(ResponseError::NotEnoughReplicasAfterAppend.code()))
    );
    assert_eq!(
        replication_outcome(&s, 11, 1),
        None,
        "still below the HW: waits"
    );
}

/// Found by the replication simulation (seed 1952): a leader isolated before anyone
/// fetched keeps a record of its epoch 0; the next leader's log starts in epoch 1 at
/// the same offset. The old leader, now a follower, must be told its log diverges
/// (Kafka answers an epoch older than every known one with the first one's start),
/// not left holding a record the leader has another one in place of.
#[tokio::test]
async fn a_follower_with_an_epoch_the_leader_never_had_is_cut_back() {
    let dir = tempfile::tempdir().unwrap();
    let leader = partition(&dir, "leader", 2);
    leader.apply_assignment(&assignment(2, 1, &[2, 3], 1), 0);
    leader
        .append(&mut batch(&["new-0", "new-1"]), 1000)
        .unwrap();
    let old = partition(&dir, "old", 1);
    old.apply_assignment(&assignment(1, 0, &[1, 2, 3], 1), 0);
    old.append(&mut batch(&["stale"]), 1000).unwrap();
    old.apply_assignment(&assignment(2, 1, &[2, 3], 1), 1);

    let (fetch_offset, last_epoch, _) = old.follower_position().unwrap();
    assert_eq!((fetch_offset, last_epoch), (1, 0));
    let diverging = leader.diverging_epoch(last_epoch, fetch_offset);
    assert_eq!(diverging, Some((0, 0)));
    let (epoch, end) = diverging.unwrap();
    let cut = old.truncate_to_divergence(epoch, end).unwrap().unwrap();
    assert_eq!((cut.old_end, cut.new_end), (1, 0));
    assert_eq!(old.follower_position().unwrap().0, 0);
}
