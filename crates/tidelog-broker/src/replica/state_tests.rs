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
    assert!(s.caught_up_outside_isr(50, 2, LAG).is_empty());
    s.record_fetch(2, 100, 100, 2);
    assert_eq!(s.caught_up_outside_isr(50, 2, LAG), vec![2]);
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

const LAG: i64 = 2_000;

#[test]
fn a_partition_opened_as_leader_counts_its_isr_followers_caught_up() {
    // A new partition opens as a provisional sole leader in the image's epoch; adopting
    // the image must still start the followers' caught-up clocks (it once left them at
    // 0, and the first ISR check, 250 ms later, dropped both).
    let mut s = ReplicaState::sole_leader(1, 7);
    assert_eq!(
        s.apply(&assignment(1, 7, &[1, 2, 3]), 0, 10_000),
        Transition::BecameLeader
    );
    assert_eq!(s.followers[&2].last_caught_up_ms, 10_000);
    assert_eq!(s.followers[&3].last_caught_up_ms, 10_000);
    assert_eq!(s.wanted_isr_change(0, 10_250, LAG), None);
    // Followers whose fetchers start late still have the whole lag time.
    assert_eq!(s.wanted_isr_change(0, 10_000 + LAG, LAG), None);
    s.record_fetch(2, 0, 0, 11_900);
    s.record_fetch(3, 0, 0, 11_950);
    assert_eq!(s.wanted_isr_change(0, 13_000, LAG), None);
    // A second image for the same epoch changes nothing.
    assert_eq!(
        s.apply(&assignment(1, 7, &[1, 2, 3]), 0, 13_000),
        Transition::Unchanged
    );
    assert_eq!(s.followers[&2].last_caught_up_ms, 11_900);
}

#[test]
fn a_partition_opened_as_leader_drops_a_follower_that_never_fetches() {
    let mut s = ReplicaState::sole_leader(1, 7);
    s.apply(&assignment(1, 7, &[1, 2, 3]), 0, 10_000);
    for t in (10_000..=10_000 + LAG + 500).step_by(500) {
        s.record_fetch(2, 0, 0, t);
    }
    assert_eq!(s.lagging(10_000 + LAG + 500, LAG), vec![3]);
    assert_eq!(
        s.wanted_isr_change(0, 10_000 + LAG + 500, LAG),
        Some(vec![1, 2])
    );
}

#[test]
fn an_idle_partition_keeps_long_polling_followers_in_the_isr() {
    let mut s = leader_of_three(0);
    // Nothing is produced for 5x the lag time; each follower's fetch sits in the
    // leader's long poll for replica.fetch.wait.max.ms (500) and comes back.
    let mut t = 0;
    while t <= 5 * LAG {
        assert!(s.record_fetch(2, 100, 100, t));
        assert!(s.record_fetch(3, 100, 100, t + 120));
        for probe in [t + 100, t + 499] {
            assert_eq!(s.lagging(probe, LAG), Vec::<i32>::new(), "at {probe} ms");
            assert_eq!(s.wanted_isr_change(100, probe, LAG), None, "at {probe} ms");
        }
        t += 500;
    }
}

#[test]
fn a_stopped_follower_of_an_idle_partition_leaves_after_the_lag_time() {
    let mut s = leader_of_three(0);
    let mut t = 0;
    while t <= 3_000 {
        s.record_fetch(2, 100, 100, t);
        s.record_fetch(3, 100, 100, t);
        t += 500;
    }
    // 3 stops at 3_000; 2 keeps polling.
    while t <= 3_000 + LAG + 500 {
        s.record_fetch(2, 100, 100, t);
        let expect: Vec<i32> = if t - 3_000 > LAG { vec![3] } else { vec![] };
        assert_eq!(s.lagging(t, LAG), expect, "at {t} ms");
        t += 100;
    }
    assert_eq!(s.wanted_isr_change(100, t, LAG), Some(vec![1, 2]));
}

#[test]
fn followers_keeping_up_under_light_load_stay_in_the_isr() {
    let mut s = leader_of_three(0);
    // One record every 300 ms; a follower's fetch that finds nothing is parked until
    // the next append, so each fetch comes back just after the LEO moved.
    let mut leo = 100;
    let mut t = 0;
    while t <= 5 * LAG {
        s.record_fetch(2, leo, leo, t);
        s.record_fetch(3, leo, leo, t);
        t += 300;
        leo += 1; // appended at t; the fetches at `leo - 1` return it
        s.record_fetch(2, leo, leo + 1, t + 5); // another record landed meanwhile
        s.record_fetch(3, leo, leo, t + 5);
        assert_eq!(s.wanted_isr_change(leo, t + 6, LAG), None, "at {t} ms");
        leo += 1;
        t += 10;
    }
}

#[test]
fn a_follower_rejoins_in_a_new_epoch_before_its_first_append() {
    // The leader's epoch cache has no entry for the new epoch until something is
    // appended in it; the epoch start is the LEO at election, which a follower holding
    // the whole log has reached.
    let mut s = leader_of_three(0);
    assert_eq!(
        s.apply(&assignment(1, 2, &[1, 2]), 100, 1_000),
        Transition::BecameLeader
    );
    assert_eq!(s.epoch_start_offset, 100);
    s.record_fetch(2, 100, 100, 1_100);
    s.record_fetch(3, 100, 100, 1_100);
    assert_eq!(s.wanted_isr_change(100, 1_100, LAG), Some(vec![1, 2, 3]));
}

#[test]
fn a_follower_that_catches_up_after_a_shrink_rejoins() {
    let mut s = leader_of_three(0);
    s.record_fetch(2, 100, 100, 0);
    s.record_fetch(3, 100, 100, 0);
    let mut shrunk = assignment(1, 1, &[1, 2]);
    shrunk.partition_epoch = 2;
    s.apply(&shrunk, 100, 3_000);
    // 3 comes back far behind and copies in steps; it rejoins at the HW (2 is at it).
    let mut leo3 = 0;
    let mut t = 3_000;
    while leo3 < 200 {
        s.record_fetch(2, 200, 200, t);
        assert!(s.record_fetch(3, leo3, 200, t));
        assert_eq!(s.caught_up_outside_isr(200, t, LAG), Vec::<i32>::new());
        leo3 += 50;
        t += 10;
    }
    s.record_fetch(3, 200, 200, t);
    assert_eq!(s.wanted_isr_change(200, t, LAG), Some(vec![1, 2, 3]));
}

#[test]
fn a_long_poll_answered_with_nothing_new_counts_as_caught_up_when_answered() {
    let mut s = leader_of_three(0);
    s.record_fetch(2, 100, 100, 0);
    s.record_fetch(3, 100, 100, 0);
    // Both fetches sit in the long poll until 1_800; nothing is appended for 2, while
    // 3's partition got a record meanwhile (its answer carries it).
    s.record_idle_poll(2, 100, 100, 1_800);
    s.record_idle_poll(3, 100, 101, 1_800);
    assert_eq!(s.followers[&2].last_caught_up_ms, 1_800);
    assert_eq!(s.followers[&3].last_caught_up_ms, 0);
    // The next fetches are slow to come (a busy machine): only 3 has aged past the lag.
    assert_eq!(s.lagging(3_000, LAG), vec![3]);
    // An idle answer never stands for a different fetch offset than the one recorded.
    s.record_idle_poll(3, 101, 101, 2_900);
    assert_eq!(s.followers[&3].last_caught_up_ms, 0);
    s.record_idle_poll(9, 101, 101, 2_900);
}

#[test]
fn a_follower_at_the_hw_rejoins_only_when_caught_up_by_the_shrink_rule() {
    // ISR [1, 2]; 3 sits at the HW (2's LEO) but never reached the leader's LEO nor the
    // LEO of its previous fetch. Adding it would drop it again at the next check: the
    // shrink/expand cycle once per check period.
    let mut s = leader_of_three(0);
    let mut shrunk = assignment(1, 1, &[1, 2]);
    shrunk.partition_epoch = 2;
    s.apply(&shrunk, 100, 0);
    let mut t = 0;
    let mut leo = 100;
    while t <= 3 * LAG {
        leo += 10;
        s.record_fetch(2, leo - 5, leo, t);
        s.record_fetch(3, leo - 5 - 10, leo, t);
        let hw = leo - 15;
        if t > LAG {
            assert_eq!(s.lagging(t, LAG), Vec::<i32>::new(), "2 keeps up");
            assert_eq!(s.wanted_isr_change(hw, t, LAG), None, "at {t} ms");
        }
        t += 100;
    }
    // 3 reaches the leader's LEO: caught up now, it rejoins.
    s.record_fetch(3, leo, leo, t);
    assert_eq!(s.wanted_isr_change(leo - 5, t, LAG), Some(vec![1, 2, 3]));
}

#[test]
fn the_hw_holds_while_the_isr_is_below_min_insync_replicas() {
    let mut s = leader_of_three(0);
    s.record_fetch(2, 100, 100, 1);
    s.record_fetch(3, 100, 100, 1);
    assert_eq!(s.committable_high_watermark(120), Some(100));
    // Cut off from both followers, the leader shrank the ISR to itself (min 2).
    s.apply(&assignment(1, 1, &[1]), 120, 2);
    assert_eq!(
        s.isr_high_watermark(120),
        Some(120),
        "the ISR alone would allow it"
    );
    assert_eq!(s.committable_high_watermark(120), None, "strict min ISR");
    // One follower back in the ISR: min.insync.replicas = 2 is met again.
    s.record_fetch(2, 120, 120, 3);
    s.apply(&assignment(1, 1, &[1, 2]), 120, 3);
    assert_eq!(s.committable_high_watermark(120), Some(120));
}

#[test]
fn min_insync_replicas_above_the_replica_count_does_not_block_the_hw() {
    let mut s = ReplicaState::sole_leader(1, 0);
    s.apply(
        &ImageAssignment {
            leader: 1,
            leader_epoch: 1,
            partition_epoch: 1,
            replicas: vec![1],
            isr: vec![1],
            min_isr: 2,
        },
        10,
        0,
    );
    assert_eq!(s.effective_min_isr(), 1);
    assert_eq!(s.committable_high_watermark(10), Some(10));
}
