use std::time::{Duration, Instant};

use super::partition::{
    AckError, AckType, Acquired, DeadLetter, DeadLetterCause, RecordState, ShareGauges,
    ShareLimits, SharePartition, ShareTransitions,
};

fn limits() -> ShareLimits {
    ShareLimits {
        lock_duration: Duration::from_secs(30),
        delivery_limit: 3,
        max_in_flight: 100,
        dead_letter: false,
    }
}

fn run(first: i64, last: i64, delivery_count: i16) -> Acquired {
    Acquired {
        first,
        last,
        delivery_count,
    }
}

#[test]
fn acquire_hands_each_record_to_one_member() {
    let now = Instant::now();
    let mut sp = SharePartition::new(0, limits());
    assert_eq!(
        sp.acquire("a", &[(0, 4), (5, 9)], 6, now),
        vec![run(0, 5, 1)]
    );
    assert_eq!(sp.end_offset(), 6);
    // b reads the same batches: only what a does not hold.
    assert_eq!(
        sp.acquire("b", &[(0, 4), (5, 9)], 100, now),
        vec![run(6, 9, 1)]
    );
    assert_eq!(sp.counts(), (10, 10));
    assert_eq!(sp.next_fetch_offset(), 10);
}

#[test]
fn accepted_records_move_the_start_offset() {
    let now = Instant::now();
    let mut sp = SharePartition::new(0, limits());
    sp.acquire("a", &[(0, 9)], 100, now);
    sp.acknowledge("a", 2, 3, &[AckType::Accept], now).unwrap();
    assert_eq!(sp.start_offset(), 0, "offsets 0-1 are still in flight");
    sp.acknowledge("a", 0, 1, &[AckType::Accept, AckType::Reject], now)
        .unwrap();
    assert_eq!(sp.start_offset(), 4);
    assert_eq!(sp.state_of(1), None, "finished records leave the window");
    sp.acknowledge("a", 4, 9, &[AckType::Accept], now).unwrap();
    assert_eq!((sp.start_offset(), sp.end_offset()), (10, 10));
    assert_eq!(sp.counts(), (0, 0));
}

#[test]
fn only_the_holder_may_acknowledge_and_a_bad_batch_changes_nothing() {
    let now = Instant::now();
    let mut sp = SharePartition::new(0, limits());
    sp.acquire("a", &[(0, 4)], 2, now);
    sp.acquire("b", &[(0, 4)], 10, now);
    assert_eq!(
        sp.acknowledge("a", 0, 2, &[AckType::Accept], now),
        Err(AckError::NotAcquired(2))
    );
    assert_eq!(sp.state_of(0), Some((RecordState::Acquired, 1)));
    assert_eq!(
        sp.acknowledge(
            "a",
            0,
            1,
            &[AckType::Accept, AckType::Accept, AckType::Accept],
            now
        ),
        Err(AckError::Malformed(0, 1))
    );
    assert!(sp.acknowledge("a", 3, 2, &[AckType::Accept], now).is_err());
    // Accepting twice is refused: the record is no longer acquired.
    sp.acknowledge("a", 0, 0, &[AckType::Accept], now).unwrap();
    assert_eq!(
        sp.acknowledge("a", 0, 0, &[AckType::Accept], now),
        Err(AckError::NotAcquired(0))
    );
}

#[test]
fn released_records_come_back_with_a_higher_delivery_count() {
    let now = Instant::now();
    let mut sp = SharePartition::new(0, limits());
    sp.acquire("a", &[(0, 4)], 100, now);
    sp.acknowledge("a", 1, 1, &[AckType::Release], now).unwrap();
    assert_eq!(sp.next_fetch_offset(), 1);
    assert_eq!(sp.acquire("b", &[(0, 4)], 100, now), vec![run(1, 1, 2)]);
}

#[test]
fn expired_locks_make_records_available_again() {
    let now = Instant::now();
    let mut sp = SharePartition::new(0, limits());
    sp.acquire("a", &[(0, 2)], 100, now);
    assert_eq!(sp.next_lock_deadline(), Some(now + Duration::from_secs(30)));
    assert!(!sp.expire_locks(now + Duration::from_secs(29)));
    assert!(sp.expire_locks(now + Duration::from_secs(30)));
    assert_eq!(sp.state_of(0), Some((RecordState::Available, 1)));
    let later = now + Duration::from_secs(31);
    assert_eq!(sp.acquire("b", &[(0, 2)], 100, later), vec![run(0, 2, 2)]);
    // a's late acknowledgement is refused: b holds the records now.
    assert_eq!(
        sp.acknowledge("a", 0, 0, &[AckType::Accept], now),
        Err(AckError::NotAcquired(0))
    );
}

#[test]
fn the_delivery_limit_archives_a_record() {
    let mut now = Instant::now();
    let mut sp = SharePartition::new(0, limits());
    for count in 1..=3 {
        assert_eq!(sp.acquire("a", &[(0, 0)], 100, now), vec![run(0, 0, count)]);
        now += Duration::from_secs(31);
        sp.expire_locks(now);
    }
    assert_eq!(
        sp.state_of(0),
        None,
        "archived at the limit, out of the window"
    );
    assert_eq!(sp.start_offset(), 1);
    assert!(sp.acquire("a", &[(0, 0)], 100, now).is_empty());
    // A release at the limit archives as well.
    sp.acquire("a", &[(1, 1)], 100, now);
    for _ in 0..2 {
        sp.acknowledge("a", 1, 1, &[AckType::Release], now).unwrap();
        sp.acquire("a", &[(1, 1)], 100, now);
    }
    assert_eq!(sp.state_of(1), Some((RecordState::Acquired, 3)));
    sp.acknowledge("a", 1, 1, &[AckType::Release], now).unwrap();
    assert_eq!(sp.state_of(1), None);
    assert_eq!(sp.start_offset(), 2);
}

#[test]
fn rejected_records_never_come_back() {
    let now = Instant::now();
    let mut sp = SharePartition::new(0, limits());
    sp.acquire("a", &[(0, 2)], 100, now);
    sp.acknowledge("a", 1, 1, &[AckType::Reject], now).unwrap();
    sp.expire_locks(now + Duration::from_secs(60));
    let again = sp.acquire("b", &[(0, 2)], 100, now + Duration::from_secs(60));
    assert_eq!(again, vec![run(0, 0, 2), run(2, 2, 2)]);
}

#[test]
fn the_in_flight_window_is_bounded() {
    let now = Instant::now();
    let mut sp = SharePartition::new(
        0,
        ShareLimits {
            max_in_flight: 4,
            ..limits()
        },
    );
    assert_eq!(sp.acquire("a", &[(0, 9)], 100, now), vec![run(0, 3, 1)]);
    assert!(sp.acquire("b", &[(0, 9)], 100, now).is_empty());
    sp.acknowledge("a", 0, 1, &[AckType::Accept], now).unwrap();
    assert_eq!(sp.acquire("b", &[(0, 9)], 100, now), vec![run(4, 5, 1)]);
}

#[test]
fn a_closed_session_releases_what_its_member_held() {
    let now = Instant::now();
    let mut sp = SharePartition::new(5, limits());
    assert!(sp.acquire("a", &[(0, 6)], 100, now) == vec![run(5, 6, 1)]);
    sp.acquire("b", &[(7, 7)], 100, now);
    assert!(sp.release_member("a"));
    assert_eq!(sp.state_of(5), Some((RecordState::Available, 1)));
    assert_eq!(sp.state_of(7), Some((RecordState::Acquired, 1)));
}

#[test]
fn gaps_are_archived_and_skipped_offsets_hold_no_record() {
    let now = Instant::now();
    let mut sp = SharePartition::new(0, limits());
    // Offsets 3-4 were compacted away: the batches skip them.
    assert_eq!(
        sp.acquire("a", &[(0, 2), (5, 6)], 100, now),
        vec![run(0, 2, 1), run(5, 6, 1)]
    );
    sp.acknowledge(
        "a",
        0,
        6,
        &[
            AckType::Accept,
            AckType::Accept,
            AckType::Gap,
            AckType::Gap,
            AckType::Gap,
            AckType::Accept,
            AckType::Accept,
        ],
        now,
    )
    .unwrap();
    assert_eq!((sp.start_offset(), sp.end_offset()), (7, 7));
}

#[test]
fn the_log_start_moving_drops_records_below_it() {
    let now = Instant::now();
    let mut sp = SharePartition::new(0, limits());
    sp.acquire("a", &[(0, 9)], 100, now);
    sp.log_start_moved(6);
    assert_eq!(sp.start_offset(), 6);
    assert_eq!(sp.counts(), (4, 4));
}

#[test]
fn the_snapshot_keeps_what_is_finished_and_frees_what_was_locked() {
    let now = Instant::now();
    let mut sp = SharePartition::new(0, limits());
    sp.acquire("a", &[(0, 9)], 100, now);
    sp.acknowledge("a", 2, 4, &[AckType::Accept], now).unwrap();
    sp.acknowledge("a", 5, 5, &[AckType::Reject], now).unwrap();
    sp.acknowledge("a", 6, 6, &[AckType::Release], now).unwrap();
    let (start, batches) = sp.snapshot();
    assert_eq!(start, 0);
    let states: Vec<(i64, i64, i8, i16)> = batches
        .iter()
        .map(|b| (b.first, b.last, b.state, b.delivery_count))
        .collect();
    assert_eq!(
        states,
        vec![(0, 1, 0, 1), (2, 4, 2, 1), (5, 5, 4, 1), (6, 9, 0, 1)]
    );
    let mut restored = SharePartition::from_snapshot(start, &batches, limits());
    assert_eq!((restored.start_offset(), restored.end_offset()), (0, 10));
    // Accepted and rejected records are not handed out again; the rest are.
    assert_eq!(
        restored.acquire("b", &[(0, 14)], 100, now),
        vec![run(0, 1, 2), run(6, 9, 2), run(10, 14, 1)]
    );
}

#[test]
fn auto_offset_reset_reads_kafkas_strategies() {
    use super::AutoOffsetReset;
    use std::time::Duration;
    assert_eq!(
        AutoOffsetReset::parse("earliest"),
        AutoOffsetReset::Earliest
    );
    assert_eq!(AutoOffsetReset::parse("latest"), AutoOffsetReset::Latest);
    assert_eq!(
        AutoOffsetReset::parse("by_duration:pt10m"),
        AutoOffsetReset::ByDuration(Duration::from_secs(600))
    );
    assert_eq!(AutoOffsetReset::parse("nonsense"), AutoOffsetReset::Latest);
}

fn with_dead_letter_topic() -> ShareLimits {
    ShareLimits {
        dead_letter: true,
        ..limits()
    }
}

/// KIP-1191: with a dead-letter topic a REJECTed record is ARCHIVING until its copy is
/// written: never delivered again, handed out for copying once, and holding the
/// start offset until the copy is done.
#[test]
fn a_rejected_record_waits_in_archiving_for_its_dead_letter_copy() {
    let now = Instant::now();
    let mut sp = SharePartition::new(0, with_dead_letter_topic());
    sp.acquire("a", &[(0, 2)], 100, now);
    sp.acknowledge(
        "a",
        0,
        2,
        &[AckType::Accept, AckType::Reject, AckType::Accept],
        now,
    )
    .unwrap();
    assert_eq!(sp.state_of(1), Some((RecordState::Archiving, 1)));
    assert_eq!(sp.start_offset(), 1, "the copy holds the start offset");
    assert!(sp.acquire("b", &[(0, 2)], 100, now).is_empty());
    let copy = DeadLetter {
        offset: 1,
        delivery_count: 1,
        cause: DeadLetterCause::ClientReject,
    };
    assert_eq!(sp.dead_letters(10, now), vec![copy]);
    assert!(sp.dead_letters(10, now).is_empty(), "handed out once");
    // A failed write hands it out again, after the retry time.
    let retry = now + Duration::from_secs(1);
    sp.dead_letter_failed(&[1], retry);
    assert!(sp.dead_letters(10, now).is_empty());
    assert_eq!(sp.dead_letters(10, retry), vec![copy]);
    sp.dead_lettered(&[1]);
    assert_eq!(sp.state_of(1), None);
    assert_eq!(sp.start_offset(), 3);
    assert!(sp.dead_letters(10, retry).is_empty());
}

#[test]
fn the_delivery_limit_sends_a_record_to_the_dead_letter_topic() {
    let mut now = Instant::now();
    let mut sp = SharePartition::new(0, with_dead_letter_topic());
    for count in 1..=3 {
        assert_eq!(sp.acquire("a", &[(0, 0)], 100, now), vec![run(0, 0, count)]);
        now += Duration::from_secs(31);
        sp.expire_locks(now);
    }
    assert_eq!(sp.state_of(0), Some((RecordState::Archiving, 3)));
    assert!(sp.acquire("a", &[(0, 0)], 100, now).is_empty());
    // A release at the limit, and a member leaving at the limit, alike.
    sp.acquire("a", &[(1, 2)], 100, now);
    for _ in 0..2 {
        sp.acknowledge("a", 1, 1, &[AckType::Release], now).unwrap();
        sp.release_member("a");
        sp.acquire("a", &[(1, 2)], 100, now);
    }
    sp.acknowledge("a", 1, 1, &[AckType::Release], now).unwrap();
    sp.release_member("a");
    let exceeded = |offset| DeadLetter {
        offset,
        delivery_count: 3,
        cause: DeadLetterCause::DeliveryCountExceeded,
    };
    assert_eq!(
        sp.dead_letters(10, now),
        vec![exceeded(0), exceeded(1), exceeded(2)]
    );
    sp.dead_lettered(&[0, 1, 2]);
    assert_eq!(sp.start_offset(), 3);
}

/// ARCHIVING is stored (Kafka's state 3): a new leader writes the copy again, with
/// the cause the delivery count tells.
#[test]
fn archiving_survives_a_new_leader() {
    let now = Instant::now();
    let mut sp = SharePartition::new(0, with_dead_letter_topic());
    sp.acquire("a", &[(0, 1)], 100, now);
    sp.acknowledge("a", 0, 0, &[AckType::Reject], now).unwrap();
    // Being written when the leader went away: the new one writes it again.
    assert_eq!(sp.dead_letters(10, now).len(), 1);
    let (start, batches) = sp.snapshot();
    assert_eq!(batches[0].state, 3);
    let mut restored = SharePartition::from_snapshot(start, &batches, with_dead_letter_topic());
    assert_eq!(restored.state_of(0), Some((RecordState::Archiving, 1)));
    assert_eq!(
        restored.dead_letters(10, now),
        vec![DeadLetter {
            offset: 0,
            delivery_count: 1,
            cause: DeadLetterCause::ClientReject,
        }]
    );
    assert_eq!(restored.next_fetch_offset(), 1);
}

#[test]
fn without_a_dead_letter_topic_a_rejected_record_is_archived() {
    let now = Instant::now();
    let mut sp = SharePartition::new(0, limits());
    sp.acquire("a", &[(0, 0)], 100, now);
    sp.acknowledge("a", 0, 0, &[AckType::Reject], now).unwrap();
    assert_eq!(sp.state_of(0), None);
    assert!(sp.dead_letters(10, now).is_empty());
}

#[test]
fn renew_restarts_the_lock_of_a_held_record_without_a_new_delivery() {
    let now = Instant::now();
    let mut sp = SharePartition::new(0, limits());
    sp.acquire("a", &[(0, 2)], 100, now);
    let later = now + Duration::from_secs(20);
    sp.acknowledge("a", 1, 1, &[AckType::Renew], later).unwrap();
    assert_eq!(sp.state_of(1), Some((RecordState::Acquired, 1)));
    // Past the first lock: offsets 0 and 2 come back, 1 is still a's.
    let past_first_lock = now + Duration::from_secs(31);
    assert!(sp.expire_locks(past_first_lock));
    assert_eq!(sp.state_of(1), Some((RecordState::Acquired, 1)));
    assert_eq!(
        sp.acquire("b", &[(0, 2)], 100, past_first_lock),
        vec![run(0, 0, 2), run(2, 2, 2)]
    );
    assert_eq!(
        sp.next_lock_deadline(),
        Some(later + Duration::from_secs(30)),
        "the renewed lock runs a whole lock duration from the renewal"
    );
    sp.acknowledge("a", 1, 1, &[AckType::Accept], past_first_lock)
        .unwrap();
    assert_eq!(sp.state_of(1), Some((RecordState::Acknowledged, 1)));
}

#[test]
fn renew_may_be_mixed_with_other_types_in_one_batch() {
    let now = Instant::now();
    let mut sp = SharePartition::new(0, limits());
    sp.acquire("a", &[(0, 2)], 100, now);
    sp.acknowledge(
        "a",
        0,
        2,
        &[AckType::Accept, AckType::Renew, AckType::Release],
        now,
    )
    .unwrap();
    assert_eq!(sp.start_offset(), 1);
    assert_eq!(sp.state_of(1), Some((RecordState::Acquired, 1)));
    assert_eq!(sp.state_of(2), Some((RecordState::Available, 1)));
}

#[test]
fn renew_is_refused_for_a_record_the_member_does_not_hold() {
    let now = Instant::now();
    let mut sp = SharePartition::new(0, limits());
    sp.acquire("a", &[(0, 1)], 1, now);
    sp.acquire("b", &[(0, 1)], 1, now);
    // Offset 1 is b's, offset 5 was never acquired.
    assert_eq!(
        sp.acknowledge("a", 1, 1, &[AckType::Renew], now),
        Err(AckError::NotAcquired(1))
    );
    assert_eq!(
        sp.acknowledge("a", 5, 5, &[AckType::Renew], now),
        Err(AckError::NotAcquired(5))
    );
    // Nothing moved: b's lock is as it was.
    assert_eq!(sp.next_lock_deadline(), Some(now + Duration::from_secs(30)));
}

#[test]
fn renew_is_refused_once_the_lock_ran_out() {
    let now = Instant::now();
    let mut sp = SharePartition::new(0, limits());
    sp.acquire("a", &[(0, 0)], 1, now);
    let expired = now + Duration::from_secs(30);
    // Refused at the deadline even before expire_locks has looked.
    assert_eq!(
        sp.acknowledge("a", 0, 0, &[AckType::Renew], expired),
        Err(AckError::NotAcquired(0))
    );
    assert!(sp.expire_locks(expired));
    assert_eq!(
        sp.acknowledge("a", 0, 0, &[AckType::Renew], expired),
        Err(AckError::NotAcquired(0))
    );
    assert_eq!(sp.state_of(0), Some((RecordState::Available, 1)));
}

#[test]
fn renew_is_acknowledge_type_4() {
    assert_eq!(AckType::from_code(4), Some(AckType::Renew));
    assert_eq!(AckType::from_code(5), None);
}

#[test]
fn gauges_and_transitions_follow_the_records() {
    let now = Instant::now();
    let mut sp = SharePartition::new(0, limits());
    sp.acquire("a", &[(0, 4)], 100, now);
    sp.acknowledge(
        "a",
        0,
        4,
        &[
            AckType::Release,
            AckType::Accept,
            AckType::Accept,
            AckType::Reject,
            AckType::Renew,
        ],
        now,
    )
    .unwrap();
    // 0 available, 1-2 acknowledged, 3 archived, 4 still acquired.
    assert_eq!(
        sp.gauges(),
        ShareGauges {
            in_flight: 2,
            acquired: 1,
            finished_above_start: 3
        }
    );
    assert_eq!(sp.acquire("b", &[(0, 4)], 100, now), vec![run(0, 0, 2)]);
    assert_eq!(
        sp.take_transitions(),
        ShareTransitions {
            redelivered: 1,
            archived: 1
        }
    );
    assert_eq!(
        sp.take_transitions(),
        ShareTransitions::default(),
        "taken once"
    );
    assert_eq!(sp.gauges().acquired, 2);
}
