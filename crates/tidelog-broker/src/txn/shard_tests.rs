//! The transaction coordinator's steps without a network or a disk: a transaction's
//! life, fencing, timeouts, and what a decision hands to the marker worker.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::shard::{InitAnswer, MarkerJob, TxnShard};
use super::state::{TxnError, TxnState};
use super::TxnConfig;
use crate::coordinator::{Now, Outcome, Shard, Write};

pub(super) fn config() -> Arc<TxnConfig> {
    Arc::new(TxnConfig {
        num_partitions: 50,
        replication_factor: 1,
        max_timeout_ms: 900_000,
        id_expiration_ms: 604_800_000,
        timeout_check_every: Duration::from_secs(1),
    })
}

pub(super) fn at(ms: i64) -> Now {
    Now {
        at: Instant::now() + Duration::from_millis(u64::try_from(ms).unwrap_or(0)),
        ms,
    }
}

/// Runs a step the way the runtime does: its records are replayed (and committed)
/// at the next offsets; returns its answer and effects.
pub(super) fn run<R>(
    shard: &mut TxnShard,
    next: &mut i64,
    step: impl FnOnce(&mut TxnShard) -> Outcome<TxnShard, R>,
) -> (R, Vec<MarkerJob>) {
    let outcome = step(shard);
    if let Write::Records { records, .. } = outcome.write {
        for r in records {
            shard.replay(*next, None, r);
            *next += 1;
        }
    }
    shard.commit(*next);
    if let Some(then) = outcome.then {
        then(shard, Ok(()));
    }
    (outcome.response, outcome.effects)
}

pub(super) fn init(
    shard: &mut TxnShard,
    next: &mut i64,
    fresh: Option<i64>,
    ms: i64,
) -> InitAnswer {
    run(shard, next, |s| {
        s.init_producer_id("tx", 60_000, None, fresh, at(ms))
    })
    .0
}

#[test]
fn a_transaction_from_init_to_complete() {
    let mut s = TxnShard::new(4, config());
    let mut next = 0;
    assert!(matches!(
        init(&mut s, &mut next, None, 1),
        InitAnswer::NeedProducerId
    ));
    let InitAnswer::Done { producer_id, epoch } = init(&mut s, &mut next, Some(42), 1) else {
        panic!()
    };
    assert_eq!((producer_id, epoch), (42, 0));
    let parts = vec![("t".to_string(), 0), ("t".to_string(), 1)];
    let (added, _) = run(&mut s, &mut next, |s| {
        s.add("tx", (42, 0), &parts, None, false, at(2))
    });
    assert_eq!(added, Ok(()));
    assert_eq!(s.verify("tx", 42, 0, "t", 1), Ok(()));
    assert_eq!(
        s.verify("tx", 42, 0, "t", 2),
        Err(TxnError::InvalidTxnState)
    );
    let (ended, jobs) = run(&mut s, &mut next, |s| s.end("tx", (42, 0), true, at(3)));
    let mut done = ended.unwrap().expect("waits for its markers");
    assert_eq!(jobs.len(), 1);
    assert!(jobs[0].commit);
    assert_eq!(jobs[0].coordinator_epoch, 4);
    assert_eq!(jobs[0].partitions, parts);
    assert_eq!(s.describe("tx").unwrap().state, TxnState::PrepareCommit);
    // While its markers are written, the next transaction waits.
    let (busy, _) = run(&mut s, &mut next, |s| {
        s.add("tx", (42, 0), &parts, None, false, at(4))
    });
    assert_eq!(busy, Err(TxnError::ConcurrentTransactions));
    assert!(matches!(
        init(&mut s, &mut next, None, 4),
        InitAnswer::Failed(TxnError::ConcurrentTransactions)
    ));
    run(&mut s, &mut next, |s| s.complete("tx", 42, 0, at(5)));
    assert_eq!(s.describe("tx").unwrap().state, TxnState::CompleteCommit);
    assert!(done.try_recv().is_ok(), "EndTxn hears it is complete");
    // A retried EndTxn of the same decision succeeds at once.
    let (again, _) = run(&mut s, &mut next, |s| s.end("tx", (42, 0), true, at(6)));
    assert!(matches!(again, Ok(None)));
}

#[test]
fn a_new_producer_fences_an_open_transaction_and_retries_after_its_abort() {
    let mut s = TxnShard::new(1, config());
    let mut next = 0;
    init(&mut s, &mut next, Some(7), 1);
    let parts = vec![("t".to_string(), 0)];
    let (added, _) = run(&mut s, &mut next, |s| {
        s.add("tx", (7, 0), &parts, None, false, at(2))
    });
    assert_eq!(added, Ok(()));
    let (answer, jobs) = run(&mut s, &mut next, |s| {
        s.init_producer_id("tx", 60_000, None, None, at(3))
    });
    assert!(matches!(
        answer,
        InitAnswer::Failed(TxnError::ConcurrentTransactions)
    ));
    assert_eq!(jobs.len(), 1);
    assert!(!jobs[0].commit, "the open transaction is aborted...");
    assert_eq!(
        jobs[0].producer_epoch, 1,
        "...under a new epoch that fences the old producer"
    );
    assert_eq!(s.verify("tx", 7, 0, "t", 0), Err(TxnError::Fenced));
    run(&mut s, &mut next, |s| s.complete("tx", 7, 1, at(4)));
    let InitAnswer::Done { producer_id, epoch } = init(&mut s, &mut next, None, 5) else {
        panic!()
    };
    assert_eq!((producer_id, epoch), (7, 2));
    let (old, _) = run(&mut s, &mut next, |s| {
        s.add("tx", (7, 0), &parts, None, false, at(6))
    });
    assert_eq!(old, Err(TxnError::Fenced));
}

#[test]
fn the_clock_aborts_a_transaction_open_past_its_timeout_and_hands_out_undone_markers() {
    let mut s = TxnShard::new(1, config());
    let mut next = 0;
    init(&mut s, &mut next, Some(7), 0);
    let parts = vec![("t".to_string(), 0)];
    let (added, _) = run(&mut s, &mut next, |s| {
        s.add("tx", (7, 0), &parts, None, false, at(0))
    });
    assert_eq!(added, Ok(()));
    let (_, jobs) = run(&mut s, &mut next, |s| s.tick(at(30_000)));
    assert!(jobs.is_empty(), "not yet timed out");
    let (_, jobs) = run(&mut s, &mut next, |s| s.tick(at(61_000)));
    assert_eq!(jobs.len(), 1);
    assert_eq!(s.describe("tx").unwrap().state, TxnState::PrepareEpochFence);
    // Markers not done within a while are handed out again (e.g. the worker lost them).
    let (_, jobs) = run(&mut s, &mut next, |s| s.tick(at(62_000)));
    assert!(jobs.is_empty(), "just handed out");
    let (_, jobs) = run(&mut s, &mut next, |s| s.tick(at(68_000)));
    assert_eq!(jobs.len(), 1);
    // A new leader of the partition finds it deciding and hands it out on load.
    let mut successor = TxnShard::new(2, config());
    successor.replay(
        0,
        None,
        super::records::TxnRecord {
            transactional_id: "tx".into(),
            value: s.describe("tx"),
        },
    );
    successor.commit(1);
    let jobs = successor.loaded(at(70_000));
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].coordinator_epoch, 2, "stamped with the new epoch");
}

#[test]
fn offsets_an_earlier_release_kept_in_a_committing_transaction_go_with_its_job() {
    let mut s = TxnShard::new(1, config());
    let meta = super::TxnMeta::new(9, 0, 60_000, 0)
        .add(&[], Some("g"), 1)
        .unwrap()
        .unwrap()
        .with_offsets(
            "g",
            super::state::Committer::default(),
            &[(
                "in".into(),
                3,
                super::PendingOffset {
                    offset: 5,
                    leader_epoch: -1,
                    metadata: None,
                },
            )],
            2,
        )
        .unwrap()
        .end(true, 3)
        .unwrap()
        .unwrap();
    s.replay(
        0,
        None,
        super::records::TxnRecord {
            transactional_id: "old".into(),
            value: Some(meta),
        },
    );
    s.commit(1);
    let jobs = s.loaded(at(10));
    assert_eq!(jobs.len(), 1);
    let legacy = &jobs[0].legacy_offsets["g"];
    assert_eq!(legacy.len(), 1);
    assert_eq!(
        (legacy[0].0.as_str(), legacy[0].1, legacy[0].2.offset),
        ("in", 3, 5)
    );
}
