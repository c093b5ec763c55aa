//! The transaction coordinator.
//!
//! A transactional id lives in partition `partition_for(id, 50)` of the compacted topic
//! `__transaction_state` (placed as consumer groups are, `internal_topic`), created on
//! first InitProducerId; its coordinator is that partition's leader. Every state change is a
//! record (`records`) appended to the partition and then replayed into memory; loading a
//! partition (start-up, or gaining leadership) replays it from the start, so recovery
//! and normal operation run the same code. The rules for moving a transaction live in
//! `state`, the request operations in `ops`, and marker writing in `markers`.
//!
//! A transaction decided (PrepareCommit / PrepareAbort / PrepareEpochFence) is completed
//! by writing a COMMIT or ABORT control batch to every partition it wrote, committing
//! its pending consumer offsets, and then writing the Complete state. A step that fails
//! is retried by the background task (`run_background`) until it succeeds; the same
//! task aborts transactions open past their timeout and drops ids idle past
//! `transactional.id.expiration.ms`.

mod foreign;
mod load;
mod markers;
mod ops;
mod records;
mod remote;
mod state;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use tokio::sync::watch;

pub(crate) use markers::write_marker;
pub(crate) use remote::MarkerKey;
pub(crate) use state::{Committer, PendingOffset, TxnMeta, TxnState};

use crate::config::BrokerConfig;
use crate::context::{now_ms, BrokerContext, Ctx};
use crate::internal_topic::{
    append_error_code, await_replicated, coordinator_code, led_partition_of, Loads, Replayed,
    Written,
};
use records::TxnRecord;

/// The internal topic holding transaction state.
pub(crate) const TXN_TOPIC: &str = "__transaction_state";

/// How often the background task looks at the clocks and at unfinished transactions.
const TICK: Duration = Duration::from_millis(200);

/// Broker settings the coordinator follows. Kafka's names; until the broker's settings
/// table knows them, Kafka's defaults apply.
#[derive(Debug, Clone)]
pub(crate) struct TxnConfig {
    pub(crate) num_partitions: i32,
    pub(crate) replication_factor: i64,
    pub(crate) max_timeout_ms: i32,
    pub(crate) id_expiration_ms: i64,
    pub(crate) timeout_check_every: Duration,
}

impl TxnConfig {
    pub(crate) fn from_broker(config: &BrokerConfig) -> TxnConfig {
        let positive = |name: &str, default: i64| {
            let v = config.get_i64(name);
            if v > 0 {
                v
            } else {
                default
            }
        };
        TxnConfig {
            num_partitions: i32::try_from(positive("transaction.state.log.num.partitions", 50))
                .unwrap_or(50),
            replication_factor: positive("transaction.state.log.replication.factor", 3),
            max_timeout_ms: i32::try_from(positive("transaction.max.timeout.ms", 900_000))
                .unwrap_or(i32::MAX),
            id_expiration_ms: positive("transactional.id.expiration.ms", 604_800_000),
            timeout_check_every: Duration::from_millis(
                u64::try_from(positive(
                    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                    1_000,
                ))
                .unwrap_or(1_000),
            )
            .max(TICK),
        }
    }
}

/// One transactional id and the partition of `__transaction_state` holding it.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) partition: i32,
    pub(crate) meta: TxnMeta,
}

pub(crate) struct Inner {
    pub(crate) txns: HashMap<String, Entry>,
    /// What of each decided transaction is already written.
    done: HashMap<String, markers::Written>,
    loads: Loads,
    /// Per partition, the last state written: what an answer waits to see replicated.
    last_written: HashMap<i32, Written>,
}

impl Replayed for Inner {
    type Record = TxnRecord;

    fn loads(&mut self) -> &mut Loads {
        &mut self.loads
    }

    fn forget(&mut self, partition: i32) {
        self.txns.retain(|_, e| e.partition != partition);
        self.last_written.remove(&partition);
    }

    fn replay_loaded(&mut self, partition: i32, records: Vec<TxnRecord>) {
        for record in records {
            self.replay(partition, record);
        }
    }
}

impl Inner {
    fn replay(&mut self, partition: i32, record: TxnRecord) {
        self.done.remove(&record.transactional_id);
        match record.value {
            Some(meta) => {
                self.txns
                    .insert(record.transactional_id, Entry { partition, meta });
            }
            None => {
                self.txns.remove(&record.transactional_id);
            }
        }
    }
}

pub(crate) struct TxnCoordinator {
    inner: RwLock<Inner>,
    pub(crate) config: TxnConfig,
    /// Markers for partitions other brokers lead (a cluster), sent by the background task.
    remote: Mutex<remote::RemoteMarkers>,
    /// Transactional offsets for groups coordinated here, of transactions coordinated
    /// elsewhere.
    foreign: Mutex<foreign::ForeignOffsets>,
}

impl TxnCoordinator {
    pub(crate) fn new(config: TxnConfig) -> TxnCoordinator {
        TxnCoordinator {
            inner: RwLock::new(Inner {
                txns: HashMap::new(),
                done: HashMap::new(),
                loads: Loads::default(),
                last_written: HashMap::new(),
            }),
            remote: Mutex::new(remote::RemoteMarkers::default()),
            foreign: Mutex::new(foreign::ForeignOffsets::default()),
            config,
        }
    }
    fn remote_lock(&self) -> MutexGuard<'_, remote::RemoteMarkers> {
        self.remote.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn foreign_lock(&self) -> MutexGuard<'_, foreign::ForeignOffsets> {
        self.foreign.lock().unwrap_or_else(|p| p.into_inner())
    }

    // Every change to Inner completes before its guard drops, so a poisoned lock still
    // holds consistent state.
    fn write_lock(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    fn read_lock(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The partition of `__transaction_state` for `id` if this node coordinates it and
    /// has loaded it; else the error a client should see.
    fn partition_of(ctx: &BrokerContext, inner: &Inner, id: &str) -> Result<i32, i16> {
        if id.is_empty() {
            return Err(ResponseError::InvalidRequest.code());
        }
        let partition = led_partition_of(ctx, TXN_TOPIC, id)?;
        if !inner.loads.is_loaded(partition) {
            return Err(ResponseError::CoordinatorLoadInProgress.code());
        }
        Ok(partition)
    }

    /// The leader epoch of a `__transaction_state` partition: the coordinator epoch
    /// stamped into markers.
    fn coordinator_epoch(ctx: &BrokerContext, partition: i32) -> i32 {
        ctx.replicas
            .get(TXN_TOPIC, partition)
            .map_or(0, |p| p.leader_epoch())
    }

    /// Appends the new state of `id` and replays it: the only way state changes. The
    /// state is replayed at once (later requests of the transaction build on it), but
    /// answered only after `acknowledge`: a transaction state change counts once it is
    /// replicated. Should leadership move before that, the partition is forgotten here
    /// and reloaded from the log by its new leader.
    fn write(
        ctx: &BrokerContext,
        inner: &mut Inner,
        partition: i32,
        id: &str,
        meta: Option<TxnMeta>,
    ) -> Result<(), i16> {
        let record = TxnRecord {
            transactional_id: id.to_string(),
            value: meta,
        };
        let now = now_ms();
        let Ok(mut batch) = record.to_batch(now) else {
            return Err(ResponseError::InvalidRequest.code());
        };
        let Some(p) = ctx.replicas.get(TXN_TOPIC, partition) else {
            return Err(ResponseError::NotCoordinator.code());
        };
        match p.append(&mut batch, now) {
            Ok(appended) => {
                inner
                    .last_written
                    .insert(partition, Written::of(partition, &appended));
            }
            Err(e) => {
                let code = append_error_code(&e);
                if code != ResponseError::NotCoordinator.code() {
                    tracing::warn!(partition, error = %e, "writing to {TXN_TOPIC} failed");
                }
                return Err(code);
            }
        }
        inner.replay(partition, record);
        Ok(())
    }

    /// Waits until the state of `id` written so far is replicated; the error code for
    /// the client if it is not. Call with no lock held.
    fn acknowledge(&self, ctx: &BrokerContext, id: &str) -> Result<(), i16> {
        let partition = led_partition_of(ctx, TXN_TOPIC, id)?;
        let written = self.read_lock().last_written.get(&partition).copied();
        let Some(written) = written else {
            return Ok(());
        };
        let p = ctx
            .replicas
            .get(TXN_TOPIC, partition)
            .ok_or(ResponseError::NotCoordinator.code())?;
        await_replicated(&p, written).map_err(coordinator_code)
    }

    /// Finishes a decided transaction: markers, offsets, then the Complete state.
    /// Returns true when it is complete (or was not preparing).
    fn complete(ctx: &BrokerContext, inner: &mut Inner, id: &str) -> bool {
        let Some(entry) = inner.txns.get(id).cloned() else {
            return true;
        };
        let Some(commit) = entry.meta.state.marker_commits() else {
            return true;
        };
        let coordinator_epoch = Self::coordinator_epoch(ctx, entry.partition);
        let done = inner.done.entry(id.to_string()).or_default();
        let all_written = markers::write_all(ctx, id, &entry.meta, commit, coordinator_epoch, done);
        if !all_written {
            return false;
        }
        let Some(next) = entry.meta.completed(now_ms()) else {
            return true;
        };
        match Self::write(ctx, inner, entry.partition, id, Some(next)) {
            Ok(()) => true,
            Err(code) => {
                tracing::warn!(
                    transactional_id = id,
                    code,
                    "recording a completed transaction failed; will retry"
                );
                false
            }
        }
    }

    /// Loads the `__transaction_state` partitions this node leads and has not loaded,
    /// and forgets those it no longer leads. Blocking: reads logs.
    pub(crate) fn load_owned(&self, ctx: &BrokerContext) {
        crate::internal_topic::load_owned(
            ctx,
            TXN_TOPIC,
            || self.write_lock(),
            load::read_partition,
        );
    }

    /// One pass of the clocks: finish decided transactions, abort those open past their
    /// timeout, drop ids idle past their expiration.
    pub(crate) fn tick(&self, ctx: &BrokerContext, check_timeouts: bool) {
        let now = now_ms();
        let mut inner = self.write_lock();
        let ids: Vec<(String, TxnState, bool, bool)> = inner
            .txns
            .iter()
            .map(|(id, e)| {
                let idle = matches!(
                    e.meta.state,
                    TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                ) && now.saturating_sub(e.meta.last_update_ms)
                    > self.config.id_expiration_ms;
                (id.clone(), e.meta.state, e.meta.expired(now), idle)
            })
            .collect();
        for (id, state, expired, idle) in ids {
            // Markers that failed are written again once per timeout check, not every
            // tick: a partition that keeps refusing should not flood the log. Markers in
            // flight (replicating, or sent to another broker) are looked at every tick.
            if state.is_preparing() {
                let in_flight = inner.done.get(&id).is_some_and(markers::Written::in_flight);
                if check_timeouts || in_flight {
                    Self::complete(ctx, &mut inner, &id);
                }
            } else if expired && check_timeouts {
                let Some(entry) = inner.txns.get(&id).cloned() else {
                    continue;
                };
                tracing::info!(transactional_id = %id, producer_id = entry.meta.producer_id, "aborting a transaction open past its timeout");
                let fenced = entry.meta.fence(now);
                if Self::write(ctx, &mut inner, entry.partition, &id, Some(fenced)).is_ok() {
                    Self::complete(ctx, &mut inner, &id);
                }
            } else if idle {
                if let Some(entry) = inner.txns.get(&id).cloned() {
                    tracing::info!(transactional_id = %id, "transactional id expired");
                    let _ = Self::write(ctx, &mut inner, entry.partition, &id, None);
                }
            }
        }
    }
}

/// Drives the coordinator until shutdown: loading newly led partitions, finishing
/// decided transactions and, every `transaction.abort.timed.out.transaction.cleanup.interval.ms`,
/// aborting timed-out ones.
pub(crate) async fn run_background(ctx: Ctx, mut shutdown: watch::Receiver<bool>) {
    let mut last_timeout_check = Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(TICK) => {}
            _ = shutdown.changed() => break,
        }
        let check_timeouts = last_timeout_check.elapsed() >= ctx.txns.config.timeout_check_every;
        if check_timeouts {
            last_timeout_check = Instant::now();
        }
        let worker = Arc::clone(&ctx);
        let _ = tokio::task::spawn_blocking(move || {
            worker.txns.load_owned(&worker);
            worker.txns.tick(&worker, check_timeouts);
        })
        .await;
        tokio::select! {
            _ = remote::send_wanted(&ctx) => {}
            _ = shutdown.changed() => break,
        }
    }
}
