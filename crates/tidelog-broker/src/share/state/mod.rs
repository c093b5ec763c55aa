//! The share coordinator (KIP-932): the durable state of every share partition, kept
//! in `__share_group_state` by the leader of the partition `hash("group:topic
//! id:partition")` lands on, a state machine on the coordinator runtime like the group
//! and transaction coordinators. The leader of a share partition writes its state here
//! (start offset, and per in-flight run of offsets its delivery state and count) before
//! it answers an acknowledgement, and reads it back when it starts the share partition,
//! so a restart or a new leader does not deliver an accepted record again.
//!
//! The leader reaches the coordinator by an in-process call when it is the same node,
//! else with Kafka's ReadShareGroupState / WriteShareGroupState over the inter-broker
//! listener (`remote`). Either way the coordinator fences a leader older than the one
//! whose state it holds (FENCED_LEADER_EPOCH), so a deposed leader cannot overwrite its
//! successor's state.

mod admin;
mod prune;
pub(crate) mod records;
pub(crate) mod remote;
mod remote_admin;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
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
use crate::poison::LockTolerant;
use crate::replica::ReplicaManager;
use crate::settings;
use records::{ShareSnapshot, ShareStateRecord, StateKey};

pub(crate) const SHARE_STATE_TOPIC: &str = "__share_group_state";
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
    fn empty() -> ShareStateShard {
        ShareStateShard {
            states: HashMap::new(),
            latest: HashMap::new(),
            committed: 0,
            pruned_to: 0,
        }
    }

    /// The snapshot epoch is the coordinator's: one more than the stored snapshot's.
    fn write(
        &mut self,
        key: StateKey,
        mut snapshot: ShareSnapshot,
    ) -> Outcome<Self, Result<(), ShareStateError>> {
        match self.states.get(&key) {
            Some(stored) if stored.leader_epoch > snapshot.leader_epoch => {
                return Outcome::answer(Err(ShareStateError::FencedLeaderEpoch(
                    stored.leader_epoch,
                )));
            }
            // The group's offsets were altered since this leader read the state.
            Some(stored) if stored.state_epoch > snapshot.state_epoch => {
                return Outcome::answer(Err(ShareStateError::FencedStateEpoch(stored.state_epoch)));
            }
            Some(stored) => snapshot.snapshot_epoch = stored.snapshot_epoch.wrapping_add(1),
            None if self.states.len() >= MAX_STATES => {
                return Outcome::answer(Err(CoordinatorError::NotAvailable(
                    "too many share partitions on this share-state partition".into(),
                )
                .into()));
            }
            None => snapshot.snapshot_epoch = 0,
        }
        Outcome::records(
            vec![ShareStateRecord::Snapshot(key, Some(snapshot))],
            Ok(()),
        )
    }

    /// The stored state of `key`, unless a newer leader than `leader_epoch`'s wrote it.
    fn read(
        &self,
        key: &StateKey,
        leader_epoch: i32,
    ) -> Result<Option<ShareSnapshot>, ShareStateError> {
        match self.states.get(key) {
            Some(stored) if stored.leader_epoch > leader_epoch => {
                Err(ShareStateError::FencedLeaderEpoch(stored.leader_epoch))
            }
            stored => Ok(stored.cloned()),
        }
    }
}

/// Why the state could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ShareStateError {
    /// A leader of a newer epoch (this one) wrote the state.
    #[error("the share partition's state belongs to leader epoch {0}")]
    FencedLeaderEpoch(i32),
    /// The group's offsets were set again, at this state epoch.
    #[error("the share partition's state was reset at state epoch {0}")]
    FencedStateEpoch(i32),
    /// The coordinator on another node could not be asked.
    #[error("the share coordinator on node {node} could not be asked: {why}")]
    Unreachable { node: i32, why: String },
    /// The node closed the connection on the request instead of answering: what a node
    /// of an older release does with a version it does not know (a rolling upgrade).
    #[error("the share coordinator on node {node} closed the connection on the request")]
    HungUp { node: i32 },
    /// The coordinator on another node answered this Kafka error code.
    #[error("the share coordinator on node {node} answered error {code}")]
    Refused { node: i32, code: i16 },
    #[error(transparent)]
    Coordinator(#[from] CoordinatorError),
    #[error(transparent)]
    Unavailable(#[from] CoordinatorUnavailable),
}

impl ShareStateError {
    /// Kafka's error code for it, as ReadShareGroupState / WriteShareGroupState answer
    /// and a share fetch passes on (clients retry a coordinator that is not available).
    pub(crate) fn code(&self) -> i16 {
        match self {
            ShareStateError::FencedLeaderEpoch(_) => ResponseError::FencedLeaderEpoch.code(),
            ShareStateError::FencedStateEpoch(_) => ResponseError::FencedStateEpoch.code(),
            ShareStateError::Refused { code, .. } => *code,
            ShareStateError::Coordinator(c) => c.code(),
            ShareStateError::Unreachable { .. }
            | ShareStateError::HungUp { .. }
            | ShareStateError::Unavailable(_) => ResponseError::CoordinatorNotAvailable.code(),
        }
    }
}

pub(crate) struct ShareStateCoordinator {
    runtime: Arc<CoordinatorRuntime<ShareStateShard>>,
    images: watch::Receiver<Arc<MetadataImage>>,
    node_id: i32,
    replicas: Arc<ReplicaManager>,
    prunes: std::sync::Mutex<Option<mpsc::Receiver<(i32, Prune)>>>,
    remote: remote::Coordinators,
}

/// Where a share partition's state is kept.
enum Home {
    /// This node leads this `__share_group_state` partition.
    Here(i32),
    /// The node that leads it.
    Node(i32),
}

/// Kafka's coordinator key of a share partition, `group:topic id:partition` with the
/// topic id in Kafka's text form (so a key lands on the partition Kafka's would).
pub(crate) fn coordinator_key(key: &StateKey) -> String {
    use base64::Engine;
    let topic_id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.1.as_bytes());
    format!("{}:{topic_id}:{}", key.0, key.2)
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
            |_partition, _epoch| ShareStateShard::empty(),
            effects,
        ));
        ShareStateCoordinator {
            runtime,
            images,
            node_id,
            replicas,
            prunes: std::sync::Mutex::new(Some(prunes)),
            remote: remote::Coordinators::new(node_id),
        }
    }

    /// Creates `__share_group_state` if needed and waits (bounded) until the
    /// partitions led here are loaded.
    pub(crate) async fn ensure_topic(&self, ctx: &BrokerContext) -> Result<(), ShareStateError> {
        let spec = TopicSpec {
            name: SHARE_STATE_TOPIC,
            partitions: ctx
                .config
                .count(settings::SHARE_COORDINATOR_STATE_TOPIC_NUM_PARTITIONS),
            replication: ctx
                .config
                .get(settings::SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR)
                .max(1),
            segment_bytes: ctx
                .config
                .get(settings::SHARE_COORDINATOR_STATE_TOPIC_SEGMENT_BYTES)
                .to_string(),
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

    fn home(&self, key: &StateKey) -> Result<Home, ShareStateError> {
        let image = self.images.borrow();
        let Some(topic) = image.topic(SHARE_STATE_TOPIC) else {
            return Err(
                CoordinatorError::NotAvailable(format!("{SHARE_STATE_TOPIC} is missing")).into(),
            );
        };
        let partition = partition_for(&coordinator_key(key), topic.partition_count());
        match topic.partitions.get(&partition) {
            Some(p) if p.leader == self.node_id => Ok(Home::Here(partition)),
            Some(p) if p.leader >= 0 => Ok(Home::Node(p.leader)),
            _ => Err(CoordinatorError::NotAvailable(format!(
                "{SHARE_STATE_TOPIC}-{partition} has no leader"
            ))
            .into()),
        }
    }

    /// The stored state of a share partition, read by its leader of `leader_epoch`
    /// wherever the coordinator is.
    pub(crate) async fn read(
        &self,
        key: StateKey,
        leader_epoch: i32,
    ) -> Result<Option<ShareSnapshot>, ShareStateError> {
        match self.home(&key)? {
            Home::Here(partition) => self.read_at(partition, key, leader_epoch).await,
            Home::Node(node) => {
                let image = Arc::clone(&self.images.borrow());
                self.remote
                    .read(&self.replicas, &image, node, &key, leader_epoch)
                    .await
            }
        }
    }

    /// Stores a share partition's state, answered once replicated.
    pub(crate) async fn write(
        &self,
        key: StateKey,
        snapshot: ShareSnapshot,
    ) -> Result<(), ShareStateError> {
        match self.home(&key)? {
            Home::Here(partition) => self.write_at(partition, key, snapshot).await,
            Home::Node(node) => {
                let image = Arc::clone(&self.images.borrow());
                self.remote
                    .write(&self.replicas, &image, node, &key, &snapshot)
                    .await
            }
        }
    }

    /// ReadShareGroupState from another node: only this node's own partitions.
    pub(crate) async fn read_here(
        &self,
        key: StateKey,
        leader_epoch: i32,
    ) -> Result<Option<ShareSnapshot>, ShareStateError> {
        match self.home(&key)? {
            Home::Here(partition) => self.read_at(partition, key, leader_epoch).await,
            Home::Node(_) => Err(CoordinatorError::NotCoordinator.into()),
        }
    }

    /// WriteShareGroupState from another node: only this node's own partitions.
    pub(crate) async fn write_here(
        &self,
        key: StateKey,
        snapshot: ShareSnapshot,
    ) -> Result<(), ShareStateError> {
        match self.home(&key)? {
            Home::Here(partition) => self.write_at(partition, key, snapshot).await,
            Home::Node(_) => Err(CoordinatorError::NotCoordinator.into()),
        }
    }

    async fn read_at(
        &self,
        partition: i32,
        key: StateKey,
        leader_epoch: i32,
    ) -> Result<Option<ShareSnapshot>, ShareStateError> {
        self.runtime
            .read(partition, move |shard| shard.read(&key, leader_epoch))
            .await?
    }

    async fn write_at(
        &self,
        partition: i32,
        key: StateKey,
        snapshot: ShareSnapshot,
    ) -> Result<(), ShareStateError> {
        self.runtime
            .write(partition, move |shard, _now| shard.write(key, snapshot))
            .await?
    }

    /// Follows the image (which partitions are led here) and prunes superseded
    /// snapshots until `shutdown`.
    pub(crate) async fn run(self: Arc<Self>, shutdown: watch::Receiver<bool>) {
        let prunes = self.prunes.locked().take();
        let pruner = prunes.map(|rx| {
            tokio::spawn(prune::prune_loop(
                Arc::clone(&self.replicas),
                rx,
                shutdown.clone(),
            ))
        });
        Arc::clone(&self.runtime)
            .run(self.images.clone(), self.node_id, shutdown)
            .await;
        if let Some(pruner) = pruner {
            let _ = pruner.await;
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
        let mut shard = ShareStateShard::empty();
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

    fn written(
        outcome: Outcome<ShareStateShard, Result<(), ShareStateError>>,
    ) -> Option<ShareSnapshot> {
        let Ok(()) = outcome.response else {
            return None;
        };
        match outcome.write {
            crate::coordinator::Write::Records { mut records, .. } => match records.pop() {
                Some(ShareStateRecord::Snapshot(_, value)) => value,
                _ => None,
            },
            _ => None,
        }
    }

    #[test]
    fn a_leader_older_than_the_states_is_fenced_and_snapshot_epochs_are_the_coordinators() {
        let mut shard = ShareStateShard::empty();
        let key = ("g".to_string(), Uuid::from_u128(7), 0);
        let at = |leader_epoch, start_offset| ShareSnapshot {
            snapshot_epoch: 99,
            leader_epoch,
            start_offset,
            ..ShareSnapshot::default()
        };
        assert_eq!(shard.read(&key, 0), Ok(None));
        let first = written(shard.write(key.clone(), at(3, 10))).unwrap();
        assert_eq!(
            first.snapshot_epoch, 0,
            "the first snapshot is epoch 0, whatever was sent"
        );
        shard.replay(
            0,
            None,
            ShareStateRecord::Snapshot(key.clone(), Some(first)),
        );
        let second = written(shard.write(key.clone(), at(3, 12))).unwrap();
        assert_eq!(second.snapshot_epoch, 1);
        shard.replay(
            1,
            None,
            ShareStateRecord::Snapshot(key.clone(), Some(second)),
        );
        // A new leader (epoch 4) reads and writes; the deposed one (3) cannot any more.
        assert_eq!(shard.read(&key, 4).unwrap().unwrap().start_offset, 12);
        let newer = written(shard.write(key.clone(), at(4, 15))).unwrap();
        shard.replay(
            2,
            None,
            ShareStateRecord::Snapshot(key.clone(), Some(newer)),
        );
        assert_eq!(
            shard.write(key.clone(), at(3, 20)).response,
            Err(ShareStateError::FencedLeaderEpoch(4))
        );
        assert_eq!(
            shard.read(&key, 3),
            Err(ShareStateError::FencedLeaderEpoch(4))
        );
        assert_eq!(ShareStateError::FencedLeaderEpoch(4).code(), 74);
    }

    #[test]
    fn a_reset_at_a_newer_state_epoch_fences_the_leaders_state_and_a_retry_is_a_no_op() {
        let mut shard = ShareStateShard::empty();
        let key = ("g".to_string(), Uuid::from_u128(7), 0);
        let leader = |state_epoch, start_offset| ShareSnapshot {
            state_epoch,
            leader_epoch: 2,
            start_offset,
            ..ShareSnapshot::default()
        };
        let stored = written(shard.write(key.clone(), leader(0, 10))).unwrap();
        shard.replay(
            0,
            None,
            ShareStateRecord::Snapshot(key.clone(), Some(stored)),
        );
        // AlterShareGroupOffsets at group epoch 3: start 4, nothing in flight, the
        // leader epoch kept.
        let reset = written(shard.initialize(key.clone(), 3, 4)).unwrap();
        assert_eq!(
            (
                reset.state_epoch,
                reset.leader_epoch,
                reset.start_offset,
                reset.snapshot_epoch
            ),
            (3, 2, 4, 1)
        );
        assert!(reset.batches.is_empty());
        shard.replay(
            1,
            None,
            ShareStateRecord::Snapshot(key.clone(), Some(reset)),
        );
        // The leader's state from before the reset is fenced; a retry of the reset
        // changes nothing; an older reset is fenced.
        assert_eq!(
            shard.write(key.clone(), leader(0, 11)).response,
            Err(ShareStateError::FencedStateEpoch(3))
        );
        assert_eq!(ShareStateError::FencedStateEpoch(3).code(), 124);
        let retry = shard.initialize(key.clone(), 3, 9);
        assert!(matches!(retry.write, crate::coordinator::Write::Nothing));
        assert_eq!(retry.response, Ok(()));
        assert_eq!(
            shard.initialize(key.clone(), 2, 0).response,
            Err(ShareStateError::FencedStateEpoch(3))
        );
        // A leader that read the reset state writes at its epoch.
        assert!(written(shard.write(key.clone(), leader(3, 6))).is_some());
        // Deleted: a tombstone, then nothing to delete.
        let tombstone = shard.delete(key.clone());
        assert!(matches!(
            tombstone.write,
            crate::coordinator::Write::Records { ref records, .. }
                if records == &vec![ShareStateRecord::Snapshot(key.clone(), None)]
        ));
        shard.replay(2, None, ShareStateRecord::Snapshot(key.clone(), None));
        assert_eq!(shard.summary(&key), None);
        assert!(matches!(
            shard.delete(key).write,
            crate::coordinator::Write::Nothing
        ));
    }

    #[test]
    fn the_delivery_complete_count_a_leader_writes_is_kept_and_summarized() {
        let mut shard = ShareStateShard::empty();
        let key = ("g".to_string(), Uuid::from_u128(7), 0);
        let leader = |start_offset, delivery_complete_count| ShareSnapshot {
            leader_epoch: 1,
            start_offset,
            delivery_complete_count,
            ..ShareSnapshot::default()
        };
        let stored = written(shard.write(key.clone(), leader(10, 4))).unwrap();
        assert_eq!(stored.delivery_complete_count, 4);
        shard.replay(
            0,
            None,
            ShareStateRecord::Snapshot(key.clone(), Some(stored)),
        );
        assert_eq!(shard.summary(&key).unwrap().delivery_complete_count, 4);
        // A v0 leader's write: not known.
        let from_v0 = written(shard.write(key.clone(), leader(12, -1))).unwrap();
        shard.replay(
            1,
            None,
            ShareStateRecord::Snapshot(key.clone(), Some(from_v0)),
        );
        assert_eq!(shard.summary(&key).unwrap().delivery_complete_count, -1);
        // Offsets altered to a start offset: nothing is complete from there (Kafka's 0).
        let reset = written(shard.initialize(key.clone(), 3, 20)).unwrap();
        assert_eq!(reset.delivery_complete_count, 0);
    }

    #[test]
    fn the_coordinator_key_names_the_topic_id_as_kafka_does() {
        let id = Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        // Kafka's Uuid.toString: unpadded URL-safe base64 of the 16 bytes.
        assert_eq!(
            coordinator_key(&("g:1".to_string(), id, 3)),
            "g:1:ASNFZ4mrze8BI0VniavN7w:3"
        );
    }
}
