//! The share coordinator's answers to the group coordinator (KIP-932's
//! InitializeShareGroupState, DeleteShareGroupState and ReadShareGroupStateSummary):
//! a share partition's state set to a start offset at a new state epoch (an alteration
//! of a share group's offsets), deleted (the group's offsets or the group deleted), or
//! read without a leader's fencing (DescribeShareGroupOffsets).

use std::sync::Arc;

use super::records::{ShareSnapshot, ShareStateRecord, StateKey, UNKNOWN_DELIVERY_COMPLETE_COUNT};
use super::{Home, ShareStateCoordinator, ShareStateError, ShareStateShard, MAX_STATES};
use crate::coordinator::{CoordinatorError, Outcome};

impl ShareStateShard {
    /// Kafka's rule: a state already at `state_epoch` stays as it is (a retry); an
    /// older one is replaced by `start_offset` with nothing in flight; a newer one
    /// fences the request.
    pub(super) fn initialize(
        &mut self,
        key: StateKey,
        state_epoch: i32,
        start_offset: i64,
    ) -> Outcome<Self, Result<(), ShareStateError>> {
        let (snapshot_epoch, leader_epoch) = match self.states.get(&key) {
            Some(stored) if stored.state_epoch > state_epoch => {
                return Outcome::answer(Err(ShareStateError::FencedStateEpoch(stored.state_epoch)));
            }
            Some(stored) if stored.state_epoch == state_epoch => return Outcome::answer(Ok(())),
            // The leader epoch stays: a deposed leader is still fenced.
            Some(stored) => (stored.snapshot_epoch.wrapping_add(1), stored.leader_epoch),
            None if self.states.len() >= MAX_STATES => {
                return Outcome::answer(Err(CoordinatorError::NotAvailable(
                    "too many share partitions on this share-state partition".into(),
                )
                .into()));
            }
            None => (0, 0),
        };
        let snapshot = ShareSnapshot {
            snapshot_epoch,
            state_epoch,
            leader_epoch,
            start_offset,
            // Kafka's: from a start offset nothing is complete yet; without one the
            // lag cannot be known.
            delivery_complete_count: if start_offset >= 0 {
                0
            } else {
                UNKNOWN_DELIVERY_COMPLETE_COUNT
            },
            batches: Vec::new(),
        };
        Outcome::records(
            vec![ShareStateRecord::Snapshot(key, Some(snapshot))],
            Ok(()),
        )
    }

    /// A tombstone for the state of `key` (nothing when there is none).
    pub(super) fn delete(&mut self, key: StateKey) -> Outcome<Self, Result<(), ShareStateError>> {
        if !self.states.contains_key(&key) {
            return Outcome::answer(Ok(()));
        }
        Outcome::records(vec![ShareStateRecord::Snapshot(key, None)], Ok(()))
    }

    pub(super) fn summary(&self, key: &StateKey) -> Option<ShareSnapshot> {
        self.states.get(key).cloned()
    }
}

impl ShareStateCoordinator {
    /// The stored state of `key` wherever its coordinator is, unfenced.
    pub(crate) async fn summary(
        &self,
        key: StateKey,
    ) -> Result<Option<ShareSnapshot>, ShareStateError> {
        match self.home(&key)? {
            Home::Here(partition) => self.summary_at(partition, key).await,
            Home::Node(node) => {
                let image = Arc::clone(&self.images.borrow());
                self.remote
                    .summary(&self.replicas, &image, node, &key)
                    .await
            }
        }
    }

    /// Sets the state of `key` to `start_offset` at `state_epoch`, wherever its
    /// coordinator is.
    pub(crate) async fn initialize(
        &self,
        key: StateKey,
        state_epoch: i32,
        start_offset: i64,
    ) -> Result<(), ShareStateError> {
        match self.home(&key)? {
            Home::Here(partition) => {
                self.initialize_at(partition, key, state_epoch, start_offset)
                    .await
            }
            Home::Node(node) => {
                let image = Arc::clone(&self.images.borrow());
                self.remote
                    .initialize(
                        &self.replicas,
                        &image,
                        node,
                        &key,
                        state_epoch,
                        start_offset,
                    )
                    .await
            }
        }
    }

    /// Deletes the state of `key`, wherever its coordinator is.
    pub(crate) async fn delete(&self, key: StateKey) -> Result<(), ShareStateError> {
        match self.home(&key)? {
            Home::Here(partition) => self.delete_at(partition, key).await,
            Home::Node(node) => {
                let image = Arc::clone(&self.images.borrow());
                self.remote.delete(&self.replicas, &image, node, &key).await
            }
        }
    }

    /// ReadShareGroupStateSummary from another node: this node's partitions only.
    pub(crate) async fn summary_here(
        &self,
        key: StateKey,
    ) -> Result<Option<ShareSnapshot>, ShareStateError> {
        let partition = self.partition_here(&key)?;
        self.summary_at(partition, key).await
    }

    /// InitializeShareGroupState from another node: this node's partitions only.
    pub(crate) async fn initialize_here(
        &self,
        key: StateKey,
        state_epoch: i32,
        start_offset: i64,
    ) -> Result<(), ShareStateError> {
        let partition = self.partition_here(&key)?;
        self.initialize_at(partition, key, state_epoch, start_offset)
            .await
    }

    /// DeleteShareGroupState from another node: this node's partitions only.
    pub(crate) async fn delete_here(&self, key: StateKey) -> Result<(), ShareStateError> {
        let partition = self.partition_here(&key)?;
        self.delete_at(partition, key).await
    }

    fn partition_here(&self, key: &StateKey) -> Result<i32, ShareStateError> {
        match self.home(key)? {
            Home::Here(partition) => Ok(partition),
            Home::Node(_) => Err(CoordinatorError::NotCoordinator.into()),
        }
    }

    async fn summary_at(
        &self,
        partition: i32,
        key: StateKey,
    ) -> Result<Option<ShareSnapshot>, ShareStateError> {
        Ok(self
            .runtime
            .read(partition, move |shard| shard.summary(&key))
            .await?)
    }

    async fn initialize_at(
        &self,
        partition: i32,
        key: StateKey,
        state_epoch: i32,
        start_offset: i64,
    ) -> Result<(), ShareStateError> {
        self.runtime
            .write(partition, move |shard, _now| {
                shard.initialize(key, state_epoch, start_offset)
            })
            .await?
    }

    async fn delete_at(&self, partition: i32, key: StateKey) -> Result<(), ShareStateError> {
        self.runtime
            .write(partition, move |shard, _now| shard.delete(key))
            .await?
    }
}
