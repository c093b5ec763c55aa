//! Transaction version 2 (KIP-890 part 2) in the coordinator's steps: the end of every
//! transaction bumps the epoch (commit and abort), the old epoch is fenced, partitions
//! join by the produce itself, a retried EndTxn v5 is recognised, and an exhausted
//! epoch moves the producer to a new id.

use super::shard::{EndAnswer, TxnShard};
use super::shard_tests::{at, config, init, run};
use super::state::{TxnError, TxnMeta, TxnState};
use crate::coordinator::Shard;

fn started(producer_id: i64) -> (TxnShard, i64) {
    let mut s = TxnShard::new(3, config());
    let mut next = 0;
    init(&mut s, &mut next, Some(producer_id), 1);
    (s, next)
}

fn part(t: &str, p: i32) -> Vec<(String, i32)> {
    vec![(t.to_string(), p)]
}

/// The producer an EndTxn v5 answered with, and whether it waits for markers.
fn ended(answer: Result<EndAnswer, TxnError>) -> ((i64, i16), bool) {
    match answer {
        Ok(EndAnswer::Done {
            completed,
            producer,
        }) => (producer, completed.is_some()),
        other => panic!("unexpected {other:?}"),
    }
}

fn bumps_on_end(commit: bool) {
    let (mut s, mut next) = started(42);
    // The produce adds its partition (TV2): no AddPartitionsToTxn first.
    let (added, _) = run(&mut s, &mut next, |s| {
        s.add("tx", (42, 0), &part("t", 0), None, true, at(2))
    });
    assert_eq!(added, Ok(()));
    assert_eq!(s.verify("tx", 42, 0, "t", 0), Ok(()));
    let (answer, jobs) = run(&mut s, &mut next, |s| {
        s.end_v2("tx", (42, 0), commit, None, at(3))
    });
    assert_eq!(
        ended(answer),
        ((42, 1), true),
        "the client goes on at epoch 1"
    );
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].commit, commit);
    assert_eq!(jobs[0].producer_epoch, 1, "markers carry the bumped epoch");
    assert_eq!(jobs[0].partitions, part("t", 0));
    let prepare = if commit {
        TxnState::PrepareCommit
    } else {
        TxnState::PrepareAbort
    };
    assert_eq!(
        s.describe("tx").map(|m| (m.state, m.epoch)),
        Some((prepare, 1))
    );
    // A late write of the old epoch is fenced.
    assert_eq!(s.verify("tx", 42, 0, "t", 0), Err(TxnError::Fenced));
    run(&mut s, &mut next, |s| s.complete("tx", 42, 1, at(4)));
    let done = s.describe("tx").map(|m| (m.state, m.producer_id, m.epoch));
    let complete = if commit {
        TxnState::CompleteCommit
    } else {
        TxnState::CompleteAbort
    };
    assert_eq!(done, Some((complete, 42, 1)));
    // A retried EndTxn v5 (the old epoch) succeeds with the new epoch, at once.
    let (retry, jobs) = run(&mut s, &mut next, |s| {
        s.end_v2("tx", (42, 0), commit, None, at(5))
    });
    assert_eq!(ended(retry), ((42, 1), false));
    assert!(jobs.is_empty());
    // The other decision from the old epoch is no retry.
    let (other, _) = run(&mut s, &mut next, |s| {
        s.end_v2("tx", (42, 0), !commit, None, at(5))
    });
    assert_eq!(other.err(), Some(TxnError::InvalidTxnState));
    // The old epoch cannot open the next transaction; the new one can.
    let (old, _) = run(&mut s, &mut next, |s| {
        s.add("tx", (42, 0), &part("t", 1), None, true, at(6))
    });
    assert_eq!(old, Err(TxnError::Fenced));
    let (new, _) = run(&mut s, &mut next, |s| {
        s.add("tx", (42, 1), &part("t", 1), None, true, at(6))
    });
    assert_eq!(new, Ok(()));
    assert_eq!(s.describe("tx").map(|m| m.partitions.len()), Some(1));
}

#[test]
fn a_tv2_commit_bumps_the_epoch_and_fences_the_old_one() {
    bumps_on_end(true);
}

#[test]
fn a_tv2_abort_bumps_the_epoch_and_fences_the_old_one() {
    bumps_on_end(false);
}

#[test]
fn a_tv1_end_keeps_the_epoch() {
    let (mut s, mut next) = started(42);
    let (added, _) = run(&mut s, &mut next, |s| {
        s.add("tx", (42, 0), &part("t", 0), None, false, at(2))
    });
    assert_eq!(added, Ok(()));
    let (_, jobs) = run(&mut s, &mut next, |s| s.end("tx", (42, 0), true, at(3)));
    assert_eq!(jobs[0].producer_epoch, 0);
    run(&mut s, &mut next, |s| s.complete("tx", 42, 0, at(4)));
    let meta = s.describe("tx");
    assert_eq!(meta.as_ref().map(|m| m.epoch), Some(0));
    assert_eq!(meta.map(|m| m.tv2), Some(false));
}

#[test]
fn an_exhausted_epoch_moves_to_a_new_producer_id_after_the_markers() {
    let mut s = TxnShard::new(3, config());
    let worn = TxnMeta::new(42, i16::MAX - 1, 60_000, 0)
        .add(&part("t", 0), None, 1)
        .ok()
        .flatten();
    s.replay(
        0,
        None,
        super::records::TxnRecord {
            transactional_id: "tx".into(),
            value: worn,
        },
    );
    s.commit(1);
    let mut next = 1;
    let worn_out = (42, i16::MAX - 1);
    let (answer, jobs) = run(&mut s, &mut next, |s| {
        s.end_v2("tx", worn_out, true, None, at(2))
    });
    assert!(matches!(answer, Ok(EndAnswer::NeedProducerId)));
    assert!(jobs.is_empty(), "nothing decided without the new id");
    let (answer, jobs) = run(&mut s, &mut next, |s| {
        s.end_v2("tx", worn_out, true, Some(99), at(3))
    });
    assert_eq!(ended(answer), ((99, 0), true), "the client goes on as 99/0");
    assert_eq!(
        (jobs[0].producer_id, jobs[0].producer_epoch),
        (42, i16::MAX),
        "the markers still go out under the old id"
    );
    run(&mut s, &mut next, |s| s.complete("tx", 42, i16::MAX, at(4)));
    let meta = s.describe("tx");
    let ids = meta.as_ref().map(|m| {
        (
            m.producer_id,
            m.epoch,
            m.previous_producer_id,
            m.next_producer_id,
        )
    });
    assert_eq!(ids, Some((99, 0, 42, -1)));
    // The old producer's retry is recognised and told the new id.
    let (retry, _) = run(&mut s, &mut next, |s| {
        s.end_v2("tx", worn_out, true, None, at(5))
    });
    assert_eq!(ended(retry), ((99, 0), false));
    // The new id opens the next transaction.
    let (added, _) = run(&mut s, &mut next, |s| {
        s.add("tx", (99, 0), &part("t", 0), None, true, at(6))
    });
    assert_eq!(added, Ok(()));
}

#[test]
fn verify_only_answers_as_kafkas_coordinator() {
    let (mut s, mut next) = started(42);
    let parts = vec![("t".to_string(), 0), ("t".to_string(), 1)];
    assert_eq!(s.verify_only("tx", (42, 0), &parts), Ok(vec![false, false]));
    let (added, _) = run(&mut s, &mut next, |s| {
        s.add("tx", (42, 0), &part("t", 0), None, true, at(2))
    });
    assert_eq!(added, Ok(()));
    assert_eq!(s.verify_only("tx", (42, 0), &parts), Ok(vec![true, false]));
    assert_eq!(s.verify_only("tx", (42, 1), &parts), Err(TxnError::Fenced));
    assert_eq!(
        s.verify_only("tx", (41, 0), &parts),
        Err(TxnError::InvalidProducerIdMapping)
    );
    assert_eq!(
        s.verify_only("other", (42, 0), &parts),
        Err(TxnError::InvalidProducerIdMapping)
    );
    let (_, _) = run(&mut s, &mut next, |s| {
        s.end_v2("tx", (42, 0), true, None, at(3))
    });
    assert_eq!(
        s.verify_only("tx", (42, 1), &parts),
        Err(TxnError::ConcurrentTransactions)
    );
}
