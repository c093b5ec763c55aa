//! A seeded simulation of one partition's replication and the controller's part in it
//! (issue 18, part 2). Three brokers, each a real [`Partition`](super::partition::Partition)
//! over a real log on disk, and the controller's real planners, exchange messages
//! through a simulated network (delay, drop, duplicate, reorder, one-way cuts) on a
//! simulated clock, while a client writes with acks=all and a seeded schedule crashes
//! (kill -9: files kept), pauses and isolates nodes. After every step the checks in
//! `checks.rs` run; at the end the network heals and the replicas must converge.
//!
//! Everything that decides is the broker's and controller's own code; what is modelled
//! is the glue the async tasks provide (when a fetch is sent, what its answer makes the
//! follower do), written after `fetcher.rs`, `apis/fetch.rs` and `isr.rs`. Raft itself
//! is not simulated here: the controller is one reliable process (its quorum has its
//! own tests). One thread, no tokio, no wall clock: a seed replays exactly.
//!
//! `TIDELOG_SIM_SEEDS=N` runs N seeds (CI runs a fixed slice), `TIDELOG_SIM_SEED=S`
//! replays one and prints its trace.

mod checks;
mod client;
mod controller;
mod net;
mod node;
mod rng;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

use checks::Checks;
use client::SimClient;
use controller::SimController;
use net::{Addr, Msg, Net, Weather};
use node::{Ctx, Run, SimNode};
use rng::Rng;

const TICK_MS: i64 = 5;
const FENCE_CHECK_MS: i64 = 100;
const DATA_CHECK_TICKS: u64 = 400;
const TRACE_LINES: usize = 400;
/// After settling, the client stops and replication gets this long to finish before
/// the logs are compared.
const QUIET_MS: i64 = 3_000;

#[derive(Debug, Clone)]
struct Params {
    nodes: i32,
    min_isr: usize,
    unclean: bool,
    /// replica.lag.time.max.ms
    lag_max_ms: i64,
    /// broker.session.timeout.ms
    session_timeout_ms: i64,
    /// replica.fetch.wait.max.ms: how long a leader holds a follower fetch it has
    /// nothing for.
    fetch_max_wait_ms: i64,
    /// One produce every this many microseconds, on average.
    produce_every_us: i64,
    produce_batch: i64,
    /// acks=all (else acks=1: answered once the leader appended).
    acks_all: bool,
    /// The seeded faults run this long; then everything heals and the cluster settles.
    faults_ms: i64,
    settle_ms: i64,
}

impl Params {
    /// The random runs: RF 3, min.insync.replicas 2, short timeouts so that a few
    /// simulated seconds hold many ISR changes and elections.
    fn random_runs() -> Self {
        Params {
            nodes: 3,
            min_isr: 2,
            unclean: false,
            lag_max_ms: 1_500,
            session_timeout_ms: 2_000,
            fetch_max_wait_ms: 500,
            produce_every_us: 20_000,
            produce_batch: 3,
            acks_all: true,
            faults_ms: 15_000,
            settle_ms: 8_000,
        }
    }
}

/// The last lines of what happened, for a failing seed's report, and a digest of all
/// of it, to show a seed replays.
struct Trace {
    lines: VecDeque<String>,
    digest: std::collections::hash_map::DefaultHasher,
}

impl Trace {
    fn new() -> Self {
        Trace {
            lines: VecDeque::new(),
            digest: std::collections::hash_map::DefaultHasher::new(),
        }
    }

    fn note(&mut self, now: i64, line: String) {
        now.hash(&mut self.digest);
        line.hash(&mut self.digest);
        if self.lines.len() == TRACE_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(format!("{now:>7} ms  {line}"));
    }

    fn text(&self) -> String {
        self.lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// Committed records followers cut (below their high watermark): the whole run's,
/// and the most one truncation cut.
#[derive(Debug, Default, Clone, Copy)]
struct Truncated {
    total: i64,
    largest: i64,
}

/// What one run found.
struct Outcome {
    violations: Vec<String>,
    digest: u64,
    acked: usize,
    /// Records followers cut below their high watermark.
    truncated: Truncated,
    /// Acknowledged records the final leader's log does not hold at their offset.
    acked_lost: usize,
    renumbered: usize,
    elections: usize,
    trace: String,
}

struct World {
    params: Params,
    now: i64,
    rng: Rng,
    net: Net,
    weather: Weather,
    ctl: SimController,
    nodes: Vec<SimNode>,
    client: SimClient,
    checks: Checks,
    trace: Trace,
    truncated: Truncated,
    ticks: u64,
    producing: bool,
    next_fence_check: i64,
    /// When the fault under way ends, and whether it is one the network heals.
    fault_until: Option<i64>,
    _dir: tempfile::TempDir,
}

impl World {
    fn new(seed: u64, params: Params) -> Self {
        // Memory-backed where there is one: the logs' fsyncs are then free, and a run
        // is bound by the code it tests, not by the disk's flush latency.
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm)
        } else {
            tempfile::tempdir()
        };
        let dir = dir.expect("temp dir");
        let ids: Vec<i32> = (1..=params.nodes).collect();
        let ctl = SimController::new(&ids, params.unclean, params.session_timeout_ms);
        let nodes = ids
            .iter()
            .map(|&id| {
                let epoch = ctl.image().broker(id).map_or(0, |b| b.epoch);
                SimNode::new(id, dir.path().join(format!("node{id}")).join("t-0"), epoch)
            })
            .collect();
        World {
            params,
            now: 0,
            rng: Rng::new(seed),
            net: Net::new(Weather::CALM),
            weather: Weather::CALM,
            ctl,
            nodes,
            client: SimClient::new(),
            checks: Checks::default(),
            trace: Trace::new(),
            truncated: Truncated::default(),
            ticks: 0,
            producing: true,
            next_fence_check: 0,
            fault_until: None,
            _dir: dir,
        }
    }

    fn addrs(&self) -> Vec<Addr> {
        let mut all: Vec<Addr> = self.nodes.iter().map(|n| Addr::Node(n.id)).collect();
        all.push(Addr::Controller);
        all.push(Addr::Client);
        all
    }

    fn node_index(&self, id: i32) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == id)
    }

    /// Runs until `until` ms of simulated time, with seeded faults when `faults`.
    fn run_until(&mut self, until: i64, faults: bool) {
        while self.now < until {
            self.now += TICK_MS;
            self.ticks += 1;
            self.deliver();
            if self.now >= self.next_fence_check {
                self.next_fence_check = self.now + FENCE_CHECK_MS;
                let fenced = self.ctl.fence_expired(self.now);
                if !fenced.is_empty() {
                    let v = self.ctl.version();
                    self.trace.note(
                        self.now,
                        format!("controller fences {fenced:?} (image v{v})"),
                    );
                }
            }
            for i in 0..self.nodes.len() {
                self.with_node(i, |node, ctx| node.tick(ctx));
            }
            if self.producing {
                self.client.tick(
                    self.now,
                    self.params.produce_every_us,
                    self.params.produce_batch,
                    &self.ctl.images,
                    &mut self.net,
                    &mut self.rng,
                );
            }
            if faults {
                self.faults();
            }
            self.checks.step(self.now, &self.nodes, &self.ctl.images);
            if !self.params.unclean
                && self.params.acks_all
                && self.ticks.is_multiple_of(DATA_CHECK_TICKS)
            {
                let image = self.ctl.image();
                self.checks
                    .data(self.now, &self.nodes, image, &self.client.acked);
            }
        }
    }

    /// Runs `f` on node `i` with the world's clock, network and images.
    fn with_node(&mut self, i: usize, f: impl FnOnce(&mut SimNode, &mut Ctx<'_>)) {
        let mut ctx = Ctx {
            now: self.now,
            net: &mut self.net,
            rng: &mut self.rng,
            images: &self.ctl.images,
            params: &self.params,
            truncated: &mut self.truncated,
            trace: &mut self.trace,
        };
        f(&mut self.nodes[i], &mut ctx);
    }

    fn deliver(&mut self) {
        while let Some(envelope) = self.net.next_due(self.now) {
            match envelope.to {
                Addr::Controller => self.at_controller(envelope.from, envelope.msg),
                Addr::Client => self.client.on_message(envelope.msg),
                Addr::Node(id) => {
                    let Some(i) = self.node_index(id) else {
                        continue;
                    };
                    match self.nodes[i].run {
                        Run::Down { .. } => {}
                        // Held past this tick at least: the node resumes in its tick.
                        Run::Paused { until } => self.net.hold(envelope, until.max(self.now + 1)),
                        Run::Up => self.with_node(i, |node, ctx| {
                            node.on_message(envelope.from, envelope.msg, ctx);
                        }),
                    }
                }
            }
        }
    }

    fn at_controller(&mut self, from: Addr, msg: Msg) {
        let now = self.now;
        let before = self.ctl.version();
        let reply = match (from, msg) {
            (Addr::Node(id), Msg::Register { incarnation }) => {
                let broker_epoch = self.ctl.register(id, incarnation, now);
                Some(Msg::Registered { broker_epoch })
            }
            (Addr::Node(id), Msg::Heartbeat { broker_epoch }) => {
                let stale = self.ctl.heartbeat(id, broker_epoch, now).is_err();
                Some(Msg::HeartbeatReply { stale })
            }
            (_, Msg::MetadataFetch { have }) => {
                have.is_none_or(|h| self.ctl.version() > h)
                    .then(|| Msg::Metadata {
                        version: self.ctl.version(),
                    })
            }
            (Addr::Node(_), Msg::AlterIsr { id, request }) => {
                let result = self.ctl.alter_isr(&request);
                Some(Msg::AlterIsrReply { id, result })
            }
            _ => None,
        };
        if self.ctl.version() != before {
            let p = self
                .ctl
                .image()
                .topic_by_id(&controller::TOPIC_ID)
                .and_then(|t| t.partitions.get(&0))
                .map(|p| {
                    format!(
                        "leader {} epoch {} isr {:?}",
                        p.leader, p.leader_epoch, p.isr
                    )
                })
                .unwrap_or_default();
            let v = self.ctl.version();
            self.trace
                .note(now, format!("image v{v} after {from:?}: {p}"));
        }
        if let Some(reply) = reply {
            self.net
                .send(&mut self.rng, now, Addr::Controller, from, reply);
        }
    }

    fn client_acked(&self) -> usize {
        self.client.acked.len()
    }

    // --- faults

    fn crash(&mut self, id: i32, restart_at: i64) {
        if let Some(i) = self.node_index(id) {
            self.nodes[i].crash(restart_at);
            self.trace.note(
                self.now,
                format!("kill -9 node {id} (back at {restart_at})"),
            );
        }
    }

    fn restart_now(&mut self, id: i32) {
        if let Some(i) = self.node_index(id) {
            if let Run::Down { .. } = self.nodes[i].run {
                self.nodes[i].run = Run::Down {
                    restart_at: self.now,
                };
            }
        }
    }

    /// Cuts both directions between `a` and `b`.
    fn cut_between(&mut self, a: i32, b: i32) {
        self.net.cut(Addr::Node(a), Addr::Node(b));
        self.net.cut(Addr::Node(b), Addr::Node(a));
        self.trace.note(self.now, format!("cut {a} <-> {b}"));
    }

    fn heal(&mut self) {
        self.net.heal();
        self.net.weather = self.weather;
        for node in &mut self.nodes {
            if let Run::Paused { .. } = node.run {
                node.run = Run::Paused { until: self.now };
            }
        }
        self.trace.note(self.now, "network healed".into());
    }

    fn faults(&mut self) {
        if let Some(until) = self.fault_until {
            if self.now < until {
                return;
            }
            self.fault_until = None;
            if self.net.has_cuts() || self.net.weather.drop > 0 {
                self.heal();
            }
            return;
        }
        // A calm stretch between faults.
        if !self.rng.chance(15) {
            return;
        }
        let ids: Vec<i32> = self.nodes.iter().map(|n| n.id).collect();
        // Half the faults hit the leader, where they matter most.
        let leader = self
            .ctl
            .image()
            .topic_by_id(&controller::TOPIC_ID)
            .and_then(|t| t.partitions.get(&0))
            .map_or(-1, |p| p.leader);
        let victim = if leader >= 0 && self.rng.chance(500) {
            leader
        } else {
            *self.rng.pick(&ids).unwrap_or(&1)
        };
        let hold = self.rng.range(200, 5_000);
        let until = self.now + hold;
        match self.rng.range(0, 7) {
            0 => self.crash(victim, until),
            1 => {
                let other = *self.rng.pick(&ids).unwrap_or(&1);
                self.crash(victim, until);
                if other != victim {
                    let later = until + self.rng.range(0, 2_000);
                    self.crash(other, later);
                }
            }
            2 => {
                if let Some(i) = self.node_index(victim) {
                    if self.nodes[i].run == Run::Up {
                        self.nodes[i].run = Run::Paused { until };
                        self.trace
                            .note(self.now, format!("SIGSTOP node {victim} for {hold} ms"));
                    }
                }
            }
            3 => {
                let all = self.addrs();
                self.net.isolate(Addr::Node(victim), &all);
                self.trace
                    .note(self.now, format!("isolate node {victim} for {hold} ms"));
            }
            4 => {
                self.net.cut(Addr::Node(victim), Addr::Controller);
                self.net.cut(Addr::Controller, Addr::Node(victim));
                self.trace.note(
                    self.now,
                    format!("cut node {victim} from the controller for {hold} ms"),
                );
            }
            5 => {
                let other = *self.rng.pick(&ids).unwrap_or(&1);
                if other != victim {
                    self.net.cut(Addr::Node(victim), Addr::Node(other));
                    self.trace.note(
                        self.now,
                        format!("cut {victim} -> {other} one way for {hold} ms"),
                    );
                }
            }
            6 => {
                self.net.cut(Addr::Client, Addr::Node(victim));
                self.net.cut(Addr::Node(victim), Addr::Client);
                self.trace.note(
                    self.now,
                    format!("cut the client from node {victim} for {hold} ms"),
                );
            }
            _ => {
                self.net.weather = Weather {
                    drop: 100,
                    duplicate: 50,
                    max_delay_ms: 60,
                };
                self.trace
                    .note(self.now, format!("lossy network for {hold} ms"));
            }
        }
        self.fault_until = Some(until);
    }

    /// Heals everything and lets the cluster settle, then the final checks: every
    /// node up and in the ISR, identical logs, and (clean elections) every
    /// acknowledged record in place.
    fn finish(mut self) -> Outcome {
        self.heal();
        let ids: Vec<i32> = self.nodes.iter().map(|n| n.id).collect();
        for id in ids {
            self.restart_now(id);
        }
        let until = self.now + self.params.settle_ms;
        self.run_until(until, false);
        self.producing = false;
        let until = self.now + QUIET_MS;
        self.run_until(until, false);
        let image = self.ctl.image().clone();
        let p = image
            .topic_by_id(&controller::TOPIC_ID)
            .and_then(|t| t.partitions.get(&0))
            .cloned();
        let mut violations = std::mem::take(&mut self.checks.violations);
        let mut acked_lost = 0;
        match p {
            Some(p) if p.leader >= 0 => {
                let mut isr = p.isr.clone();
                isr.sort_unstable();
                let mut replicas = p.replicas.clone();
                replicas.sort_unstable();
                if isr != replicas {
                    violations.push(format!("not converged: ISR {:?} after settling", p.isr));
                }
                let views: Vec<(i32, checks::LogView)> = self
                    .nodes
                    .iter()
                    .filter_map(|n| Some((n.id, checks::view(n.part.as_ref()?))))
                    .collect();
                if let Some((_, leader)) = views.iter().find(|(id, _)| *id == p.leader) {
                    for (id, v) in &views {
                        if v.records != leader.records {
                            violations.push(format!(
                                "node {id} ends at {} (hw {}), leader {} at {} (hw {}): logs differ",
                                v.end, v.high_watermark, p.leader, leader.end, leader.high_watermark
                            ));
                        }
                    }
                    acked_lost = self
                        .client
                        .acks
                        .iter()
                        .filter(|(o, v)| leader.records.get(o) != Some(v))
                        .count();
                } else {
                    violations.push(format!("leader {} hosts no log", p.leader));
                }
            }
            _ => violations.push("no leader after settling".into()),
        }
        if !self.params.unclean {
            // acks=1 may lose what one leader alone had, by design.
            if acked_lost > 0 && self.params.acks_all {
                violations.push(format!("{acked_lost} acknowledged records lost"));
            }
            if self.truncated.total > 0 {
                let n = self.truncated.total;
                violations.push(format!(
                    "followers cut {n} records below their high watermark"
                ));
            }
            if !self.client.renumbered.is_empty() {
                violations.push(format!(
                    "offsets acknowledged twice: {:?}",
                    &self.client.renumbered[..1]
                ));
            }
        }
        let elections = self
            .ctl
            .images
            .windows(2)
            .filter(|w| {
                let epoch = |i: &tidelog_controller::MetadataImage| {
                    i.topic_by_id(&controller::TOPIC_ID)
                        .and_then(|t| t.partitions.get(&0))
                        .map(|p| p.leader_epoch)
                };
                epoch(&w[0]) != epoch(&w[1])
            })
            .count();
        Outcome {
            violations,
            digest: self.trace.digest.finish(),
            acked: self.client.acked.len(),
            truncated: self.truncated,
            acked_lost,
            renumbered: self.client.renumbered.len(),
            elections,
            trace: self.trace.text(),
        }
    }
}

/// One seeded run with faults, then settled.
fn run_seed(seed: u64, params: Params) -> Outcome {
    let faults_ms = params.faults_ms;
    let mut world = World::new(seed, params);
    world.run_until(faults_ms, true);
    world.finish()
}
