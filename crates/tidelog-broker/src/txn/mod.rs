//! The transaction coordinator.
//!
//! A transactional id lives in partition `partition_for(id, 50)` of the compacted topic
//! `__transaction_state` (placed as consumer groups are, `internal_topic`), created on
//! first use; its coordinator is that partition's leader. Each led partition is a
//! [`TxnShard`] on the coordinator runtime (`crate::coordinator`): its steps (`shard`)
//! are pure functions of the state (`state`), the request and the time, whose records
//! (`records`) the runtime appends, replays and answers once replicated; loading a
//! partition replays the same records, so recovery and normal operation run the same
//! code.
//!
//! A decision (PrepareCommit / PrepareAbort / PrepareEpochFence) hands a marker job to
//! the [`MarkerWorker`] (`markers`), which writes a COMMIT or ABORT marker to every
//! partition the transaction wrote — the group coordinator's partitions included,
//! through [`GroupCoordinator::complete_transaction`] — and then records the Complete
//! state. EndTxn answers once that is done (bounded), so a client that commits and then
//! reads finds its transaction decided; a request that arrives while the markers are
//! being written hears CONCURRENT_TRANSACTIONS, as from Kafka. The runtime's clock
//! aborts transactions open past their timeout and drops ids idle past
//! `transactional.id.expiration.ms`.
//!
//! Transaction version 2 (KIP-890 part 2) is chosen per request by its version: EndTxn
//! v5 bumps the epoch with the decision (`state::TxnMeta::end_v2`), and Produce v12+ and
//! TxnOffsetCommit v5 add their partition themselves ([`TxnCoordinator::add_implicitly`],
//! through AddPartitionsToTxn v5 when the coordinator is another node, `remote`).

mod markers;
mod records;
mod remote;
mod shard;
#[cfg(test)]
mod shard_tests;
#[cfg(test)]
mod shard_tv2_tests;
mod state;
mod topic;

use std::sync::Arc;
use std::time::Duration;

use crate::poison::LockTolerant;
use kafka_protocol::error::ResponseError;
use tidelog_controller::MetadataImage;
use tokio::sync::{mpsc, watch};

pub(crate) use markers::{write_local_marker, MarkerWorker};
#[cfg(test)]
pub(crate) use records::TxnRecord;
pub(crate) use remote::MarkerKey;
pub(crate) use shard::TxnShard;
pub(crate) use state::{PendingOffset, TxnError, TxnMeta, TxnState};
pub(crate) use topic::ensure_txn_topic;

use crate::config::BrokerConfig;
use crate::coordinator::{CoordinatorError, CoordinatorRuntime, LogSource, RuntimeConfig};
use crate::group::{GroupCoordinator, OFFSETS_TOPIC};
use crate::internal_topic::partition_for;
use crate::metadata::MetadataManager;
use crate::replica::ReplicaManager;
use crate::settings::{self, Setting};
use shard::{EndAnswer, InitAnswer};
use tidelog_env::clock::Clock;

/// The internal topic holding transaction state.
pub(crate) const TXN_TOPIC: &str = "__transaction_state";

/// How often the runtime looks at the transactions' clocks.
const TICK: Duration = Duration::from_millis(200);
/// Requests queued per partition at most.
const QUEUE: usize = 4096;
/// Marker jobs queued for the worker at most (shards hand out what is left again).
const MARKER_QUEUE: usize = 4096;
/// How long EndTxn waits for the markers before it answers anyway (the decision is
/// recorded; the markers follow).
const END_TXN_WAIT: Duration = Duration::from_secs(5);
/// How long a request that just created the topic waits for its partitions to run.
const STARTUP_WAIT: Duration = Duration::from_secs(5);

/// Broker settings the coordinator follows. Kafka's names and defaults.
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
        // A value Kafka would refuse (zero or negative) falls back to the default.
        let positive = |setting: Setting<i64>| {
            let v = config.get(setting);
            if v > 0 {
                v
            } else {
                setting.default_value().unwrap_or(1)
            }
        };
        TxnConfig {
            num_partitions: i32::try_from(positive(settings::TRANSACTION_STATE_LOG_NUM_PARTITIONS))
                .unwrap_or(50),
            replication_factor: positive(settings::TRANSACTION_STATE_LOG_REPLICATION_FACTOR),
            max_timeout_ms: i32::try_from(positive(settings::TRANSACTION_MAX_TIMEOUT_MS))
                .unwrap_or(i32::MAX),
            id_expiration_ms: positive(settings::TRANSACTIONAL_ID_EXPIRATION_MS),
            timeout_check_every: Setting::as_duration(positive(
                settings::TRANSACTION_ABORT_TIMED_OUT_CLEANUP_INTERVAL_MS,
            ))
            .max(TICK),
        }
    }
}

pub(crate) struct TxnCoordinator {
    runtime: Arc<CoordinatorRuntime<TxnShard>>,
    images: watch::Receiver<Arc<MetadataImage>>,
    node_id: i32,
    pub(crate) config: Arc<TxnConfig>,
    /// Where producer ids come from (the controller's blocks).
    metadata: Arc<MetadataManager>,
    marker_jobs: std::sync::Mutex<Option<mpsc::Receiver<(i32, shard::MarkerJob)>>>,
    worker: Arc<MarkerWorker>,
}

impl TxnCoordinator {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        config: TxnConfig,
        node_id: i32,
        images: watch::Receiver<Arc<MetadataImage>>,
        logs: Arc<dyn LogSource>,
        clock: Arc<dyn Clock>,
        metadata: Arc<MetadataManager>,
        replicas: Arc<ReplicaManager>,
        groups: Arc<GroupCoordinator>,
    ) -> TxnCoordinator {
        let config = Arc::new(config);
        let shard_config = Arc::clone(&config);
        let (jobs_tx, jobs_rx) = mpsc::channel(MARKER_QUEUE);
        let runtime = Arc::new(CoordinatorRuntime::new(
            RuntimeConfig {
                topic: TXN_TOPIC,
                tick: TICK,
                write_timeout: Duration::from_secs(5),
                queue: QUEUE,
            },
            logs,
            clock,
            move |_partition, epoch| TxnShard::new(epoch, Arc::clone(&shard_config)),
            jobs_tx,
        ));
        let worker = Arc::new(MarkerWorker {
            node_id,
            replicas,
            groups,
            images: images.clone(),
            runtime: Arc::clone(&runtime),
        });
        TxnCoordinator {
            runtime,
            images,
            node_id,
            config,
            metadata,
            marker_jobs: std::sync::Mutex::new(Some(jobs_rx)),
            worker,
        }
    }

    /// The partition of `__transaction_state` for `id` if this node coordinates it.
    fn partition_of(&self, id: &str) -> Result<i32, TxnError> {
        if id.is_empty() {
            return Err(TxnError::InvalidRequest("empty transactional id"));
        }
        let image = self.images.borrow();
        // As for groups: no topic, no coordinator here; the client finds it again.
        let Some(topic) = image.topic(TXN_TOPIC) else {
            return Err(CoordinatorError::NotCoordinator.into());
        };
        let partition = partition_for(id, topic.partition_count());
        match topic.partitions.get(&partition) {
            Some(p) if p.leader == self.node_id => Ok(partition),
            _ => Err(CoordinatorError::NotCoordinator.into()),
        }
    }

    /// InitProducerId with a transactional id: a new id gets a producer id from the
    /// controller; a known one gets its epoch bumped, which fences the previous producer
    /// (an open transaction of it is aborted first, and the client asked to retry).
    pub(crate) async fn init_producer_id(
        &self,
        id: &str,
        timeout_ms: i32,
        current: Option<(i64, i16)>,
    ) -> Result<(i64, i16), TxnError> {
        let partition = self.partition_of(id)?;
        // A fresh producer id comes from the controller, which may be a remote quorum:
        // it is fetched outside the step, then the step runs again. An id fetched but
        // not used is simply never handed out.
        let mut fresh = None;
        for _ in 0..3 {
            let id_owned = id.to_string();
            let answer = self
                .runtime
                .write(partition, move |shard, now| {
                    shard.init_producer_id(&id_owned, timeout_ms, current, fresh, now)
                })
                .await?;
            match answer {
                InitAnswer::Done { producer_id, epoch } => return Ok((producer_id, epoch)),
                InitAnswer::Failed(e) => return Err(e),
                InitAnswer::NeedProducerId => fresh = Some(self.fresh_producer_id().await?),
            }
        }
        Err(CoordinatorError::NotAvailable("no producer id".into()).into())
    }

    /// A new producer id from the controller, for a new producer or an epoch that ran out.
    async fn fresh_producer_id(&self) -> Result<i64, TxnError> {
        let allocated = self.metadata.allocate_producer_id(self.node_id).await;
        allocated.map_err(|e| {
            tracing::error!(error = %e, "allocating a producer id failed");
            TxnError::NoProducerId {
                code: crate::metadata::producer_id_error(&e),
            }
        })
    }

    /// AddPartitionsToTxn: the partitions take part in the open transaction. `tv2`:
    /// a TV2 request (AddPartitionsToTxn v5, or the implicit add of Produce v12+).
    pub(crate) async fn add_partitions(
        &self,
        id: &str,
        producer: (i64, i16),
        partitions: Vec<(String, i32)>,
        tv2: bool,
    ) -> Result<(), TxnError> {
        let partition = self.partition_of(id)?;
        let id = id.to_string();
        self.runtime
            .write(partition, move |shard, now| {
                shard.add(&id, producer, &partitions, None, tv2, now)
            })
            .await?
    }

    /// AddOffsetsToTxn: the group's `__consumer_offsets` partition takes part in the
    /// open transaction (its marker decides the offsets TxnOffsetCommit sends there).
    pub(crate) async fn add_offsets(
        &self,
        id: &str,
        producer: (i64, i16),
        group: &str,
        tv2: bool,
    ) -> Result<(), TxnError> {
        if group.is_empty() {
            return Err(TxnError::InvalidRequest("empty group id"));
        }
        let partition = self.partition_of(id)?;
        let offsets_partition = {
            let image = self.images.borrow();
            let count = image
                .topic(OFFSETS_TOPIC)
                .map(|t| t.partition_count())
                .ok_or(CoordinatorError::NotAvailable(
                    "no offsets topic yet".into(),
                ))?;
            (OFFSETS_TOPIC.to_string(), partition_for(group, count))
        };
        let (id, group) = (id.to_string(), group.to_string());
        self.runtime
            .write(partition, move |shard, now| {
                shard.add(&id, producer, &[offsets_partition], Some(&group), tv2, now)
            })
            .await?
    }

    /// EndTxn: records the decision, then waits (bounded) for its markers. `tv2`
    /// (EndTxn v5): the decision bumps the epoch; the answer is the producer the client
    /// continues with (for v0-4 the request's own).
    pub(crate) async fn end_txn(
        &self,
        id: &str,
        producer: (i64, i16),
        commit: bool,
        tv2: bool,
    ) -> Result<(i64, i16), TxnError> {
        let partition = self.partition_of(id)?;
        let (completed, continue_with) = if tv2 {
            self.end_v2(partition, id, producer, commit).await?
        } else {
            let id = id.to_string();
            let decided = self
                .runtime
                .write(partition, move |shard, now| {
                    shard.end(&id, producer, commit, now)
                })
                .await??;
            (decided, producer)
        };
        if let Some(completed) = completed {
            // The decision stands either way; waiting lets a client that reads right
            // after its commit find it complete.
            let _ = tokio::time::timeout(END_TXN_WAIT, completed).await;
        }
        Ok(continue_with)
    }

    /// The TV2 decision; an exhausted epoch needs a producer id from the controller,
    /// fetched outside the step as for InitProducerId.
    async fn end_v2(
        &self,
        partition: i32,
        id: &str,
        producer: (i64, i16),
        commit: bool,
    ) -> Result<(Option<tokio::sync::oneshot::Receiver<()>>, (i64, i16)), TxnError> {
        let mut fresh = None;
        for _ in 0..3 {
            let id = id.to_string();
            let answer = self
                .runtime
                .write(partition, move |shard, now| {
                    shard.end_v2(&id, producer, commit, fresh, now)
                })
                .await??;
            match answer {
                EndAnswer::Done {
                    completed,
                    producer,
                } => return Ok((completed, producer)),
                EndAnswer::NeedProducerId => fresh = Some(self.fresh_producer_id().await?),
            }
        }
        Err(CoordinatorError::NotAvailable("no producer id".into()).into())
    }

    /// The implicit add of TV2 (a transactional Produce v12+, TxnOffsetCommit v5): the
    /// partition joins the producer's open transaction (opening it), here or, when
    /// another node coordinates the transactional id, with AddPartitionsToTxn v5 there.
    pub(crate) async fn add_implicitly(
        &self,
        id: &str,
        producer: (i64, i16),
        topic: &str,
        partition: i32,
    ) -> Result<(), TxnError> {
        match self.partition_of(id) {
            Ok(_) => {
                self.add_partitions(id, producer, vec![(topic.to_string(), partition)], true)
                    .await
            }
            Err(TxnError::Coordinator(CoordinatorError::NotCoordinator)) => {
                self.add_remotely(id, producer, topic, partition).await
            }
            Err(e) => Err(e),
        }
    }

    async fn add_remotely(
        &self,
        id: &str,
        producer: (i64, i16),
        topic: &str,
        partition: i32,
    ) -> Result<(), TxnError> {
        let not_coordinator = TxnError::Coordinator(CoordinatorError::NotCoordinator);
        let endpoint = {
            let image = self.images.borrow();
            let leader = image.topic(TXN_TOPIC).and_then(|t| {
                let p = partition_for(id, t.partition_count());
                t.partitions.get(&p).map(|p| p.leader)
            });
            leader.and_then(|l| image.inter_broker_endpoint(l))
        };
        let Some((host, port)) = endpoint else {
            return Err(not_coordinator);
        };
        let code = remote::add_partition(
            self.worker.replicas.inter_broker_transport(),
            self.node_id,
            &host,
            port,
            id,
            producer,
            topic,
            partition,
        )
        .await
        .map_err(|e| {
            tracing::debug!(error = %e, "adding a partition at the transaction's coordinator failed");
            TxnError::Coordinator(CoordinatorError::NotAvailable(e))
        })?;
        Err(match ResponseError::try_from_code(code) {
            None => return Ok(()),
            Some(ResponseError::ProducerFenced | ResponseError::InvalidProducerEpoch) => {
                TxnError::Fenced
            }
            Some(ResponseError::InvalidProducerIdMapping) => TxnError::InvalidProducerIdMapping,
            Some(ResponseError::ConcurrentTransactions) => TxnError::ConcurrentTransactions,
            Some(
                ResponseError::NotCoordinator
                | ResponseError::CoordinatorNotAvailable
                | ResponseError::CoordinatorLoadInProgress,
            ) => not_coordinator,
            Some(_) => TxnError::InvalidTxnState,
        })
    }

    /// TxnOffsetCommit v5's implicit add: the group's offsets partition joins the
    /// transaction (with the group, when this node coordinates the transaction).
    pub(crate) async fn add_offsets_implicitly(
        &self,
        id: &str,
        producer: (i64, i16),
        group: &str,
    ) -> Result<(), TxnError> {
        if self.coordinates(id) {
            return self.add_offsets(id, producer, group, true).await;
        }
        let count = self
            .images
            .borrow()
            .topic(OFFSETS_TOPIC)
            .map(|t| t.partition_count());
        let Some(count) = count else {
            return Err(CoordinatorError::NotAvailable("no offsets topic yet".into()).into());
        };
        self.add_remotely(id, producer, OFFSETS_TOPIC, partition_for(group, count))
            .await
    }

    /// Whether `topic`/`partition` may take the batch of `producer_id` at `epoch` in
    /// `id`'s open transaction. A transaction coordinated by another node cannot be
    /// checked here and is let through.
    pub(crate) async fn verify(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        topic: &str,
        partition: i32,
    ) -> Result<(), TxnError> {
        let txn_partition = match self.partition_of(id) {
            Ok(p) => p,
            Err(TxnError::Coordinator(CoordinatorError::NotCoordinator)) => return Ok(()),
            Err(_) => return Err(TxnError::InvalidTxnState),
        };
        let (id, topic) = (id.to_string(), topic.to_string());
        self.runtime
            .read(txn_partition, move |shard| {
                shard.verify(&id, producer_id, epoch, &topic, partition)
            })
            .await
            .map_err(|_| TxnError::InvalidTxnState)?
    }

    /// AddPartitionsToTxn v4+ `verify_only`: whether each partition is in the open
    /// transaction of `producer` (see `TxnShard::verify_only`).
    pub(crate) async fn verify_only(
        &self,
        id: &str,
        producer: (i64, i16),
        partitions: Vec<(String, i32)>,
    ) -> Result<Vec<bool>, TxnError> {
        let partition = self.partition_of(id)?;
        let id = id.to_string();
        self.runtime
            .read(partition, move |shard| {
                shard.verify_only(&id, producer, &partitions)
            })
            .await?
    }

    /// Waits (bounded) until every partition the image says this node leads runs.
    pub(crate) async fn wait_started(&self) {
        let image = Arc::clone(&self.images.borrow());
        self.runtime
            .wait_started(&image, self.node_id, STARTUP_WAIT)
            .await;
    }

    /// Whether `group`'s offsets may be committed in `id`'s open transaction of
    /// `producer_id` at `epoch` (AddOffsetsToTxn added the group). Let through when the
    /// transaction is coordinated elsewhere.
    pub(crate) async fn verify_offsets(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        group: &str,
    ) -> Result<(), TxnError> {
        let count = self
            .images
            .borrow()
            .topic(OFFSETS_TOPIC)
            .map(|t| t.partition_count());
        let Some(count) = count else {
            return Err(TxnError::InvalidTxnState);
        };
        let partition = partition_for(group, count);
        self.verify(id, producer_id, epoch, OFFSETS_TOPIC, partition)
            .await
    }

    /// Whether this node coordinates `id` (its transaction can be verified here).
    pub(crate) fn coordinates(&self, id: &str) -> bool {
        self.partition_of(id).is_ok()
    }

    /// DescribeTransactions: the state of one transactional id.
    pub(crate) async fn describe(&self, id: &str) -> Result<TxnMeta, TxnError> {
        let partition = self.partition_of(id)?;
        let id = id.to_string();
        self.runtime
            .read(partition, move |shard| shard.describe(&id))
            .await?
            .ok_or(TxnError::TransactionalIdNotFound)
    }

    /// ListTransactions: every transactional id this node coordinates.
    pub(crate) async fn list(&self) -> Vec<(String, TxnMeta)> {
        let (lists, _) = self.runtime.read_all(TxnShard::list).await;
        let mut all: Vec<(String, TxnMeta)> = lists.into_iter().flatten().collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Follows the image (which partitions are led here) and writes markers until
    /// `shutdown`.
    pub(crate) async fn run(self: Arc<Self>, shutdown: watch::Receiver<bool>) {
        let jobs = self.marker_jobs.locked().take();
        let worker =
            jobs.map(|jobs| tokio::spawn(Arc::clone(&self.worker).run(jobs, shutdown.clone())));
        Arc::clone(&self.runtime)
            .run(self.images.clone(), self.node_id, shutdown)
            .await;
        if let Some(worker) = worker {
            let _ = worker.await;
        }
    }
}
