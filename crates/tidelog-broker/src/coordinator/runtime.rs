//! [`CoordinatorRuntime`]: one task per led partition of a coordinator's internal
//! topic, each owning its [`Shard`] and running its steps in turn (see the module docs
//! of `coordinator` for the path of one step).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tidelog_controller::MetadataImage;
use tidelog_storage::{BatchBuilder, PendingSync};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::log::{CoordinatorLog, LogEntry, LogSource};
use super::{CoordinatorError, Now, Outcome, Shard, Then, Write};
use crate::poison::RwLockTolerant;
use crate::replica::HwSnapshot;
use tidelog_env::clock::Clock;

/// How a runtime runs.
#[derive(Debug, Clone)]
pub(crate) struct RuntimeConfig {
    /// The internal topic whose partitions it coordinates.
    pub(crate) topic: &'static str,
    /// How often the shards' timers run.
    pub(crate) tick: Duration,
    /// How long a write may wait for replication before its caller is told it failed
    /// (Kafka's `offsets.commit.timeout.ms`); the records stay, and may still commit.
    pub(crate) write_timeout: Duration,
    /// Requests queued per partition at most; more wait for room.
    pub(crate) queue: usize,
}

/// What a step's caller is told, once.
type Deliver = Box<dyn FnOnce(Result<(), CoordinatorError>) + Send>;

/// A step with its response sealed in: the runtime knows only what to write.
struct Staged<S: Shard> {
    write: Write<S::Record>,
    effects: Vec<S::Effect>,
    then: Option<Then<S>>,
    deliver: Deliver,
}

type Step<S> = Box<dyn FnOnce(&mut S, Now) -> Staged<S> + Send>;
type ReadStep<S> = Box<dyn FnOnce(&S) + Send>;

enum Event<S: Shard> {
    Write(Step<S>),
    Read(ReadStep<S>),
    /// The `flush.messages` fsync of the append ending at `end` finished (or failed).
    Synced {
        end: i64,
        ok: bool,
    },
}

struct Handle<S: Shard> {
    epoch: i32,
    loaded: Arc<AtomicBool>,
    events: mpsc::Sender<Event<S>>,
    task: JoinHandle<()>,
}

/// The coordinator partitions this node leads, each on its own task.
pub(crate) struct CoordinatorRuntime<S: Shard> {
    config: RuntimeConfig,
    logs: Arc<dyn LogSource>,
    clock: Arc<dyn Clock>,
    /// Builds the empty shard of a partition led in an epoch.
    new_shard: Box<dyn Fn(i32, i32) -> S + Send + Sync>,
    effects: mpsc::Sender<(i32, S::Effect)>,
    shards: RwLock<HashMap<i32, Handle<S>>>,
}

impl<S: Shard> CoordinatorRuntime<S> {
    /// A runtime that builds an empty shard per partition (and leader epoch) with
    /// `new_shard` and hands
    /// committed effects to `effects` (dropped, with a warning, when it is full: the
    /// shards emit what is still undone again on their ticks).
    pub(crate) fn new(
        config: RuntimeConfig,
        logs: Arc<dyn LogSource>,
        clock: Arc<dyn Clock>,
        new_shard: impl Fn(i32, i32) -> S + Send + Sync + 'static,
        effects: mpsc::Sender<(i32, S::Effect)>,
    ) -> Self {
        CoordinatorRuntime {
            config,
            logs,
            clock,
            new_shard: Box::new(new_shard),
            effects,
            shards: RwLock::new(HashMap::new()),
        }
    }

    /// Runs `step` on `partition`'s shard; its response once its write is committed.
    pub(crate) async fn write<R: Send + 'static>(
        &self,
        partition: i32,
        step: impl FnOnce(&mut S, Now) -> Outcome<S, R> + Send + 'static,
    ) -> Result<R, CoordinatorError> {
        let (response, written) = self.write_reporting(partition, step).await?;
        written.map(|()| response)
    }

    /// Like [`CoordinatorRuntime::write`], but the step's response comes back whatever
    /// became of its write (which is the second part): the outer error means the step
    /// never ran (not coordinator, loading, stopping).
    pub(crate) async fn write_reporting<R: Send + 'static>(
        &self,
        partition: i32,
        step: impl FnOnce(&mut S, Now) -> Outcome<S, R> + Send + 'static,
    ) -> Result<(R, Result<(), CoordinatorError>), CoordinatorError> {
        let (tx, rx) = oneshot::channel();
        let staged: Step<S> = Box::new(move |shard: &mut S, now: Now| {
            let Outcome {
                write,
                response,
                effects,
                then,
            } = step(shard, now);
            Staged {
                write,
                effects,
                then,
                deliver: Box::new(move |result| {
                    let _ = tx.send((response, result));
                }),
            }
        });
        self.send(partition, Event::Write(staged)).await?;
        rx.await.map_err(|_| CoordinatorError::NotCoordinator)
    }

    /// Runs `read` on `partition`'s shard (which answers with committed state).
    pub(crate) async fn read<R: Send + 'static>(
        &self,
        partition: i32,
        read: impl FnOnce(&S) -> R + Send + 'static,
    ) -> Result<R, CoordinatorError> {
        let (tx, rx) = oneshot::channel();
        let step: ReadStep<S> = Box::new(move |shard: &S| {
            let _ = tx.send(read(shard));
        });
        self.send(partition, Event::Read(step)).await?;
        rx.await.map_err(|_| CoordinatorError::NotCoordinator)
    }

    /// Runs `read` on every loaded shard; their answers, and whether some partition led
    /// here is still loading.
    pub(crate) async fn read_all<R: Send + 'static>(
        &self,
        read: impl Fn(&S) -> R + Send + Sync + 'static,
    ) -> (Vec<R>, bool) {
        let read = Arc::new(read);
        let partitions: Vec<(i32, bool)> = self
            .lock_shards()
            .iter()
            .map(|(p, h)| (*p, h.loaded.load(Ordering::Acquire)))
            .collect();
        let mut out = Vec::new();
        let mut loading = false;
        for (partition, loaded) in partitions {
            if !loaded {
                loading = true;
                continue;
            }
            let read = Arc::clone(&read);
            match self.read(partition, move |s| read(s)).await {
                Ok(r) => out.push(r),
                Err(_) => loading = true,
            }
        }
        (out, loading)
    }

    async fn send(&self, partition: i32, event: Event<S>) -> Result<(), CoordinatorError> {
        let events = {
            let shards = self.lock_shards();
            // The caller checked the image: led here, only its task is not running yet.
            let handle = shards
                .get(&partition)
                .ok_or(CoordinatorError::LoadInProgress)?;
            if !handle.loaded.load(Ordering::Acquire) {
                return Err(CoordinatorError::LoadInProgress);
            }
            handle.events.clone()
        };
        events
            .send(event)
            .await
            .map_err(|_| CoordinatorError::NotCoordinator)
    }

    fn lock_shards(&self) -> std::sync::RwLockReadGuard<'_, HashMap<i32, Handle<S>>> {
        self.shards.read_locked()
    }

    /// Waits (at most `timeout`) until every partition of the topic `image` says this
    /// node leads is loaded here.
    pub(crate) async fn wait_started(
        &self,
        image: &MetadataImage,
        node_id: i32,
        timeout: Duration,
    ) {
        self.follow(image, node_id);
        let led: Vec<i32> = image
            .topic(self.config.topic)
            .map(|t| {
                t.partitions
                    .iter()
                    .filter(|(_, p)| p.leader == node_id)
                    .map(|(i, _)| *i)
                    .collect()
            })
            .unwrap_or_default();
        let deadline = tokio::time::Instant::now() + timeout;
        while !led.iter().all(|p| self.is_loaded(*p)) {
            if tokio::time::Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
            self.follow(image, node_id);
        }
    }

    /// Whether `partition` is led and loaded here.
    pub(crate) fn is_loaded(&self, partition: i32) -> bool {
        self.lock_shards()
            .get(&partition)
            .is_some_and(|h| h.loaded.load(Ordering::Acquire))
    }

    /// Starts a task for every partition of the topic led here in the image's leader
    /// epoch, and stops those no longer led (or led in another epoch).
    pub(crate) fn follow(&self, image: &MetadataImage, node_id: i32) {
        let led: HashMap<i32, i32> = image
            .topic(self.config.topic)
            .map(|t| {
                t.partitions
                    .iter()
                    .filter(|(_, p)| p.leader == node_id)
                    .map(|(i, p)| (*i, p.leader_epoch))
                    .collect()
            })
            .unwrap_or_default();
        self.lead_only(&led);
    }

    /// Runs shards for exactly the partitions of `led` (partition -> leader epoch).
    pub(crate) fn lead_only(&self, led: &HashMap<i32, i32>) {
        let mut shards = self.shards.write_locked();
        // A partition led elsewhere now, or in another epoch: its handle goes, which
        // closes its queue; the task answers what it holds and ends (its partition's
        // leadership change ends it too).
        shards.retain(|partition, handle| {
            led.get(partition) == Some(&handle.epoch) && !handle.task.is_finished()
        });
        for (&partition, &epoch) in led {
            if shards.contains_key(&partition) {
                continue;
            }
            let Some(log) = self.logs.log(self.config.topic, partition, epoch) else {
                continue;
            };
            let (events_tx, events_rx) = mpsc::channel(self.config.queue.max(1));
            let loaded = Arc::new(AtomicBool::new(false));
            let task = ShardTask {
                partition,
                shard: (self.new_shard)(partition, epoch),
                log,
                config: self.config.clone(),
                clock: Arc::clone(&self.clock),
                effects: self.effects.clone(),
                loaded: Arc::clone(&loaded),
                awaiting_sync: BTreeSet::new(),
                last_written: 0,
                committed: 0,
                pending: VecDeque::new(),
                self_events: events_tx.downgrade(),
            };
            let task = tokio::spawn(task.run(events_rx));
            shards.insert(
                partition,
                Handle {
                    epoch,
                    loaded,
                    events: events_tx,
                    task,
                },
            );
        }
    }

    /// Keeps the shards in line with every new image until `shutdown`, then stops them.
    pub(crate) async fn run(
        self: Arc<Self>,
        mut images: watch::Receiver<Arc<MetadataImage>>,
        node_id: i32,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            let image = Arc::clone(&images.borrow_and_update());
            self.follow(&image, node_id);
            tokio::select! {
                changed = images.changed() => if changed.is_err() { break },
                // A shard that could not start (its partition was not open yet) is
                // tried again even without a new image.
                () = tokio::time::sleep(self.config.tick.max(Duration::from_millis(100))) => {}
                _ = shutdown.changed() => break,
            }
        }
        self.stop().await;
    }

    /// Stops every shard task; their waiting callers get NOT_COORDINATOR.
    pub(crate) async fn stop(&self) {
        let handles: Vec<Handle<S>> = {
            let mut shards = self.shards.write_locked();
            shards.drain().map(|(_, h)| h).collect()
        };
        for handle in handles {
            drop(handle.events);
            let _ = tokio::time::timeout(Duration::from_secs(5), handle.task).await;
        }
    }
}

/// A write waiting for the high watermark.
struct Pending<S: Shard> {
    /// One past the last record it depends on.
    end: i64,
    deadline: tokio::time::Instant,
    effects: Vec<S::Effect>,
    then: Option<Then<S>>,
    deliver: Deliver,
}

struct ShardTask<S: Shard> {
    partition: i32,
    shard: S,
    log: Arc<dyn CoordinatorLog>,
    config: RuntimeConfig,
    clock: Arc<dyn Clock>,
    effects: mpsc::Sender<(i32, S::Effect)>,
    loaded: Arc<AtomicBool>,
    /// Ends of the appends whose `flush.messages` fsync is still running.
    awaiting_sync: BTreeSet<i64>,
    last_written: i64,
    committed: i64,
    pending: VecDeque<Pending<S>>,
    /// For the fsync waiters to report back; weak, so the queue closes with the handle.
    self_events: mpsc::WeakSender<Event<S>>,
}

/// Why a shard task ends.
enum Stop {
    /// Its partition is led elsewhere now (or in another epoch), or it is being shut down.
    Unloaded,
}

impl<S: Shard> ShardTask<S> {
    async fn run(mut self, mut events: mpsc::Receiver<Event<S>>) {
        let mut state = self.log.watch();
        if self.load(&mut state).await.is_ok() {
            let mut ticker = tokio::time::interval(self.config.tick);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    event = events.recv() => match event {
                        Some(event) => self.handle(event),
                        None => break,
                    },
                    changed = state.changed() => {
                        if changed.is_err() || self.follow_state(&state).is_err() {
                            break;
                        }
                    }
                    _ = ticker.tick() => self.tick(),
                }
            }
        }
        self.loaded.store(false, Ordering::Release);
        for pending in std::mem::take(&mut self.pending) {
            self.finish(pending, Err(CoordinatorError::NotCoordinator));
        }
        events.close();
        while let Ok(event) = events.try_recv() {
            // Steps queued behind the end: their callers find the coordinator elsewhere.
            if let Event::Write(step) = event {
                let now = self.now();
                let staged = step(&mut self.shard, now);
                (staged.deliver)(Err(CoordinatorError::NotCoordinator));
            }
        }
        self.shard.unload();
        tracing::info!(
            topic = self.config.topic,
            partition = self.partition,
            "coordinator partition unloaded"
        );
    }

    fn now(&self) -> Now {
        Now {
            at: self.clock.now(),
            ms: self.clock.now_ms(),
        }
    }

    /// Replays the partition once its high watermark has reached its log end.
    async fn load(&mut self, state: &mut watch::Receiver<HwSnapshot>) -> Result<(), Stop> {
        let started = std::time::Instant::now();
        loop {
            self.check_leader(&state.borrow_and_update())?;
            let log = Arc::clone(&self.log);
            let load = move || {
                log.prepare_writes();
                log.read_committed()
            };
            match tokio::task::spawn_blocking(load).await {
                Ok(Ok(Some((entries, end)))) => {
                    let count = entries.len();
                    self.replay_all(entries);
                    self.last_written = end;
                    self.committed = end;
                    self.shard.commit(end);
                    let effects = self.shard.loaded(self.now());
                    self.hand_over(effects);
                    self.loaded.store(true, Ordering::Release);
                    if count > 0 {
                        tracing::info!(
                            topic = self.config.topic,
                            partition = self.partition,
                            records = count,
                            elapsed_ms = started.elapsed().as_millis() as u64,
                            "loaded coordinator state"
                        );
                    }
                    return Ok(());
                }
                Ok(Ok(None)) => {}
                Ok(Err(CoordinatorError::NotCoordinator)) => return Err(Stop::Unloaded),
                Ok(Err(e)) => {
                    tracing::warn!(topic = self.config.topic, partition = self.partition, error = %e, "loading a coordinator partition failed; will retry");
                }
                Err(e) => {
                    tracing::warn!(topic = self.config.topic, partition = self.partition, error = %e, "loading a coordinator partition panicked; will retry");
                }
            }
            // Not caught up yet: the next high-watermark move (or a short while).
            let _ = tokio::time::timeout(Duration::from_millis(100), state.changed()).await;
        }
    }

    fn replay_all(&mut self, entries: Vec<LogEntry>) {
        for entry in entries {
            match entry {
                LogEntry::Record {
                    offset,
                    producer,
                    key,
                    value,
                } => match S::decode(&key, value.as_deref()) {
                    Ok(record) => self.shard.replay(offset, producer, record),
                    Err(e) => {
                        tracing::warn!(topic = self.config.topic, partition = self.partition, offset, error = %e, "skipping a record that does not decode");
                    }
                },
                LogEntry::Marker {
                    offset,
                    producer_id,
                    commit,
                } => self.shard.replay_marker(offset, producer_id, commit),
            }
        }
    }

    fn check_leader(&self, state: &HwSnapshot) -> Result<(), Stop> {
        if state.is_leader && state.leader_epoch == self.log.epoch() {
            Ok(())
        } else {
            Err(Stop::Unloaded)
        }
    }

    fn follow_state(&mut self, state: &watch::Receiver<HwSnapshot>) -> Result<(), Stop> {
        let snapshot = *state.borrow();
        self.check_leader(&snapshot)?;
        if snapshot.high_watermark > self.committed {
            self.committed = snapshot.high_watermark;
            self.shard.commit(self.committed);
            self.release();
        }
        Ok(())
    }

    fn handle(&mut self, event: Event<S>) {
        match event {
            Event::Write(step) => {
                let now = self.now();
                let staged = step(&mut self.shard, now);
                self.stage(staged);
            }
            Event::Read(read) => read(&self.shard),
            Event::Synced { end, ok } => {
                // One fsync covers every append before it.
                self.awaiting_sync.retain(|e| *e > end);
                if !ok {
                    tracing::error!(
                        topic = self.config.topic,
                        partition = self.partition,
                        "fsync of a coordinator write failed"
                    );
                    while self.pending.front().is_some_and(|p| p.end <= end) {
                        if let Some(pending) = self.pending.pop_front() {
                            let failed = CoordinatorError::NotAvailable("fsync failed".into());
                            self.finish(pending, Err(failed));
                        }
                    }
                }
                self.release();
            }
        }
    }

    fn tick(&mut self) {
        let now = self.now();
        let outcome = self.shard.tick(now);
        self.stage(Staged {
            write: outcome.write,
            effects: outcome.effects,
            then: outcome.then,
            deliver: Box::new(|_| {}),
        });
        // Writes nobody hears back from in time: their callers are told, the records
        // stay (they may still commit, as Kafka's do).
        let deadline = tokio::time::Instant::now();
        while self
            .pending
            .front()
            .is_some_and(|p| p.deadline <= deadline && p.end > self.committed)
        {
            if let Some(pending) = self.pending.pop_front() {
                let timeout = self.config.write_timeout;
                self.finish(pending, Err(CoordinatorError::Timeout(timeout)));
            }
        }
    }

    /// Appends what a step writes, replays it, and parks its answer until committed.
    fn stage(&mut self, staged: Staged<S>) {
        let Staged {
            write,
            effects,
            then,
            deliver,
        } = staged;
        let end = match self.append(write) {
            Ok(end) => end,
            Err(e) => {
                let mut then = then;
                if let Some(then) = then.take() {
                    then(&mut self.shard, Err(e.clone()));
                }
                deliver(Err(e));
                return;
            }
        };
        self.pending.push_back(Pending {
            end,
            deadline: tokio::time::Instant::now() + self.config.write_timeout,
            effects,
            then,
            deliver,
        });
        self.release();
    }

    /// Appends and replays `write`; the offset the answer must wait for.
    fn append(&mut self, write: Write<S::Record>) -> Result<i64, CoordinatorError> {
        let now = self.clock.now_ms();
        let (mut batch, control, records) = match write {
            Write::Nothing => return Ok(self.last_written),
            Write::Records { records, producer } => {
                let mut builder = BatchBuilder::new();
                if let Some((id, epoch)) = producer {
                    builder = builder.producer(id, epoch, -1).transactional(true);
                }
                for record in &records {
                    let (key, value) = S::encode(record)?;
                    builder = builder.kv(Some(&key), value.as_deref(), now);
                }
                let batch = builder.build().ok_or(CoordinatorError::TooLarge)?;
                (batch, false, Some((records, producer.map(|p| p.0))))
            }
            Write::Marker {
                producer_id,
                producer_epoch,
                commit,
                coordinator_epoch,
            } => {
                let batch = BatchBuilder::control_marker(
                    producer_id,
                    producer_epoch,
                    commit,
                    coordinator_epoch,
                    now,
                )
                .build()
                .ok_or(CoordinatorError::TooLarge)?;
                let landed = self.log.append(&mut batch.clone(), true)?;
                self.after_append(landed.end, landed.sync);
                self.shard.replay_marker(landed.base, producer_id, commit);
                return Ok(landed.end);
            }
        };
        let landed = self.log.append(&mut batch, control)?;
        self.after_append(landed.end, landed.sync);
        if let Some((records, producer)) = records {
            for (offset, record) in (landed.base..).zip(records) {
                self.shard.replay(offset, producer, record);
            }
        }
        Ok(landed.end)
    }

    fn after_append(&mut self, end: i64, sync: Option<PendingSync>) {
        self.last_written = end;
        let Some(sync) = sync else {
            return;
        };
        // flush.messages on a coordinator topic: a write counts once it is on disk too.
        self.awaiting_sync.insert(end);
        let events = self.self_events.clone();
        tokio::task::spawn_blocking(move || {
            let ok = sync.wait().is_ok();
            if let Some(events) = events.upgrade() {
                // A blocking thread may wait for room in the queue.
                let _ = events.blocking_send(Event::Synced { end, ok });
            }
        });
    }

    /// Answers every parked write the high watermark (and any fsync) has passed.
    fn release(&mut self) {
        let synced_below = self.awaiting_sync.first().copied().unwrap_or(i64::MAX);
        while self
            .pending
            .front()
            .is_some_and(|p| p.end <= self.committed && p.end < synced_below)
        {
            if let Some(pending) = self.pending.pop_front() {
                self.finish(pending, Ok(()));
            }
        }
    }

    fn finish(&mut self, pending: Pending<S>, result: Result<(), CoordinatorError>) {
        let Pending {
            effects,
            then,
            deliver,
            ..
        } = pending;
        if let Some(then) = then {
            then(&mut self.shard, result.clone());
        }
        if result.is_ok() {
            self.hand_over(effects);
        }
        deliver(result);
    }

    fn hand_over(&self, effects: Vec<S::Effect>) {
        for effect in effects {
            if self.effects.try_send((self.partition, effect)).is_err() {
                tracing::warn!(
                    topic = self.config.topic,
                    partition = self.partition,
                    "coordinator work queue full; the shard retries on its next tick"
                );
            }
        }
    }
}
