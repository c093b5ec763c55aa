//! The share coordinator (KIP-932): the durable state of every share partition, kept
//! in `__share_group_state` by the leader of the partition `hash("group:topic
//! id:partition")` lands on, a state machine on the coordinator runtime like the group
//! and transaction coordinators. The leader of a share partition writes its state here
//! (start offset, and per in-flight run of offsets its delivery state and count) before
//! it answers an acknowledgement, and reads it back when it starts the share partition,
//! so a restart or a new leader does not deliver an accepted record again.
//!
//! The leader reaches the coordinator by an in-process call. When the coordinator is
//! another node (a cluster), the share partition keeps its state in memory only: the
//! Read/WriteShareGroupState APIs between nodes are not there yet.

pub(crate) mod records;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tidelog_controller::MetadataImage;
use tidelog_env::clock::Clock;
use tokio::sync::{mpsc, watch};

use crate::context::BrokerContext;
use crate::coordinator::{
    CoordinatorError, CoordinatorRuntime, LogSource, Now, Outcome, RuntimeConfig, Shard,
};
use crate::internal_topic::{
    create_if_missing, partition_for, CoordinatorUnavailable, Creation, TopicSpec,
};
use crate::replica::ReplicaManager;
use records::{ShareSnapshot, ShareStateRecord, StateKey};

pub(crate) const SHARE_STATE_TOPIC: &str = "__share_group_state";
/// Kafka's defaults: `share.coordinator.state.topic.num.partitions` and
/// `.replication.factor`.
const PARTITIONS: i32 = 50;
const REPLICATION: i64 = 3;
const TICK: Duration = Duration::from_secs(1);
const QUEUE: usize = 4096;
/// Share partitions one coordinator partition keeps state for at most.
const MAX_STATES: usize = 100_000;
/// Prune requests waiting at most (a shard asks again on a later tick).
const PRUNE_QUEUE: usize = 64;

/// One `__share_group_state` partition's share-partition states.
pub(crate) struct ShareStateShard {
    states: HashMap<StateKey, ShareSnapshot>,
    /// The offset of each share partition's latest snapshot: records below the
    /// smallest are superseded.
    latest: HashMap<StateKey, i64>,
    /// Every record below this is committed.
    committed: i64,
    /// The log start this shard last asked for.
    pruned_to: i64,
}

/// Work outside the shard: move the partition's log start past superseded snapshots
/// (Kafka's share coordinator prunes its topic the same way).
pub(crate) struct Prune(i64);

impl Shard for ShareStateShard {
    type Record = ShareStateRecord;
    type Effect = Prune;

    fn encode(record: &Self::Record) -> Result<(Vec<u8>, Option<Vec<u8>>), CoordinatorError> {
        match record {
            ShareStateRecord::Snapshot(key, value) => Ok((
                records::encode_key(key),
                value.as_ref().map(records::encode_value),
            )),
            ShareStateRecord::Skipped => Err(CoordinatorError::NotAvailable(
                "a skipped share-state record is never written".into(),
            )),
        }
    }

    fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Self::Record, String> {
        records::decode(key, value).map_err(|e| e.to_string())
    }

    fn replay(&mut self, offset: i64, _producer: Option<i64>, record: Self::Record) {
        if let ShareStateRecord::Snapshot(key, value) = record {
            match value {
                Some(v) => {
                    self.latest.insert(key.clone(), offset);
                    self.states.insert(key, v);
                }
                None => {
                    self.latest.remove(&key);
                    self.states.remove(&key);
                }
            }
        }
    }

    fn commit(&mut self, offset: i64) {
        self.committed = self.committed.max(offset);
    }

    fn tick(&mut self, _now: Now) -> Outcome<Self, ()> {
        let needed = self.latest.values().copied().min().unwrap_or(i64::MAX);
        let to = needed.min(self.committed);
        if to > self.pruned_to {
            self.pruned_to = to;
            return Outcome::answer(()).with_effects(vec![Prune(to)]);
        }
        Outcome::answer(())
    }
}

impl ShareStateShard {
    fn write(
        &mut self,
        key: StateKey,
        snapshot: ShareSnapshot,
    ) -> Outcome<Self, Result<(), CoordinatorError>> {
        if !self.states.contains_key(&key) && self.states.len() >= MAX_STATES {
            return Outcome::answer(Err(CoordinatorError::NotAvailable(
                "too many share partitions on this share-state partition".into(),
            )));
        }
        Outcome::records(
            vec![ShareStateRecord::Snapshot(key, Some(snapshot))],
            Ok(()),
        )
    }
}

/// Why the state could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ShareStateError {
    /// The coordinator of the key is another node: state stays with the leader.
    #[error("the share coordinator of this share partition is another node")]
    Remote,
    #[error(transparent)]
    Coordinator(#[from] CoordinatorError),
    #[error(transparent)]
    Unavailable(#[from] CoordinatorUnavailable),
}

pub(crate) struct ShareStateCoordinator {
    runtime: Arc<CoordinatorRuntime<ShareStateShard>>,
    images: watch::Receiver<Arc<MetadataImage>>,
    node_id: i32,
    replicas: Arc<ReplicaManager>,
    prunes: std::sync::Mutex<Option<mpsc::Receiver<(i32, Prune)>>>,
}

/// Kafka's coordinator key of a share partition.
fn coordinator_key(key: &StateKey) -> String {
    format!("{}:{}:{}", key.0, key.1, key.2)
}

impl ShareStateCoordinator {
    pub(crate) fn new(
        node_id: i32,
        images: watch::Receiver<Arc<MetadataImage>>,
        logs: Arc<dyn LogSource>,
        clock: Arc<dyn Clock>,
        replicas: Arc<ReplicaManager>,
    ) -> ShareStateCoordinator {
        let (effects, prunes) = mpsc::channel(PRUNE_QUEUE);
        let runtime = Arc::new(CoordinatorRuntime::new(
            RuntimeConfig {
                topic: SHARE_STATE_TOPIC,
                tick: TICK,
                write_timeout: Duration::from_secs(5),
                queue: QUEUE,
            },
            logs,
            clock,
            |_partition, _epoch| ShareStateShard {
                states: HashMap::new(),
                latest: HashMap::new(),
                committed: 0,
                pruned_to: 0,
            },
            effects,
        ));
        ShareStateCoordinator {
            runtime,
            images,
            node_id,
            replicas,
            prunes: std::sync::Mutex::new(Some(prunes)),
        }
    }

    /// Creates `__share_group_state` if needed and waits (bounded) until the
    /// partitions led here are loaded.
    pub(crate) async fn ensure_topic(&self, ctx: &BrokerContext) -> Result<(), ShareStateError> {
        let spec = TopicSpec {
            name: SHARE_STATE_TOPIC,
            partitions: PARTITIONS,
            replication: REPLICATION,
            segment_bytes: "104857600".to_string(),
            // Kafka's: snapshots, not compaction, bound the topic; nothing expires.
            cleanup_policy: "delete",
            retention_ms: Some("-1"),
        };
        if create_if_missing(ctx, spec).await? != Creation::Existed {
            let image = Arc::clone(&self.images.borrow());
            self.runtime
                .wait_started(&image, self.node_id, Duration::from_secs(5))
                .await;
        }
        Ok(())
    }

    fn partition_of(&self, key: &StateKey) -> Result<i32, ShareStateError> {
        let image = self.images.borrow();
        let Some(topic) = image.topic(SHARE_STATE_TOPIC) else {
            return Err(
                CoordinatorError::NotAvailable(format!("{SHARE_STATE_TOPIC} is missing")).into(),
            );
        };
        let partition = partition_for(&coordinator_key(key), topic.partition_count());
        match topic.partitions.get(&partition) {
            Some(p) if p.leader == self.node_id => Ok(partition),
            Some(p) if p.leader >= 0 => Err(ShareStateError::Remote),
            _ => Err(CoordinatorError::NotCoordinator.into()),
        }
    }

    /// The stored state of a share partition (ReadShareGroupState).
    pub(crate) async fn read(
        &self,
        key: StateKey,
    ) -> Result<Option<ShareSnapshot>, ShareStateError> {
        let partition = self.partition_of(&key)?;
        Ok(self
            .runtime
            .read(partition, move |shard| shard.states.get(&key).cloned())
            .await?)
    }

    /// Stores a share partition's state, answered once replicated (WriteShareGroupState).
    pub(crate) async fn write(
        &self,
        key: StateKey,
        snapshot: ShareSnapshot,
    ) -> Result<(), ShareStateError> {
        let partition = self.partition_of(&key)?;
        self.runtime
            .write(partition, move |shard, _now| shard.write(key, snapshot))
            .await??;
        Ok(())
    }

    /// Follows the image (which partitions are led here) and prunes superseded
    /// snapshots until `shutdown`.
    pub(crate) async fn run(self: Arc<Self>, shutdown: watch::Receiver<bool>) {
        let prunes = self.prunes.lock().unwrap_or_else(|p| p.into_inner()).take();
        let pruner = prunes
            .map(|rx| tokio::spawn(prune_loop(Arc::clone(&self.replicas), rx, shutdown.clone())));
        Arc::clone(&self.runtime)
            .run(self.images.clone(), self.node_id, shutdown)
            .await;
        if let Some(pruner) = pruner {
            let _ = pruner.await;
        }
    }
}

/// Moves the log start of `__share_group_state` partitions past what no share partition
/// needs any more (on a blocking thread: it writes the log-start checkpoint).
async fn prune_loop(
    replicas: Arc<ReplicaManager>,
    mut prunes: mpsc::Receiver<(i32, Prune)>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let (partition, Prune(offset)) = tokio::select! {
            job = prunes.recv() => match job {
                Some(job) => job,
                None => return,
            },
            _ = shutdown.changed() => return,
        };
        let Some(p) = replicas.get(SHARE_STATE_TOPIC, partition) else {
            continue;
        };
        let pruned = tokio::task::spawn_blocking(move || {
            let moved = p.with_log(|log| {
                let target = offset.min(log.high_watermark());
                if target > log.log_start_offset() {
                    log.delete_records_before(target)?;
                    return Ok(true);
                }
                Ok(false)
            })?;
            if moved {
                p.durability()
                    .write_checkpoints()
                    .map_err(crate::replica::PartitionError::Storage)?;
                p.log_start_moved();
            }
            Ok::<_, crate::replica::PartitionError>(())
        })
        .await;
        match pruned {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(partition, error = %e, "pruning {SHARE_STATE_TOPIC} failed")
            }
            Err(e) => tracing::warn!(partition, error = %e, "pruning {SHARE_STATE_TOPIC} panicked"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use uuid::Uuid;

    use super::*;

    #[test]
    fn superseded_snapshots_are_pruned_up_to_the_oldest_still_needed() {
        let mut shard = ShareStateShard {
            states: HashMap::new(),
            latest: HashMap::new(),
            committed: 0,
            pruned_to: 0,
        };
        let a = ("g".to_string(), Uuid::from_u128(1), 0);
        let b = ("g".to_string(), Uuid::from_u128(1), 1);
        let snap = |start| {
            Some(ShareSnapshot {
                start_offset: start,
                ..ShareSnapshot::default()
            })
        };
        shard.replay(0, None, ShareStateRecord::Snapshot(a.clone(), snap(0)));
        shard.replay(1, None, ShareStateRecord::Snapshot(b.clone(), snap(0)));
        shard.replay(2, None, ShareStateRecord::Snapshot(a.clone(), snap(5)));
        let now = Now {
            at: Instant::now(),
            ms: 0,
        };
        // Nothing committed yet: nothing pruned.
        assert!(shard.tick(now).effects.is_empty());
        shard.commit(3);
        let pruned: Vec<i64> = shard.tick(now).effects.iter().map(|p| p.0).collect();
        assert_eq!(pruned, vec![1], "b's only snapshot is at 1");
        assert!(shard.tick(now).effects.is_empty(), "asked once");
        assert_eq!(shard.states[&a].start_offset, 5);
        shard.replay(3, None, ShareStateRecord::Snapshot(b, None));
        shard.commit(4);
        let pruned: Vec<i64> = shard.tick(now).effects.iter().map(|p| p.0).collect();
        assert_eq!(pruned, vec![2]);
    }
}
