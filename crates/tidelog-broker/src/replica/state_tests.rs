use super::*;

fn assignment(leader: i32, epoch: i32, isr: &[i32]) -> ImageAssignment {
    ImageAssignment {
        leader,
        leader_epoch: epoch,
        partition_epoch: epoch,
        replicas: vec![1, 2, 3],
        isr: isr.to_vec(),
        min_isr: 2,
    }
}

fn leader_of_three(now: i64) -> ReplicaState {
    let mut s = ReplicaState::sole_leader(1, 0);
    assert_eq!(
        s.apply(&assignment(1, 1, &[1, 2, 3]), 100, now),
        Transition::BecameLeader
    );
    s
}

#[test]
fn a_new_leader_waits_for_every_isr_member_before_moving_the_hw() {
    let mut s = leader_of_three(1_000);
    assert_eq!(s.epoch_start_offset, 100);
    assert_eq!(s.isr_high_watermark(100), None);
    assert!(s.record_fetch(2, 90, 100, 1_001));
    assert_eq!(s.isr_high_watermark(100), None, "3 has not fetched yet");
    assert!(s.record_fetch(3, 100, 100, 1_002));
    assert_eq!(s.isr_high_watermark(100), Some(90));
    assert!(s.record_fetch(2, 100, 100, 1_003));
    assert_eq!(s.isr_high_watermark(120), Some(100));
}

#[test]
fn followers_outside_the_isr_do_not_hold_the_hw_back() {
    let mut s = leader_of_three(0);
    s.apply(&assignment(1, 1, &[1, 2]), 100, 0);
    s.record_fetch(2, 100, 100, 1);
    s.record_fetch(3, 5, 100, 1);
    assert_eq!(s.isr_high_watermark(100), Some(100));
    // ...unless a pending change is adding it.
    s.pending_isr = Some(PendingIsr {
        new_isr: vec![1, 2, 3],
        from_partition_epoch: 1,
    });
    assert_eq!(s.isr_high_watermark(100), Some(5));
}

#[test]
fn a_sole_leader_commits_its_whole_log() {
    let s = ReplicaState::sole_leader(7, 0);
    assert_eq!(s.isr_high_watermark(42), Some(42));
    assert_eq!(s.wanted_isr_change(42, 1_000_000, 10), None);
}

#[test]
fn caught_up_time_follows_kafkas_rule() {
    let mut s = leader_of_three(0);
    // Fetch at the leader's LEO: caught up now.
    s.record_fetch(2, 100, 100, 10);
    assert_eq!(s.followers[&2].last_caught_up_ms, 10);
    // Behind the current LEO (150) but at the LEO of its previous fetch (100): caught
    // up as of that previous fetch.
    s.record_fetch(2, 120, 150, 20);
    assert_eq!(s.followers[&2].last_caught_up_ms, 10);
    s.record_fetch(2, 150, 200, 30);
    assert_eq!(s.followers[&2].last_caught_up_ms, 20);
    // Behind both: unchanged.
    s.record_fetch(2, 160, 300, 40);
    assert_eq!(s.followers[&2].last_caught_up_ms, 20);
    assert!(!s.record_fetch(9, 0, 300, 40), "not a replica");
}

#[test]
fn laggards_leave_and_caught_up_replicas_rejoin() {
    let mut s = leader_of_three(0);
    s.record_fetch(2, 100, 100, 500);
    s.record_fetch(3, 100, 100, 500);
    assert_eq!(s.wanted_isr_change(100, 2_000, 2_000), None);
    // 3 stops fetching; 2 keeps up.
    s.record_fetch(2, 100, 100, 2_400);
    assert_eq!(s.lagging(2_600, 2_000), vec![3]);
    assert_eq!(s.wanted_isr_change(100, 2_600, 2_000), Some(vec![1, 2]));
    s.pending_isr = Some(PendingIsr {
        new_isr: vec![1, 2],
        from_partition_epoch: 1,
    });
    assert_eq!(
        s.wanted_isr_change(100, 2_600, 2_000),
        None,
        "one at a time"
    );
    // The image reflects it: a new partition epoch clears the pending change.
    let mut shrunk = assignment(1, 1, &[1, 2]);
    shrunk.partition_epoch = 2;
    assert_eq!(s.apply(&shrunk, 130, 2_700), Transition::Unchanged);
    assert_eq!(s.pending_isr, None);
    assert_eq!(s.isr, vec![1, 2]);
    // 3 comes back below the HW: not yet; at the HW: rejoins.
    s.record_fetch(3, 110, 130, 2_800);
    assert_eq!(s.wanted_isr_change(130, 2_800, 2_000), None);
    s.record_fetch(3, 130, 130, 2_900);
    assert_eq!(s.wanted_isr_change(130, 2_900, 2_000), Some(vec![1, 2, 3]));
}

#[test]
fn a_follower_below_the_epoch_start_cannot_rejoin() {
    let mut s = ReplicaState::sole_leader(1, 0);
    s.apply(&assignment(1, 4, &[1]), 100, 0);
    // The HW (50, from an old checkpoint) is below the epoch start (100).
    s.record_fetch(2, 60, 100, 1);
    assert!(s.caught_up_outside_isr(50).is_empty());
    s.record_fetch(2, 100, 100, 2);
    assert_eq!(s.caught_up_outside_isr(50), vec![2]);
}

#[test]
fn leadership_changes_are_reported_and_reset_followers() {
    let mut s = leader_of_three(0);
    s.record_fetch(2, 100, 100, 1);
    assert_eq!(
        s.apply(&assignment(2, 2, &[2, 3]), 100, 5),
        Transition::BecameFollower
    );
    assert_eq!(s.role, Role::Follower { leader: 2 });
    assert!(s.followers.is_empty());
    assert_eq!(
        s.apply(&assignment(2, 2, &[2, 3]), 100, 6),
        Transition::Unchanged
    );
    // Same leader, new epoch: still a change (truncation must be checked again).
    assert_eq!(
        s.apply(&assignment(2, 3, &[2, 3]), 100, 7),
        Transition::BecameFollower
    );
    assert_eq!(
        s.apply(&assignment(-1, 4, &[2]), 100, 8),
        Transition::WentOffline
    );
    assert_eq!(
        s.apply(&assignment(1, 5, &[1, 2]), 100, 9),
        Transition::BecameLeader
    );
    // ISR member 2 counts as caught up at the change; 3 (outside) does not.
    assert_eq!(s.followers[&2].last_caught_up_ms, 9);
    assert_eq!(s.followers[&3].last_caught_up_ms, 0);
    assert_eq!(s.followers[&2].log_end_offset, -1);
}
