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

/// One `__share_group_state` partition's share-partition states.
pub(crate) struct ShareStateShard {
    states: HashMap<StateKey, ShareSnapshot>,
}

impl Shard for ShareStateShard {
    type Record = ShareStateRecord;
    type Effect = ();

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

    fn replay(&mut self, _offset: i64, _producer: Option<i64>, record: Self::Record) {
        if let ShareStateRecord::Snapshot(key, value) = record {
            match value {
                Some(v) => {
                    self.states.insert(key, v);
                }
                None => {
                    self.states.remove(&key);
                }
            }
        }
    }

    fn commit(&mut self, _offset: i64) {}

    fn tick(&mut self, _now: Now) -> Outcome<Self, ()> {
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
    ) -> ShareStateCoordinator {
        // The shard has no effects; the channel only satisfies the runtime.
        let (effects, _) = mpsc::channel(1);
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
            },
            effects,
        ));
        ShareStateCoordinator {
            runtime,
            images,
            node_id,
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

    /// Follows the image (which partitions are led here) until `shutdown`.
    pub(crate) async fn run(self: Arc<Self>, shutdown: watch::Receiver<bool>) {
        Arc::clone(&self.runtime)
            .run(self.images.clone(), self.node_id, shutdown)
            .await;
    }
}
