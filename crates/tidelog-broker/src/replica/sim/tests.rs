use std::time::Instant;

use super::{run_seed, Outcome, Params, World};
use crate::replica::state::Role;

/// Seeds a plain `cargo test` runs; `TIDELOG_SIM_SEEDS` asks for more (a soak).
const CI_SEEDS: u64 = 3_000;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn report(seed: u64, outcome: &Outcome) -> String {
    format!(
        "seed {seed}: {}\nreplay with TIDELOG_SIM_SEED={seed} cargo test --release -p tidelog-broker \
         sim::tests::seeded\nlast steps:\n{}",
        outcome.violations.join("\n"),
        outcome.trace
    )
}

#[test]
fn seeded_runs_keep_every_acknowledged_write() {
    if let Some(seed) = env_u64("TIDELOG_SIM_SEED") {
        let outcome = run_seed(seed, Params::random_runs());
        eprintln!("{}", outcome.trace);
        assert!(outcome.violations.is_empty(), "{}", report(seed, &outcome));
        return;
    }
    let seeds = env_u64("TIDELOG_SIM_SEEDS").unwrap_or(CI_SEEDS);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    let started = Instant::now();
    let totals: Vec<(u64, u64, usize)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    let (mut acked, mut elections, mut failed) = (0u64, 0usize, Vec::new());
                    for seed in (0..seeds).filter(|s| s % threads == t) {
                        let outcome = run_seed(seed, Params::random_runs());
                        acked += outcome.acked as u64;
                        elections += outcome.elections;
                        if !outcome.violations.is_empty() {
                            failed.push(report(seed, &outcome));
                        }
                    }
                    (acked, elections, failed)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                let (acked, elections, failed) = w.join().expect("a worker panicked");
                assert!(failed.is_empty(), "{}", failed.join("\n\n"));
                (acked, elections as u64, 0)
            })
            .collect()
    });
    let acked: u64 = totals.iter().map(|t| t.0).sum();
    let elections: u64 = totals.iter().map(|t| t.1).sum();
    eprintln!(
        "{seeds} seeds in {:.1} s: {acked} acknowledged writes, {elections} leader elections, no violation",
        started.elapsed().as_secs_f64()
    );
    // A run with no elections or no writes would prove nothing.
    assert!(elections >= seeds, "too few elections: {elections}");
    assert!(acked >= seeds * 100, "too few writes: {acked}");
}

/// Seeds that found a bug, kept whatever the CI slice's size:
/// - 1952: a follower kept a record of an epoch older than every one the new leader
///   had (its epoch cache answered nothing), so two replicas held different records at
///   offset 0 below both high watermarks;
/// - 3601: an ISR expansion whose answer was lost was dropped by the leader, which then
///   committed records without the member the controller had added; that member was
///   elected and the records were gone.
const SEEDS_THAT_FOUND_BUGS: &[u64] = &[1952, 3601];

#[test]
fn seeds_that_found_bugs_stay_fixed() {
    for &seed in SEEDS_THAT_FOUND_BUGS {
        let outcome = run_seed(seed, Params::random_runs());
        assert!(outcome.violations.is_empty(), "{}", report(seed, &outcome));
    }
}

#[test]
fn a_seed_replays_exactly() {
    let mut params = Params::random_runs();
    params.faults_ms = 6_000;
    params.settle_ms = 6_000;
    let first = run_seed(7, params.clone());
    let second = run_seed(7, params);
    assert_eq!(first.digest, second.digest);
    assert_eq!(first.acked, second.acked);
    assert_eq!(first.trace, second.trace);
}

#[test]
fn the_checks_see_an_acknowledged_record_vanish() {
    let mut params = Params::random_runs();
    params.settle_ms = 3_000;
    let mut world = World::new(1, params);
    world.run_until(3_000, false);
    // Behind the cluster's back, the leader loses its tail: that must not pass.
    let leader = world
        .nodes
        .iter()
        .find_map(|n| n.part.clone().filter(|p| p.role() == Role::Leader))
        .expect("a leader");
    leader
        .with_log(|log| log.truncate_to(log.log_end_offset() / 2))
        .expect("truncate");
    let outcome = world.finish();
    assert!(
        outcome
            .violations
            .iter()
            .any(|v| v.contains("acknowledged")),
        "{:?}",
        outcome.violations
    );
}

/// The chapter's unclean election: a replica out of the ISR for longer than
/// replica.lag.time.max.ms (30 s) is promoted after every ISR member died.
fn lagging_replica_promoted(unclean: bool) -> (Outcome, f64) {
    let params = Params {
        nodes: 3,
        min_isr: 1,
        unclean,
        lag_max_ms: 30_000,
        session_timeout_ms: 9_000,
        fetch_max_wait_ms: 500,
        // The chapter's 61 records/s on the partition.
        produce_every_us: 1_000_000 / 61,
        produce_batch: 1,
        // acks=1, so that the writes do not wait 30 s for the replica falling behind.
        acks_all: false,
        faults_ms: 0,
        settle_ms: 20_000,
    };
    let mut world = World::new(42, params);
    world.run_until(2_000, false);
    // Node 3 stops fetching but stays registered and heartbeating.
    world.cut_between(3, 1);
    world.cut_between(3, 2);
    // Out of the ISR at about 32 s (30 s without catching up); the leaders'
    // high-watermark checkpoint (every 5 s) has recorded what was committed since.
    world.run_until(38_000, false);
    let rate = world.client_acked() as f64 / 38.0;
    // Both in-sync replicas die; the lagging one is alone.
    world.crash(1, i64::MAX);
    world.crash(2, i64::MAX);
    world.heal();
    world.run_until(60_000, false);
    world.restart_now(1);
    world.restart_now(2);
    world.run_until(70_000, false);
    (world.finish(), rate)
}

#[test]
fn unclean_election_truncates_the_lag_window_as_the_chapter_counts() {
    let (outcome, rate) = lagging_replica_promoted(true);
    // The chapter: 61 records/s x 30 s = 1,830 records at least, on each partition.
    let window = 61 * 30;
    let largest = outcome.truncated.largest;
    assert!(
        largest >= window,
        "the old leader lost {largest} < {window} ({rate:.1} records/s)\n{}",
        outcome.trace
    );
    assert!(
        outcome.acked_lost as i64 >= window,
        "lost {} of {} acks; truncated {largest}\n{}",
        outcome.acked_lost,
        outcome.acked,
        outcome.trace
    );
    assert!(
        outcome.renumbered > 0,
        "the new leader hands out offsets again"
    );
    eprintln!(
        "unclean election: the old leader truncated {largest} committed records at \
         {rate:.1} records/s; x 128 partitions = {} (the chapter: 1,830 x 128 = 234,240)",
        largest * 128
    );
}

#[test]
fn clean_elections_lose_nothing_in_the_same_case() {
    let (outcome, _) = lagging_replica_promoted(false);
    assert!(
        outcome.violations.is_empty(),
        "{}",
        outcome.violations.join("\n")
    );
    assert_eq!(outcome.truncated.total, 0);
    assert!(
        outcome.acked > 2_000,
        "acked {}\n{}",
        outcome.acked,
        outcome.trace
    );
    // acks=1: at most the few records the dead leader had not replicated yet.
    assert!(
        outcome.acked_lost < 20,
        "lost {}\n{}",
        outcome.acked_lost,
        outcome.trace
    );
}
