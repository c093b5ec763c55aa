//! One broker in the simulation: a real [`Partition`] over a real log in its own
//! directory, driven as the broker's tasks drive it — the follower fetcher
//! (`fetcher.rs`), the leader's side of a follower fetch (`apis/fetch.rs`), the ISR
//! check (`isr.rs`), acks=all waits (`replication_outcome`), heartbeats and metadata
//! (`metadata/cluster.rs`) — with the simulation's clock and network instead of tokio's.

use std::path::PathBuf;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use tidelog_controller::ops::AlterPartition;
use tidelog_controller::MetadataImage;
use tidelog_storage::{BatchBuilder, DirClaim, Log, LogConfig};

use super::controller::{incarnation, TOPIC, TOPIC_ID};
use super::net::{Addr, FetchAnswer, Msg, Net};
use super::rng::Rng;
use super::Params;
use crate::replica::fetcher::{first_batch_reaching, whole_batches};
use crate::replica::high_watermarks::HighWatermarkFiles;
use crate::replica::isr::{alter_failure, isr_change_to_ask, AlterFailure};
use crate::replica::partition::{Partition, PartitionError};
use crate::replica::replication::replication_outcome;
use crate::replica::state::{ImageAssignment, PendingIsr, Role};

/// What the world hands a node for one call.
pub(super) struct Ctx<'a> {
    pub(super) now: i64,
    pub(super) net: &'a mut Net,
    pub(super) rng: &'a mut Rng,
    pub(super) images: &'a [MetadataImage],
    pub(super) params: &'a Params,
    /// Records followers cut below their high watermark (committed data lost).
    pub(super) truncated: &'a mut super::Truncated,
    pub(super) trace: &'a mut super::Trace,
}

impl Ctx<'_> {
    fn send(&mut self, from: i32, to: Addr, msg: Msg) {
        self.net.send(self.rng, self.now, Addr::Node(from), to, msg);
    }
}

struct InFlightFetch {
    id: u64,
    leader: i32,
    epoch: i32,
    offset: i64,
    sent_at: i64,
}

/// The ISR change this leader asked for, until an answer or an image settles it.
struct InFlightAlter {
    /// The request last sent; `None` while waiting to send it again.
    id: Option<u64>,
    request: AlterPartition,
    pending: PendingIsr,
    sent_at: i64,
}

/// A follower fetch with nothing to send yet, held until data or a new high watermark
/// arrives or its wait runs out (the long poll).
struct ParkedFetch {
    replica: i32,
    id: u64,
    leader_epoch: i32,
    offset: i64,
    last_epoch: i32,
    log_start: i64,
    high_watermark: i64,
    deadline: i64,
}

struct WaitingProduce {
    id: u64,
    end: i64,
    epoch: i32,
    base: i64,
    deadline: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Run {
    Up,
    Paused { until: i64 },
    Down { restart_at: i64 },
}

pub(super) struct SimNode {
    pub(super) id: i32,
    dir: PathBuf,
    pub(super) run: Run,
    pub(super) part: Option<Arc<Partition>>,
    /// Starts so far (0 for the first process).
    pub(super) starts: u32,
    broker_epoch: Option<i64>,
    /// The image version applied; `None` until the first after a start.
    version: Option<usize>,
    next_id: u64,
    fetch: Option<InFlightFetch>,
    fetch_due: i64,
    alter: Option<InFlightAlter>,
    waiting: Vec<WaitingProduce>,
    parked: Vec<ParkedFetch>,
    next_beat: i64,
    next_metadata: i64,
    next_isr_check: i64,
    next_checkpoint: i64,
    /// This process's view of the high-watermark file (a new one each start).
    high_watermarks: HighWatermarkFiles,
}

const HEARTBEAT_MS: i64 = 500;
const METADATA_MS: i64 = 100;
const ISR_CHECK_MS: i64 = 250;
/// replica.high.watermark.checkpoint.interval.ms
const CHECKPOINT_MS: i64 = 5_000;
const FETCH_TIMEOUT_MS: i64 = 1_000;
const FETCH_BACKOFF_MS: i64 = 50;
const ALTER_TIMEOUT_MS: i64 = 3_000;
const PRODUCE_TIMEOUT_MS: i64 = 5_000;
const READ_BYTES: usize = 256 * 1024;

impl SimNode {
    pub(super) fn new(id: i32, dir: PathBuf, broker_epoch: i64) -> Self {
        SimNode {
            id,
            dir,
            run: Run::Up,
            part: None,
            starts: 0,
            broker_epoch: Some(broker_epoch),
            version: None,
            next_id: 0,
            fetch: None,
            fetch_due: 0,
            alter: None,
            waiting: Vec::new(),
            parked: Vec::new(),
            next_beat: 0,
            next_metadata: 0,
            next_isr_check: 0,
            next_checkpoint: CHECKPOINT_MS,
            high_watermarks: HighWatermarkFiles::default(),
        }
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        (u64::from(self.starts) << 40) | self.next_id
    }

    /// kill -9: the process and everything in memory go; the files stay as written
    /// (the page cache survives a process crash).
    pub(super) fn crash(&mut self, restart_at: i64) {
        self.part = None;
        self.run = Run::Down { restart_at };
        self.broker_epoch = None;
        self.version = None;
        self.fetch = None;
        self.alter = None;
        self.waiting.clear();
        self.parked.clear();
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) {
        self.starts += 1;
        self.run = Run::Up;
        self.next_beat = ctx.now;
        self.next_metadata = ctx.now;
        self.next_checkpoint = ctx.now + CHECKPOINT_MS;
        self.high_watermarks = HighWatermarkFiles::default();
        ctx.trace.note(
            ctx.now,
            format!("node {} starts (#{})", self.id, self.starts),
        );
    }

    /// The node's timers: restarts, heartbeats, metadata, fetches, ISR checks, acks.
    pub(super) fn tick(&mut self, ctx: &mut Ctx<'_>) {
        match self.run {
            Run::Down { restart_at } if ctx.now >= restart_at => self.start(ctx),
            Run::Paused { until } if ctx.now >= until => self.run = Run::Up,
            _ => {}
        }
        if self.run != Run::Up {
            return;
        }
        if ctx.now >= self.next_beat {
            self.next_beat = ctx.now + HEARTBEAT_MS;
            let msg = match self.broker_epoch {
                Some(broker_epoch) => Msg::Heartbeat { broker_epoch },
                None => Msg::Register {
                    incarnation: incarnation(self.id, self.starts),
                },
            };
            ctx.send(self.id, Addr::Controller, msg);
        }
        if ctx.now >= self.next_metadata {
            self.next_metadata = ctx.now + METADATA_MS;
            let have = self.version;
            ctx.send(self.id, Addr::Controller, Msg::MetadataFetch { have });
        }
        self.fetch_tick(ctx);
        self.answer_parked(ctx);
        self.isr_tick(ctx);
        self.answer_waiting(ctx);
        if ctx.now >= self.next_checkpoint {
            self.next_checkpoint = ctx.now + CHECKPOINT_MS;
            if let Some(p) = &self.part {
                let failed = self.high_watermarks.write(std::slice::from_ref(p));
                assert!(failed.is_empty(), "checkpoint: {failed:?}");
            }
        }
    }

    pub(super) fn on_message(&mut self, from: Addr, msg: Msg, ctx: &mut Ctx<'_>) {
        match msg {
            Msg::Registered { broker_epoch } if self.broker_epoch.is_none() => {
                self.broker_epoch = Some(broker_epoch);
                self.next_beat = ctx.now;
            }
            Msg::HeartbeatReply { stale: true } => self.broker_epoch = None,
            Msg::Metadata { version } => self.adopt(version, ctx),
            Msg::Fetch {
                id,
                leader_epoch,
                offset,
                last_epoch,
                log_start,
            } => {
                let Addr::Node(replica) = from else { return };
                let answer =
                    self.serve_fetch(replica, leader_epoch, offset, last_epoch, log_start, ctx);
                match answer {
                    FetchAnswer::Records {
                        ref bytes,
                        high_watermark,
                        ..
                    } if bytes.is_empty() => self.parked.push(ParkedFetch {
                        replica,
                        id,
                        leader_epoch,
                        offset,
                        last_epoch,
                        log_start,
                        high_watermark,
                        deadline: ctx.now + ctx.params.fetch_max_wait_ms,
                    }),
                    answer => ctx.send(self.id, from, Msg::FetchReply { id, answer }),
                }
            }
            Msg::FetchReply { id, answer } => self.fetched(id, answer, ctx),
            Msg::AlterIsrReply { id, result } => self.altered(id, result, ctx),
            Msg::Produce { id, values } => {
                if let Err(code) = self.produce(id, &values, ctx) {
                    ctx.send(
                        self.id,
                        from,
                        Msg::ProduceReply {
                            id,
                            result: Err(code),
                        },
                    );
                }
            }
            _ => {}
        }
    }

    /// Brings the partition in line with the image at `version` (`apply_image`).
    fn adopt(&mut self, version: usize, ctx: &mut Ctx<'_>) {
        if self.version.is_some_and(|v| v >= version) {
            return;
        }
        let Some(image) = ctx.images.get(version) else {
            return;
        };
        self.version = Some(version);
        let Some(p) = image
            .topic_by_id(&TOPIC_ID)
            .and_then(|t| t.partitions.get(&0))
        else {
            return;
        };
        let assignment = ImageAssignment::of(p, ctx.params.min_isr);
        let part = match &self.part {
            Some(part) => Arc::clone(part),
            None => {
                let claim = if self.dir.exists() {
                    DirClaim::Owned
                } else {
                    DirClaim::Created
                };
                let log_dir = self
                    .dir
                    .parent()
                    .expect("a partition directory has a parent");
                self.high_watermarks.load_once(&[log_dir.to_path_buf()]);
                let mut log = Log::open(&self.dir, LogConfig::default()).expect("open log");
                self.high_watermarks
                    .restore(&(TOPIC.into(), 0), &mut log, &claim);
                let part = Partition::new(TOPIC.into(), TOPIC_ID, 0, p.leader_epoch, log)
                    .hosted_by(self.id);
                let part = Arc::new(part);
                self.part = Some(Arc::clone(&part));
                part
            }
        };
        let transition = part.apply_assignment(&assignment, ctx.now);
        if transition != crate::replica::state::Transition::Unchanged {
            ctx.trace.note(
                ctx.now,
                format!(
                    "node {} {transition:?}: leader {} epoch {} isr {:?} (image v{version})",
                    self.id, p.leader, p.leader_epoch, p.isr
                ),
            );
            // A fetch sent to the former leader is answered by nobody we listen to.
            self.fetch = None;
            self.fetch_due = ctx.now;
        }
    }

    fn fetch_tick(&mut self, ctx: &mut Ctx<'_>) {
        let Some(p) = self.part.clone() else { return };
        if let Some(f) = &self.fetch {
            if ctx.now - f.sent_at < FETCH_TIMEOUT_MS {
                return;
            }
            self.fetch = None;
        }
        let Role::Follower { leader } = p.role() else {
            return;
        };
        if ctx.now < self.fetch_due {
            return;
        }
        let (offset, last_epoch, log_start) = p.follower_position().expect("position");
        let epoch = p.leader_epoch();
        let id = self.id();
        self.fetch = Some(InFlightFetch {
            id,
            leader,
            epoch,
            offset,
            sent_at: ctx.now,
        });
        let msg = Msg::Fetch {
            id,
            leader_epoch: epoch,
            offset,
            last_epoch,
            log_start,
        };
        ctx.send(self.id, Addr::Node(leader), msg);
    }

    /// Answers the parked fetches that have something to say now, or waited enough.
    fn answer_parked(&mut self, ctx: &mut Ctx<'_>) {
        if self.parked.is_empty() {
            return;
        }
        let Some(p) = self.part.clone() else { return };
        let end = p.with_log(|l| Ok(l.log_end_offset())).unwrap_or(-1);
        let hw = p.offsets().map_or(-1, |o| o.high_watermark);
        let moved = p.role() != Role::Leader;
        for f in std::mem::take(&mut self.parked) {
            let due = ctx.now >= f.deadline
                || end > f.offset
                || hw != f.high_watermark
                || moved
                || p.leader_epoch() != f.leader_epoch;
            if !due {
                self.parked.push(f);
                continue;
            }
            let answer = self.serve_fetch(
                f.replica,
                f.leader_epoch,
                f.offset,
                f.last_epoch,
                f.log_start,
                ctx,
            );
            let reply = Msg::FetchReply { id: f.id, answer };
            ctx.send(self.id, Addr::Node(f.replica), reply);
        }
    }

    /// The leader's side of a follower fetch: `follower_fetched` then `read_partition`
    /// and `followers_idle_poll` in apis/fetch.rs (an empty answer is parked by the caller).
    fn serve_fetch(
        &mut self,
        replica: i32,
        leader_epoch: i32,
        offset: i64,
        last_epoch: i32,
        log_start: i64,
        ctx: &mut Ctx<'_>,
    ) -> FetchAnswer {
        let Some(p) = self.part.clone() else {
            return FetchAnswer::Error(ResponseError::UnknownTopicOrPartition.code());
        };
        let mut diverging = None;
        let mut replica_error = None;
        if leader_epoch < 0 || leader_epoch == p.leader_epoch() {
            diverging = p.diverging_epoch(last_epoch, offset);
            if diverging.is_none() {
                let lag_max = ctx.params.lag_max_ms;
                match p.record_follower_fetch(replica, offset, log_start, ctx.now, lag_max) {
                    Ok(true) => self.next_isr_check = ctx.now,
                    Ok(false) => {}
                    Err(e) => replica_error = Some(e.code()),
                }
            }
        }
        if leader_epoch >= 0 {
            let ours = p.leader_epoch();
            if leader_epoch < ours {
                return FetchAnswer::Error(ResponseError::FencedLeaderEpoch.code());
            }
            if leader_epoch > ours {
                return FetchAnswer::Error(ResponseError::UnknownLeaderEpoch.code());
            }
        }
        if p.role() != Role::Leader {
            return FetchAnswer::Error(ResponseError::NotLeaderOrFollower.code());
        }
        if let Some(code) = replica_error {
            return FetchAnswer::Error(code);
        }
        if let Some((epoch, end)) = diverging {
            return FetchAnswer::Diverging { epoch, end };
        }
        match p.read_for_follower(offset, READ_BYTES) {
            Ok(read) => {
                let bytes = match read.slice {
                    Some(slice) => slice.read_to_vec().expect("read"),
                    None => Vec::new(),
                };
                p.record_follower_idle_poll(replica, offset, ctx.now);
                FetchAnswer::Records {
                    bytes,
                    high_watermark: read.high_watermark,
                    log_start: read.log_start_offset,
                }
            }
            Err(e @ PartitionError::Storage(_))
                if e.code() == ResponseError::OffsetOutOfRange.code() =>
            {
                let offsets = p.offsets().expect("offsets");
                FetchAnswer::OutOfRange {
                    log_start: offsets.log_start,
                    high_watermark: offsets.high_watermark,
                }
            }
            Err(e) => FetchAnswer::Error(e.code()),
        }
    }

    /// The follower applies a fetch answer (`fetcher::handle_partition`).
    fn fetched(&mut self, id: u64, answer: FetchAnswer, ctx: &mut Ctx<'_>) {
        let Some(asked) = self.fetch.take_if(|f| f.id == id) else {
            return;
        };
        let Some(p) = self.part.clone() else { return };
        let truncation = match answer {
            FetchAnswer::Error(code) => {
                ctx.trace.note(
                    ctx.now,
                    format!("node {} fetch refused: error {code}", self.id),
                );
                self.fetch_due = ctx.now + FETCH_BACKOFF_MS;
                return;
            }
            FetchAnswer::OutOfRange {
                log_start,
                high_watermark,
            } => p.reset_out_of_range(log_start, high_watermark),
            FetchAnswer::Diverging { epoch, end } => p.truncate_to_divergence(epoch, end),
            FetchAnswer::Records {
                bytes,
                high_watermark,
                log_start,
            } => {
                let whole = whole_batches(&bytes);
                let from = first_batch_reaching(&bytes[..whole], asked.offset);
                let appended = p.append_replicated(
                    asked.leader,
                    asked.epoch,
                    &bytes[from..whole],
                    high_watermark,
                    log_start,
                );
                if appended.is_err() {
                    self.fetch_due = ctx.now + FETCH_BACKOFF_MS;
                }
                return;
            }
        };
        match truncation {
            Ok(Some(t)) => {
                let lost = t.committed_records_lost();
                ctx.truncated.total += lost;
                ctx.truncated.largest = ctx.truncated.largest.max(lost);
                ctx.trace.note(
                    ctx.now,
                    format!(
                        "node {} truncated {} -> {} (hw {}, committed lost {lost})",
                        self.id, t.old_end, t.new_end, t.old_high_watermark
                    ),
                );
            }
            Ok(None) => {}
            Err(_) => self.fetch_due = ctx.now + FETCH_BACKOFF_MS,
        }
    }

    /// The leader's ISR check (`isr::check_isrs`), one change in flight at a time, and
    /// the retries of `isr::alter_isr`.
    fn isr_tick(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(alter) = &mut self.alter {
            let settled = self
                .part
                .as_ref()
                .is_none_or(|p| p.replica_state().pending_isr.as_ref() != Some(&alter.pending));
            if settled {
                self.alter = None;
            } else {
                let due = match alter.id {
                    Some(_) => ctx.now - alter.sent_at >= ALTER_TIMEOUT_MS,
                    None => ctx.now - alter.sent_at >= ISR_CHECK_MS,
                };
                if due {
                    // No answer (or an unknown outcome): the same request again.
                    let id = self.id();
                    let alter = self.alter.as_mut().expect("checked");
                    alter.id = Some(id);
                    alter.sent_at = ctx.now;
                    let request = alter.request.clone();
                    ctx.send(self.id, Addr::Controller, Msg::AlterIsr { id, request });
                }
                return;
            }
        }
        if ctx.now < self.next_isr_check {
            return;
        }
        self.next_isr_check = ctx.now + ISR_CHECK_MS;
        let (Some(p), Some(broker_epoch), Some(version)) =
            (self.part.clone(), self.broker_epoch, self.version)
        else {
            return;
        };
        let st = p.replica_state();
        let hw = p.offsets().expect("offsets").high_watermark;
        let image = &ctx.images[version];
        let Some(pending) = isr_change_to_ask(&st, hw, ctx.now, ctx.params.lag_max_ms, |r| {
            image.is_broker_live(r)
        }) else {
            return;
        };
        if !p.begin_isr_change(&st, pending.clone()) {
            return;
        }
        let id = self.id();
        let request = AlterPartition {
            broker_id: self.id,
            broker_epoch,
            topic_id: TOPIC_ID,
            partition: 0,
            leader_epoch: st.leader_epoch,
            partition_epoch: st.partition_epoch,
            new_isr: pending.new_isr.clone(),
        };
        let msg = Msg::AlterIsr {
            id,
            request: request.clone(),
        };
        ctx.send(self.id, Addr::Controller, msg);
        self.alter = Some(InFlightAlter {
            id: Some(id),
            request,
            pending,
            sent_at: ctx.now,
        });
    }

    /// `isr::alter_isr`'s handling of the controller's answer.
    fn altered(&mut self, id: u64, result: Result<i32, i16>, ctx: &mut Ctx<'_>) {
        let Some(alter) = self.alter.as_mut().filter(|a| a.id == Some(id)) else {
            return;
        };
        let Some(p) = self.part.clone() else { return };
        let failure = match result {
            // The image carrying the new partition epoch clears the pending change.
            Ok(epoch) if epoch > alter.pending.from_partition_epoch => {
                self.alter = None;
                return;
            }
            Ok(_) => {
                p.clear_pending_isr(&alter.pending, 0);
                self.alter = None;
                return;
            }
            Err(code) => alter_failure(Some(code)),
        };
        match failure {
            AlterFailure::NotApplied => {
                p.clear_pending_isr(&alter.pending, ctx.now + ISR_CHECK_MS);
                self.alter = None;
            }
            AlterFailure::AwaitImage => self.alter = None,
            AlterFailure::Unknown => {
                alter.id = None;
                alter.sent_at = ctx.now;
            }
        }
    }

    /// A client's produce: with acks=all refused before the append when the ISR is too
    /// small, else appended and answered once replicated (`answer_waiting`); with
    /// acks=1 answered once appended.
    fn produce(&mut self, id: u64, values: &[String], ctx: &mut Ctx<'_>) -> Result<(), i16> {
        let p = self
            .part
            .clone()
            .ok_or(ResponseError::NotLeaderOrFollower.code())?;
        if p.role() != Role::Leader {
            return Err(ResponseError::NotLeaderOrFollower.code());
        }
        if ctx.params.acks_all {
            p.check_min_isr().map_err(|e| e.code())?;
        }
        let mut builder = BatchBuilder::new();
        for value in values {
            builder = builder.kv(None, Some(value.as_bytes()), ctx.now);
        }
        let mut batch = builder.build().expect("batch");
        let appended = p.append(&mut batch, ctx.now).map_err(|e| e.code())?;
        if !ctx.params.acks_all {
            let result = Ok(appended.base_offset);
            ctx.send(self.id, Addr::Client, Msg::ProduceReply { id, result });
            return Ok(());
        }
        self.waiting.push(WaitingProduce {
            id,
            end: appended.end_offset,
            epoch: appended.leader_epoch,
            base: appended.base_offset,
            deadline: ctx.now + PRODUCE_TIMEOUT_MS,
        });
        Ok(())
    }

    fn answer_waiting(&mut self, ctx: &mut Ctx<'_>) {
        let Some(p) = self.part.clone() else { return };
        let snapshot = *p.hw_watch().borrow();
        let mut still = Vec::new();
        for w in std::mem::take(&mut self.waiting) {
            let result = match replication_outcome(&snapshot, w.end, w.epoch) {
                Some(Ok(())) => Ok(w.base),
                Some(Err(e)) => Err(e.code()),
                None if ctx.now >= w.deadline => Err(ResponseError::RequestTimedOut.code()),
                None => {
                    still.push(w);
                    continue;
                }
            };
            ctx.send(
                self.id,
                Addr::Client,
                Msg::ProduceReply { id: w.id, result },
            );
        }
        self.waiting = still;
    }
}
