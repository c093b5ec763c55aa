//! The group coordinator: consumer groups, their rebalances, and committed offsets.
//!
//! A group lives in partition `partition_for(group, offsets.topic.num.partitions)` of
//! `__consumer_offsets` (see `hash`), and its coordinator is that partition's leader,
//! read from the metadata image; on a cluster of one that is always this node, and a
//! leadership change elsewhere only changes which node loads which partition.
//!
//! Handlers compute the records to append plus the response; the records are appended
//! to the partition and replayed into memory (`state::Groups::replay`), and the same
//! replay loads a partition at start-up (`load`). As in Kafka, an answer that depends
//! on a write waits until the write is replicated (high watermark past it), with the
//! lock released, and offsets reach the cache only then (`uncommitted`); on a cluster
//! of one that is at once. Until a partition is loaded its
//! groups answer COORDINATOR_LOAD_IN_PROGRESS. Rebalance waits (JoinGroup until all
//! members rejoined, SyncGroup until the leader's assignment) are parked oneshot
//! channels answered from the state machine in `rebalance`; one background task
//! (`run_background`) drives the clocks: session expiry, rebalance timeouts, the
//! initial rebalance delay, offsets retention, and loading of newly led partitions.

mod join;
mod load;
mod members;
mod offsets;
mod rebalance;
mod records;
mod state;
#[cfg(test)]
mod tests;
mod topic;
mod uncommitted;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use kafka_protocol::error::ResponseError;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tokio::sync::watch;

pub(crate) use crate::internal_topic::{coordinator_for, Coordinates};
pub(crate) use join::JoinRequest;
pub(crate) use load::PendingByProducer;
pub(crate) use members::SyncRequest;
pub(crate) use offsets::CommitRequest;
pub(crate) use rebalance::Waiting;
pub(crate) use state::{JoinOutcome, SyncOutcome};
pub(crate) use topic::ensure_offsets_topic;

use crate::config::BrokerConfig;
use crate::context::{now_ms, BrokerContext, Ctx};
use crate::internal_topic::{
    append_error_code, await_replicated, coordinator_code, led_partition_of, Entry, Loads,
    Replayed, Written,
};
use crate::replica::{Partition, PartitionError};
use records::{GroupRecord, RecordKey};
use state::Groups;
use uncommitted::Uncommitted;

/// The internal topic holding committed offsets and group metadata.
pub(crate) const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// How often the background task looks at the clocks.
const TICK: Duration = Duration::from_millis(100);

/// Broker settings the coordinator follows, read once at start-up.
#[derive(Debug, Clone)]
pub(crate) struct GroupConfig {
    pub(crate) min_session_timeout_ms: i32,
    pub(crate) max_session_timeout_ms: i32,
    pub(crate) initial_rebalance_delay: Duration,
    pub(crate) max_size: usize,
    pub(crate) offsets_retention_ms: i64,
    pub(crate) retention_check_every: Duration,
    pub(crate) metadata_max_bytes: usize,
}

impl GroupConfig {
    pub(crate) fn from_broker(config: &BrokerConfig) -> GroupConfig {
        let ms =
            |name: &str| Duration::from_millis(u64::try_from(config.get_i64(name)).unwrap_or(0));
        let int = |name: &str| i32::try_from(config.get_i64(name)).unwrap_or(i32::MAX);
        GroupConfig {
            min_session_timeout_ms: int("group.min.session.timeout.ms"),
            max_session_timeout_ms: int("group.max.session.timeout.ms"),
            initial_rebalance_delay: ms("group.initial.rebalance.delay.ms"),
            max_size: usize::try_from(config.get_i64("group.max.size")).unwrap_or(usize::MAX),
            offsets_retention_ms: config
                .get_i64("offsets.retention.minutes")
                .saturating_mul(60_000),
            retention_check_every: ms("offsets.retention.check.interval.ms").max(TICK),
            metadata_max_bytes: usize::try_from(config.get_i64("offset.metadata.max.bytes"))
                .unwrap_or(4096),
        }
    }
}

pub(crate) struct Inner {
    pub(crate) groups: Groups,
    loads: Loads,
    /// Offset records written but not yet replicated (`uncommitted`).
    uncommitted: Uncommitted,
    /// Partitions loaded since the last look, with the transactional offsets their logs
    /// hold undecided (handed to `txn::foreign` after the load, outside this lock).
    loaded_pending: Vec<(i32, load::PendingByProducer)>,
    /// Partitions no longer led since the last look (their undecided offsets go too).
    forgotten: Vec<i32>,
}

impl Replayed for Inner {
    type Record = Entry<GroupRecord>;

    fn loads(&mut self) -> &mut Loads {
        &mut self.loads
    }

    fn forget(&mut self, partition: i32) {
        self.groups.unload(partition);
        self.uncommitted.forget(partition);
        self.forgotten.push(partition);
    }

    fn replay_loaded(&mut self, partition: i32, entries: Vec<Entry<GroupRecord>>) {
        let (records, pending) = load::resolve(entries);
        let (now, now_ms) = (Instant::now(), now_ms());
        for record in &records {
            self.groups.replay(partition, record, now, now_ms);
        }
        self.loaded_pending.push((partition, pending));
    }
}

pub(crate) struct GroupCoordinator {
    inner: Mutex<Inner>,
    pub(crate) config: GroupConfig,
}

impl GroupCoordinator {
    pub(crate) fn new(config: GroupConfig) -> GroupCoordinator {
        GroupCoordinator {
            inner: Mutex::new(Inner {
                groups: Groups::default(),
                loads: Loads::default(),
                uncommitted: Uncommitted::default(),
                loaded_pending: Vec::new(),
                forgotten: Vec::new(),
            }),
            config,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every change to Inner is completed before the lock is released, so a panic
        // elsewhere cannot leave it half-changed.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the coordinator's state for `group`'s offsets partition, or returns
    /// the error a client should see (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
    /// COORDINATOR_NOT_AVAILABLE, INVALID_GROUP_ID).
    pub(crate) fn with_partition<T>(
        &self,
        ctx: &BrokerContext,
        group: &str,
        f: impl FnOnce(&mut Inner, i32) -> T,
    ) -> Result<T, i16> {
        // Stored keys hold names as i16-length strings.
        if group.is_empty() || group.len() > usize::from(join::MAX_NAME_BYTES) {
            return Err(ResponseError::InvalidGroupId.code());
        }
        let partition = led_partition_of(ctx, OFFSETS_TOPIC, group)?;
        let mut inner = self.lock();
        if !inner.loads.is_loaded(partition) {
            return Err(ResponseError::CoordinatorLoadInProgress.code());
        }
        Ok(f(&mut inner, partition))
    }

    /// Whether some offsets partition is still being loaded (ListGroups says so rather
    /// than answer with a partial list).
    pub(crate) fn loading(&self) -> bool {
        self.lock().loads.any_loading()
    }

    /// Every loaded group, for ListGroups.
    pub(crate) fn with_all<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self.lock())
    }

    /// Loads the offsets partitions this node leads and has not loaded yet, and forgets
    /// those it no longer leads. Blocking: reads logs.
    pub(crate) fn load_owned(&self, ctx: &BrokerContext) {
        crate::internal_topic::load_owned(ctx, OFFSETS_TOPIC, || self.lock(), load::read_partition);
        let (forgotten, loaded) = {
            let mut inner = self.lock();
            (
                std::mem::take(&mut inner.forgotten),
                std::mem::take(&mut inner.loaded_pending),
            )
        };
        for partition in forgotten {
            ctx.txns.forget_foreign(ctx, partition);
        }
        for (partition, pending) in loaded {
            ctx.txns.restore_foreign(ctx, partition, pending);
        }
    }

    /// Appends `records` to the group's offsets partition: the only way durable group
    /// state changes. Group metadata records are replayed at once (the membership state
    /// machine is in memory; rebalance answers wait for `acknowledge`); offset records
    /// are replayed once replicated (`uncommitted`), at once on a cluster of one.
    /// Returns where the append landed (`None`: nothing to write) for `acknowledge`, or
    /// the Kafka error code.
    pub(crate) fn write(
        ctx: &BrokerContext,
        inner: &mut Inner,
        partition: i32,
        records: &[GroupRecord],
    ) -> Result<Option<Written>, i16> {
        if records.is_empty() {
            return Ok(None);
        }
        let now = now_ms();
        let mut buf = encode_batch(records, now)?;
        let Some(p) = ctx.replicas.get(OFFSETS_TOPIC, partition) else {
            return Err(ResponseError::NotCoordinator.code());
        };
        let appended = match p.append(&mut buf, now) {
            Ok(appended) => appended,
            Err(e) => {
                let code = append_error_code(&e);
                if code == ResponseError::NotCoordinator.code() {
                    return Err(code);
                }
                tracing::warn!(partition, error = %e, "writing to __consumer_offsets failed");
                // Matched with `matches!` so new PartitionError variants need no change here.
                let too_large = matches!(
                    e,
                    PartitionError::Storage(tidelog_storage::StorageError::MessageTooLarge { .. })
                );
                return Err(if too_large {
                    ResponseError::InvalidCommitOffsetSize.code()
                } else {
                    code
                });
            }
        };
        let written = Written::of(partition, &appended);
        let instant = Instant::now();
        let mut held = Vec::new();
        for record in records {
            if matches!(record.key, RecordKey::Group { .. }) {
                inner.groups.replay(partition, record, instant, now);
            } else {
                held.push(record.clone());
            }
        }
        inner.uncommitted.hold(written, held);
        apply_committed(&p, inner, partition);
        Ok(Some(written))
    }

    /// Waits until `written` is replicated, then replays what it (and anything before
    /// it) held back; the error code for the client if it is not. Call with the lock
    /// released.
    pub(crate) fn acknowledge(
        &self,
        ctx: &BrokerContext,
        written: Option<Written>,
    ) -> Result<(), i16> {
        let Some(written) = written else {
            return Ok(());
        };
        let Some(p) = ctx.replicas.get(OFFSETS_TOPIC, written.partition) else {
            return Err(ResponseError::NotCoordinator.code());
        };
        let outcome = await_replicated(&p, written).map_err(coordinator_code);
        apply_committed(&p, &mut self.lock(), written.partition);
        outcome
    }

    /// Replays the held-back offset records whose append has been replicated since
    /// (the background tick: writes nobody waited for).
    fn apply_all_committed(&self, ctx: &BrokerContext) {
        let mut inner = self.lock();
        for partition in inner.uncommitted.partitions() {
            match ctx.replicas.get(OFFSETS_TOPIC, partition) {
                Some(p) => apply_committed(&p, &mut inner, partition),
                None => inner.uncommitted.forget(partition),
            }
        }
    }
}

/// Replays the records `partition` held back that its high watermark has passed.
fn apply_committed(p: &Partition, inner: &mut Inner, partition: i32) {
    let snapshot = *p.hw_watch().borrow();
    if !snapshot.is_leader {
        return;
    }
    let records =
        inner
            .uncommitted
            .take_committed(partition, snapshot.leader_epoch, snapshot.high_watermark);
    let (instant, now) = (Instant::now(), now_ms());
    for record in &records {
        inner.groups.replay(partition, record, instant, now);
    }
}

/// One uncompressed RecordBatch v2 holding `records` (offsets 0..n, assigned on append).
fn encode_batch(records: &[GroupRecord], now_ms: i64) -> Result<BytesMut, i16> {
    encode_batch_of(records, now_ms, None)
}

/// As `encode_batch`, in a transactional batch of `producer` (id, epoch) when given.
fn encode_batch_of(
    records: &[GroupRecord],
    now_ms: i64,
    producer: Option<(i64, i16)>,
) -> Result<BytesMut, i16> {
    let (producer_id, producer_epoch) = producer.unwrap_or((-1, -1));
    let kafka_records: Vec<Record> = records
        .iter()
        .zip(0i64..)
        .map(|(r, offset)| Record {
            transactional: producer.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset,
            sequence: -1,
            timestamp: now_ms,
            key: Some(r.encode_key()),
            value: r.encode_value(),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, kafka_records.iter(), &options).map_err(|e| {
        tracing::error!(error = %e, "encoding group records failed");
        ResponseError::UnknownServerError.code()
    })?;
    Ok(buf)
}

/// Drives the coordinator's clocks until shutdown: every tick, member session expiry,
/// rebalance deadlines and loading of newly led partitions; every
/// `offsets.retention.check.interval.ms`, offsets retention.
pub(crate) async fn run_background(ctx: Ctx, mut shutdown: watch::Receiver<bool>) {
    let mut last_retention = Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(TICK) => {}
            _ = shutdown.changed() => break,
        }
        let loader = Arc::clone(&ctx);
        let _ = tokio::task::spawn_blocking(move || loader.groups.load_owned(&loader)).await;
        ctx.groups.apply_all_committed(&ctx);
        ctx.groups.tick(&ctx, Instant::now());
        if last_retention.elapsed() >= ctx.groups.config.retention_check_every {
            last_retention = Instant::now();
            ctx.groups.expire_offsets(&ctx);
        }
    }
    ctx.groups.shutdown();
}

/// `Some(text)` as the protocol's string type.
pub(crate) fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}
