//! The rebalance workload: how long a group of N librdkafka members takes to absorb one
//! more, and how much consumption stops meanwhile, under the classic protocol's eager
//! rebalance (`range`), its cooperative one (`cooperative-sticky`, KIP-429) and KIP-848's
//! (`group.protocol=consumer`, the broker assigns).
//!
//! Ownership is read off each member's rebalance callbacks: a partition is owned from
//! its member's assign callback to its revoke callback, so "without an owner" is exactly
//! the time no member could consume it. The group is settled first (every partition
//! owned, members within one partition of each other, nothing moving for two heartbeat
//! intervals); then the new member subscribes, and the absorb ends at the callback that
//! leaves the group settled again with the new member holding its share.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::ClientContext;

use super::base_config;
use crate::report::Figure;
use crate::stats::median;

/// The three ways a group can rebalance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protocol {
    Eager,
    Cooperative,
    Consumer,
}

impl Protocol {
    pub(crate) const ALL: [Protocol; 3] =
        [Protocol::Eager, Protocol::Cooperative, Protocol::Consumer];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Protocol::Eager => "classic eager (range)",
            Protocol::Cooperative => "classic cooperative-sticky",
            Protocol::Consumer => "KIP-848 (group.protocol=consumer)",
        }
    }
}

pub(crate) struct RebalanceSpec {
    pub(crate) bootstrap: String,
    pub(crate) topic: String,
    pub(crate) partitions: i32,
    /// Members before the new one joins.
    pub(crate) members: usize,
    /// The classic members' `heartbeat.interval.ms`; KIP-848's is the broker's
    /// `group.consumer.heartbeat.interval.ms`, which the run should set to the same.
    pub(crate) heartbeat: Duration,
    /// How long each member's revoke callback takes (its commit and flush).
    pub(crate) on_revoke: Duration,
    /// The longest the group may take to settle, before and after.
    pub(crate) timeout: Duration,
}

#[derive(Clone, Debug)]
pub(crate) struct RebalanceResult {
    /// From the new member's subscribe to the callback that settled the group.
    pub(crate) seconds: f64,
    /// Summed over partitions: seconds without an owner during the absorb.
    pub(crate) unowned_partition_seconds: f64,
    /// Members that had partitions revoked during the absorb.
    pub(crate) members_revoked: usize,
    /// Partitions whose owner changed.
    pub(crate) partitions_moved: usize,
}

/// Who owns what, from every member's callbacks.
#[derive(Default)]
struct Ownership {
    owner: BTreeMap<i32, usize>,
    /// Partitions without an owner, since when.
    unowned_since: BTreeMap<i32, Instant>,
    last_change: Option<Instant>,
    /// Set when the absorb starts: what is counted from then on.
    absorb: Option<Absorb>,
}

struct Absorb {
    start: Instant,
    owner_before: BTreeMap<i32, usize>,
    unowned_seconds: f64,
    revoked: BTreeSet<usize>,
}

impl Ownership {
    fn assign(&mut self, member: usize, partitions: &[i32], at: Instant) {
        for p in partitions {
            if let Some(since) = self.unowned_since.remove(p) {
                if let Some(a) = &mut self.absorb {
                    a.unowned_seconds += at.duration_since(since.max(a.start)).as_secs_f64();
                }
            }
            self.owner.insert(*p, member);
        }
        self.last_change = Some(at);
    }

    fn revoke(&mut self, member: usize, partitions: &[i32], at: Instant) {
        for p in partitions {
            if self.owner.get(p) == Some(&member) {
                self.owner.remove(p);
                self.unowned_since.insert(*p, at);
                if let Some(a) = &mut self.absorb {
                    a.revoked.insert(member);
                }
            }
        }
        self.last_change = Some(at);
    }

    /// Every partition owned, by exactly `members` members within one partition of
    /// each other.
    fn balanced(&self, partitions: i32, members: usize) -> bool {
        if self.owner.len() != usize::try_from(partitions).unwrap_or(0) {
            return false;
        }
        let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
        for m in self.owner.values() {
            *counts.entry(*m).or_default() += 1;
        }
        let (min, max) = counts
            .values()
            .fold((usize::MAX, 0), |(lo, hi), c| (lo.min(*c), hi.max(*c)));
        counts.len() == members && max - min <= 1
    }
}

struct MemberContext {
    member: usize,
    ownership: Arc<Mutex<Ownership>>,
    /// What the application does before it gives partitions up (commit, flush).
    on_revoke: Duration,
}

impl MemberContext {
    fn partitions(rebalance: &Rebalance<'_>) -> Option<(bool, Vec<i32>)> {
        match rebalance {
            Rebalance::Assign(tpl) => {
                Some((true, tpl.elements().iter().map(|e| e.partition()).collect()))
            }
            Rebalance::Revoke(tpl) => Some((
                false,
                tpl.elements().iter().map(|e| e.partition()).collect(),
            )),
            Rebalance::Error(_) => None,
        }
    }
}

/// With TIDELOG_BENCH_VERBOSE set, each callback is printed (to study one run).
fn verbose(member: usize, what: &str, partitions: &[i32]) {
    if std::env::var_os("TIDELOG_BENCH_VERBOSE").is_some() {
        eprintln!(
            "{:?} member {member}: {what} {partitions:?}",
            std::time::SystemTime::now()
        );
    }
}

impl ClientContext for MemberContext {}

impl ConsumerContext for MemberContext {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        // A revocation ends ownership before the client gives the partitions up.
        if let Some((false, partitions)) = Self::partitions(rebalance) {
            verbose(self.member, "revoke", &partitions);
            {
                let mut o = self.ownership.lock().unwrap_or_else(|p| p.into_inner());
                o.revoke(self.member, &partitions, Instant::now());
            }
            if !partitions.is_empty() {
                std::thread::sleep(self.on_revoke);
            }
        }
    }

    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        // An assignment starts ownership once the client has taken it.
        if let Some((true, partitions)) = Self::partitions(rebalance) {
            verbose(self.member, "assign", &partitions);
            let mut o = self.ownership.lock().unwrap_or_else(|p| p.into_inner());
            o.assign(self.member, &partitions, Instant::now());
        }
    }
}

/// A member polling on its own thread until `stop` (callbacks run inside poll).
struct Member {
    thread: JoinHandle<anyhow::Result<()>>,
}

fn start_member(
    spec: &RebalanceSpec,
    protocol: Protocol,
    group: &str,
    member: usize,
    ownership: &Arc<Mutex<Ownership>>,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<Member> {
    let mut config = base_config(&spec.bootstrap);
    config
        .set("group.id", group)
        .set("client.id", format!("rebalance-{member}"))
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest");
    match protocol {
        Protocol::Eager | Protocol::Cooperative => {
            let strategy = if protocol == Protocol::Eager {
                "range"
            } else {
                "cooperative-sticky"
            };
            config
                .set("group.protocol", "classic")
                .set("partition.assignment.strategy", strategy)
                .set(
                    "heartbeat.interval.ms",
                    spec.heartbeat.as_millis().to_string(),
                );
        }
        Protocol::Consumer => {
            config.set("group.protocol", "consumer");
        }
    }
    let context = MemberContext {
        member,
        ownership: Arc::clone(ownership),
        on_revoke: spec.on_revoke,
    };
    let consumer: BaseConsumer<MemberContext> = config.create_with_context(context)?;
    consumer.subscribe(&[&spec.topic])?;
    let stop = Arc::clone(stop);
    let thread = std::thread::Builder::new()
        .name(format!("member-{member}"))
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some(Err(e)) = consumer.poll(Duration::from_millis(50)) {
                    // The client recovers from these itself (e.g. a rebalance under way).
                    if std::env::var_os("TIDELOG_BENCH_VERBOSE").is_some() {
                        eprintln!("member {member}: {e}");
                    }
                }
            }
            Ok(())
        })?;
    Ok(Member { thread })
}

/// Waits until the group is balanced over `members` members and has not moved for
/// `quiet`; the instant of its last change.
fn settle(
    ownership: &Mutex<Ownership>,
    partitions: i32,
    members: usize,
    quiet: Duration,
    deadline: Instant,
) -> anyhow::Result<Instant> {
    loop {
        let now = Instant::now();
        {
            let o = ownership.lock().unwrap_or_else(|p| p.into_inner());
            if o.balanced(partitions, members) {
                let last = o.last_change.unwrap_or(now);
                if now.duration_since(last) >= quiet {
                    return Ok(last);
                }
            }
            if now >= deadline {
                bail!(
                    "the group did not settle over {members} members: {} of {partitions} partitions owned",
                    o.owner.len()
                );
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One absorb: `spec.members` members settle, one more joins, the group settles again.
pub(crate) fn run(spec: &RebalanceSpec, protocol: Protocol) -> anyhow::Result<RebalanceResult> {
    if spec.partitions < i32::try_from(spec.members + 1).unwrap_or(i32::MAX) {
        bail!(
            "every member needs a partition: {} partitions for {} members",
            spec.partitions,
            spec.members + 1
        );
    }
    let group = super::fresh_topic("rebalance-group");
    let ownership = Arc::new(Mutex::new(Ownership::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut members = Vec::with_capacity(spec.members + 1);
    let outcome = (|| {
        for m in 0..spec.members {
            members.push(start_member(spec, protocol, &group, m, &ownership, &stop)?);
        }
        let quiet = spec.heartbeat * 2;
        settle(
            &ownership,
            spec.partitions,
            spec.members,
            quiet,
            Instant::now() + spec.timeout,
        )?;
        {
            let mut o = ownership.lock().unwrap_or_else(|p| p.into_inner());
            let owner_before = o.owner.clone();
            o.absorb = Some(Absorb {
                start: Instant::now(),
                owner_before,
                unowned_seconds: 0.0,
                revoked: BTreeSet::new(),
            });
        }
        let start = Instant::now();
        members.push(start_member(
            spec,
            protocol,
            &group,
            spec.members,
            &ownership,
            &stop,
        )?);
        let done = settle(
            &ownership,
            spec.partitions,
            spec.members + 1,
            quiet,
            start + spec.timeout,
        )?;
        let o = ownership.lock().unwrap_or_else(|p| p.into_inner());
        let absorb = o
            .absorb
            .as_ref()
            .ok_or_else(|| anyhow!("the absorb was not recorded"))?;
        let moved = absorb
            .owner_before
            .iter()
            .filter(|(p, m)| o.owner.get(p) != Some(m))
            .count();
        Ok(RebalanceResult {
            seconds: done.saturating_duration_since(start).as_secs_f64(),
            unowned_partition_seconds: absorb.unowned_seconds,
            members_revoked: absorb.revoked.len(),
            partitions_moved: moved,
        })
    })();
    stop.store(true, Ordering::Relaxed);
    for m in members {
        match m.thread.join() {
            Ok(r) => r?,
            Err(_) => bail!("a member thread panicked"),
        }
    }
    outcome
}

/// `runs` absorbs of each protocol, interleaved (the machine is shared and noisy): the
/// medians, one row per protocol and figure.
pub(crate) fn figures(spec: &RebalanceSpec, runs: usize) -> anyhow::Result<Vec<Figure>> {
    let mut results: BTreeMap<&'static str, Vec<RebalanceResult>> = BTreeMap::new();
    for run_index in 0..runs.max(1) {
        for protocol in Protocol::ALL {
            eprintln!(
                "rebalance run {}/{}: {} members + 1, {}",
                run_index + 1,
                runs.max(1),
                spec.members,
                protocol.name()
            );
            let result = run(spec, protocol)?;
            results.entry(protocol.name()).or_default().push(result);
        }
    }
    let mut figures = Vec::new();
    for protocol in Protocol::ALL {
        let rs = results.get(protocol.name()).map_or(&[][..], Vec::as_slice);
        let m = |f: fn(&RebalanceResult) -> f64| median(&rs.iter().map(f).collect::<Vec<_>>());
        let workload = format!("{} members absorb 1, {}", spec.members, protocol.name());
        let note = format!(
            "median of {}; {} partitions, heartbeat {} ms, revoke callback {} ms; {:.0} members revoked, {:.0} partitions moved",
            rs.len(),
            spec.partitions,
            spec.heartbeat.as_millis(),
            spec.on_revoke.as_millis(),
            m(|r| r.members_revoked as f64),
            m(|r| r.partitions_moved as f64),
        );
        figures.push(Figure::new("rebalance", &workload, m(|r| r.seconds), "s").note(note));
        figures.push(
            Figure::new(
                "rebalance",
                &workload,
                m(|r| r.unowned_partition_seconds),
                "partition-s unowned",
            )
            .note("summed over partitions: time no member could consume it"),
        );
    }
    Ok(figures)
}
