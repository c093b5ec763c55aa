//! Completing decided transactions: a COMMIT or ABORT control batch (Kafka's transaction
//! marker: key `version i16 = 0, type i16` with 0 = ABORT and 1 = COMMIT, value
//! `version i16 = 0, coordinator_epoch i32`) on every partition the transaction wrote,
//! then its Complete state.
//!
//! The [`MarkerWorker`] takes the [`MarkerJob`]s the transaction shards hand out once a
//! decision is replicated, and for each partition of a job:
//! - a `__consumer_offsets` partition led here: the group coordinator's marker step
//!   ([`GroupCoordinator::complete_transaction`], the one interface between the two
//!   coordinators), which commits or drops the offsets the transaction sent there;
//! - another partition led here: a local append, answered once replicated;
//! - a partition led by another broker: WriteTxnMarkers to it (`remote`), whose
//!   handler does the same two things there (`write_local_marker`);
//! - a partition whose topic is gone: nothing to mark.
//!
//! What fails is retried with backoff until done, or until this node stops coordinating
//! the transaction (its successor hands the job out again when it loads). A partition
//! that refuses the marker as stale (a newer producer epoch or coordinator there) is
//! done with, as Kafka's coordinator stops sending: someone newer decided. Then the job
//! reports back with the shard's `complete` step.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use tidelog_controller::MetadataImage;
use tidelog_storage::BatchBuilder;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use super::remote::{self, MarkerKey};
use super::shard::{MarkerJob, TxnShard};
use crate::coordinator::{CoordinatorError, CoordinatorRuntime};
use crate::group::{CommitRequest, GroupCoordinator, OFFSETS_TOPIC};
use crate::replica::{PartitionError, ReplicaError, ReplicaManager};

/// How long a local marker waits for its replication.
const REPLICATION_TIMEOUT: Duration = Duration::from_secs(5);
/// Jobs worked on at once; more wait in the queue.
const MAX_CONCURRENT_JOBS: usize = 256;
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Why a marker could not be written here; WriteTxnMarkers answers with its code.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MarkerError {
    #[error("this node does not host the partition")]
    NotHosted,
    #[error("completing the transaction's offsets failed: {0}")]
    Offsets(#[from] CoordinatorError),
    #[error("the control batch could not be built")]
    Build,
    #[error("appending the marker failed: {0}")]
    Append(#[from] PartitionError),
    #[error("the marker did not reach the disk (flush.messages)")]
    Sync,
    #[error("the marker was not replicated: {0}")]
    Replication(#[from] ReplicaError),
}

/// A marker refused because the partition has seen a newer producer epoch or a newer
/// coordinator: sending it again cannot succeed, and must not.
pub(crate) fn is_superseded(code: i16) -> bool {
    code == ResponseError::InvalidProducerEpoch.code()
        || code == ResponseError::TransactionCoordinatorFenced.code()
}

impl MarkerError {
    /// The Kafka error code for WriteTxnMarkers.
    pub(crate) fn code(&self) -> i16 {
        match self {
            MarkerError::NotHosted => ResponseError::NotLeaderOrFollower.code(),
            MarkerError::Offsets(e) => e.code(),
            MarkerError::Build => ResponseError::UnknownServerError.code(),
            MarkerError::Append(e) => e.code(),
            MarkerError::Sync => ResponseError::KafkaStorageError.code(),
            MarkerError::Replication(e) => e.code(),
        }
    }
}

/// Writes one marker to a partition this node leads: through the group coordinator for
/// `__consumer_offsets`, by a local append otherwise. Answers once it is replicated.
pub(crate) async fn write_local_marker(
    replicas: &ReplicaManager,
    groups: &GroupCoordinator,
    marker: &MarkerKey,
) -> Result<(), MarkerError> {
    if marker.topic == OFFSETS_TOPIC {
        groups
            .complete_transaction(
                marker.partition,
                marker.producer_id,
                marker.epoch,
                marker.commit,
                marker.coordinator_epoch,
            )
            .await?;
        return Ok(());
    }
    let p = replicas
        .get(&marker.topic, marker.partition)
        .ok_or(MarkerError::NotHosted)?;
    // As Kafka appends markers with acks=all: refused before the append while the ISR
    // is too small, so a retry does not leave one more marker behind each time.
    p.check_min_isr()?;
    let now = crate::context::now_ms();
    let mut batch = BatchBuilder::control_marker(
        marker.producer_id,
        marker.epoch,
        marker.commit,
        marker.coordinator_epoch,
        now,
    )
    .build()
    .ok_or(MarkerError::Build)?;
    p.ready_for_writes().await;
    let (appended, sync) = p.append_control(&mut batch, now)?;
    if let Some(sync) = sync {
        // flush.messages: on disk before it counts, waited for off the async workers.
        let synced = tokio::task::spawn_blocking(move || sync.wait()).await;
        if !matches!(synced, Ok(Ok(()))) {
            return Err(MarkerError::Sync);
        }
    }
    p.wait_replicated(
        appended.end_offset,
        appended.leader_epoch,
        REPLICATION_TIMEOUT,
    )
    .await?;
    Ok(())
}

/// The worker that writes the markers of decided transactions.
pub(crate) struct MarkerWorker {
    pub(crate) node_id: i32,
    pub(crate) replicas: Arc<ReplicaManager>,
    pub(crate) groups: Arc<GroupCoordinator>,
    pub(crate) images: watch::Receiver<Arc<MetadataImage>>,
    pub(crate) runtime: Arc<CoordinatorRuntime<TxnShard>>,
}

type JobKey = (String, i64, i16);

impl MarkerWorker {
    /// Works on the jobs `jobs` brings until `shutdown`.
    pub(crate) async fn run(
        self: Arc<Self>,
        mut jobs: mpsc::Receiver<(i32, MarkerJob)>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut running: JoinSet<JobKey> = JoinSet::new();
        let mut in_flight: HashSet<JobKey> = HashSet::new();
        loop {
            tokio::select! {
                job = jobs.recv(), if running.len() < MAX_CONCURRENT_JOBS => {
                    let Some((partition, job)) = job else { break };
                    let key = (job.transactional_id.clone(), job.producer_id, job.producer_epoch);
                    // The same decision handed out again while it is being written.
                    if in_flight.insert(key.clone()) {
                        let worker = Arc::clone(&self);
                        running.spawn(async move {
                            worker.complete(partition, job).await;
                            key
                        });
                    }
                }
                Some(done) = running.join_next(), if !running.is_empty() => {
                    if let Ok(key) = done {
                        in_flight.remove(&key);
                    }
                }
                changed = shutdown.changed() => if changed.is_err() || *shutdown.borrow() { break },
            }
        }
        running.shutdown().await;
    }

    /// Writes every marker of `job`, then its transaction's Complete state.
    async fn complete(&self, txn_partition: i32, job: MarkerJob) {
        let mut backoff = FIRST_BACKOFF;
        let mut legacy = job.legacy_offsets.clone();
        let mut todo: BTreeSet<(String, i32)> = job.partitions.iter().cloned().collect();
        while !legacy.is_empty() || !todo.is_empty() {
            if !self.runtime.is_loaded(txn_partition) {
                return; // coordinated elsewhere now: its coordinator carries on
            }
            self.hand_legacy_offsets(&job, &mut legacy).await;
            if legacy.is_empty() {
                self.write_markers(&job, &mut todo).await;
            }
            if legacy.is_empty() && todo.is_empty() {
                break;
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        let (id, pid, epoch) = (job.transactional_id, job.producer_id, job.producer_epoch);
        let completed = self
            .runtime
            .write(txn_partition, move |shard, now| {
                shard.complete(&id, pid, epoch, now)
            })
            .await;
        if let Err(e) = completed {
            tracing::warn!(producer_id = job.producer_id, error = %e, "recording a completed transaction failed; the coordinator hands it out again");
        }
    }

    /// Offsets an earlier release kept in the transaction: committed through the group
    /// coordinator as this transaction's own (its marker then commits them).
    async fn hand_legacy_offsets(
        &self,
        job: &MarkerJob,
        legacy: &mut BTreeMap<String, Vec<(String, i32, super::PendingOffset)>>,
    ) {
        let groups: Vec<String> = legacy.keys().cloned().collect();
        for group in groups {
            let Some(offsets) = legacy.get(&group) else {
                continue;
            };
            let request = CommitRequest {
                group_id: group.clone(),
                generation: -1,
                member_id: String::new(),
                instance_id: None,
                offsets: offsets
                    .iter()
                    .map(|(t, p, o)| (t.clone(), *p, o.offset, o.leader_epoch, o.metadata.clone()))
                    .collect(),
            };
            let codes = self
                .groups
                .txn_commit(request, (job.producer_id, job.producer_epoch), None)
                .await;
            if codes.iter().all(|c| *c == 0) {
                legacy.remove(&group);
            } else {
                tracing::warn!(group = %group, ?codes, "handing a transaction's offsets to its group failed; will retry");
            }
        }
    }

    /// One pass over the partitions still to mark; those done leave `todo`.
    async fn write_markers(&self, job: &MarkerJob, todo: &mut BTreeSet<(String, i32)>) {
        let image = Arc::clone(&self.images.borrow());
        let marker = |topic: &str, partition: i32| MarkerKey {
            topic: topic.to_string(),
            partition,
            producer_id: job.producer_id,
            epoch: job.producer_epoch,
            commit: job.commit,
            coordinator_epoch: job.coordinator_epoch,
        };
        let mut remote_by_leader: BTreeMap<i32, Vec<MarkerKey>> = BTreeMap::new();
        for (topic, partition) in todo.clone() {
            let leader = image
                .topic(&topic)
                .map(|t| t.partitions.get(&partition).map_or(-1, |p| p.leader));
            match leader {
                // The topic is gone: nothing is left to mark.
                None => {
                    todo.remove(&(topic, partition));
                }
                Some(leader) if leader == self.node_id => {
                    let key = marker(&topic, partition);
                    match write_local_marker(&self.replicas, &self.groups, &key).await {
                        Ok(()) => {
                            todo.remove(&(topic, partition));
                        }
                        Err(e) if is_superseded(e.code()) => {
                            tracing::warn!(topic = %topic, partition, error = %e, "a transaction marker was refused as stale; not sent again");
                            todo.remove(&(topic, partition));
                        }
                        Err(e) => {
                            tracing::debug!(topic = %topic, partition, error = %e, "writing a transaction marker failed; will retry");
                        }
                    }
                }
                Some(leader) if leader >= 0 => {
                    remote_by_leader
                        .entry(leader)
                        .or_default()
                        .push(marker(&topic, partition));
                }
                Some(_) => {} // no leader right now: the next pass
            }
        }
        for (leader, keys) in remote_by_leader {
            let live = image.broker(leader).is_some_and(|b| !b.fenced);
            let Some((host, port)) = image.inter_broker_endpoint(leader).filter(|_| live) else {
                continue;
            };
            match remote::write_markers(
                self.replicas.inter_broker_transport(),
                self.node_id,
                &host,
                port,
                &keys,
            )
            .await
            {
                Ok(written) => {
                    for key in written {
                        todo.remove(&(key.topic, key.partition));
                    }
                }
                Err(e) => {
                    tracing::warn!(leader, error = %e, "sending transaction markers failed; will retry");
                }
            }
        }
    }
}
