//! The group coordinator's part of DescribeShareGroupOffsets, AlterShareGroupOffsets
//! and DeleteShareGroupOffsets (KIP-932): which share partitions a share group has
//! state for, and the checks and records of a change. The states themselves are the
//! share coordinator's (`crate::share::state`); the API handlers ask it for each
//! partition after the group's part is done.
//!
//! As in Kafka, offsets can only be altered or deleted while the group has no members,
//! and an alteration moves the group epoch on: the share coordinator stores the new
//! start offsets at that epoch as the state epoch, which fences the state a leader
//! still holds from before.

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::shard::GroupShard;
use super::share::{share_record, ShareGroup};
use super::share_records::{ShareKey, ShareTopics, ShareValue};
use super::{GroupCoordinator, GroupError};
use crate::coordinator::Outcome;

/// Why the group refuses: a Kafka error for the whole group, with its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShareRefusal {
    pub(crate) error: ResponseError,
    pub(crate) message: String,
}

fn refusal(error: ResponseError, message: String) -> ShareRefusal {
    ShareRefusal { error, message }
}

impl GroupShard {
    fn share_group_of(&self, group_id: &str) -> Result<&ShareGroup, ShareRefusal> {
        if self.groups.map.contains_key(group_id) || self.consumer_groups.contains_key(group_id) {
            return Err(refusal(
                ResponseError::GroupIdNotFound,
                format!("Group {group_id} is not a share group."),
            ));
        }
        self.share_groups.get(group_id).ok_or_else(|| {
            refusal(
                ResponseError::GroupIdNotFound,
                format!("Group {group_id} not found."),
            )
        })
    }

    fn empty_share_group_of(&self, group_id: &str) -> Result<&ShareGroup, ShareRefusal> {
        let group = self.share_group_of(group_id)?;
        if !group.members.is_empty() {
            return Err(refusal(
                ResponseError::NonEmptyGroup,
                format!(
                    "The share group {group_id} has {} members; its offsets change only while it is empty.",
                    group.members.len()
                ),
            ));
        }
        Ok(group)
    }

    /// The share partitions `group_id` has state for.
    pub(crate) fn share_offsets_topics(&self, group_id: &str) -> Result<ShareTopics, ShareRefusal> {
        Ok(self.share_group_of(group_id)?.initialized.clone())
    }

    /// The share partitions of an empty `group_id`, before their state is deleted.
    pub(crate) fn deletable_share_topics(
        &self,
        group_id: &str,
    ) -> Result<ShareTopics, ShareRefusal> {
        Ok(self.empty_share_group_of(group_id)?.initialized.clone())
    }

    /// An alteration of an empty group's start offsets in `topics`: a new group epoch
    /// (answered: the state epoch to store them at) and the partitions recorded.
    pub(crate) fn alter_share_offsets(
        &mut self,
        group_id: &str,
        topics: ShareTopics,
    ) -> Outcome<Self, Result<i32, ShareRefusal>> {
        let group = match self.empty_share_group_of(group_id) {
            Ok(g) => g,
            Err(e) => return Outcome::answer(Err(e)),
        };
        let epoch = group.epoch.saturating_add(1);
        let mut initialized = group.initialized.clone();
        for (id, (name, partitions)) in topics {
            let entry = initialized
                .entry(id)
                .or_insert_with(|| (name, Default::default()));
            entry.1.extend(partitions);
        }
        let mut records = vec![share_record(
            ShareKey::Metadata {
                group: group_id.to_string(),
            },
            Some(ShareValue::Metadata { epoch }),
        )];
        if initialized != group.initialized {
            records.push(share_record(
                ShareKey::PartitionMetadata {
                    group: group_id.to_string(),
                },
                Some(ShareValue::PartitionMetadata { initialized }),
            ));
        }
        Outcome::records(records, Ok(epoch))
    }

    /// The topics in `ids` no longer have state for `group_id` (their state is deleted).
    pub(crate) fn forget_share_topics(
        &mut self,
        group_id: &str,
        ids: &[Uuid],
    ) -> Outcome<Self, ()> {
        let Some(group) = self.share_groups.get(group_id) else {
            return Outcome::answer(());
        };
        let mut initialized = group.initialized.clone();
        initialized.retain(|id, _| !ids.contains(id));
        if initialized == group.initialized {
            return Outcome::answer(());
        }
        Outcome::records(
            vec![share_record(
                ShareKey::PartitionMetadata {
                    group: group_id.to_string(),
                },
                Some(ShareValue::PartitionMetadata { initialized }),
            )],
            (),
        )
    }
}

impl GroupCoordinator {
    pub(crate) async fn share_offsets_topics(
        &self,
        group: String,
    ) -> Result<Result<ShareTopics, ShareRefusal>, GroupError> {
        let partition = self.partition_of(&group)?;
        Ok(self
            .runtime
            .read(partition, move |shard| shard.share_offsets_topics(&group))
            .await?)
    }

    pub(crate) async fn deletable_share_topics(
        &self,
        group: String,
    ) -> Result<Result<ShareTopics, ShareRefusal>, GroupError> {
        let partition = self.partition_of(&group)?;
        Ok(self
            .runtime
            .read(partition, move |shard| shard.deletable_share_topics(&group))
            .await?)
    }

    pub(crate) async fn alter_share_offsets(
        &self,
        group: String,
        topics: ShareTopics,
    ) -> Result<Result<i32, ShareRefusal>, GroupError> {
        let partition = self.partition_of(&group)?;
        Ok(self
            .runtime
            .write(partition, move |shard, _| {
                shard.alter_share_offsets(&group, topics)
            })
            .await?)
    }

    pub(crate) async fn forget_share_topics(
        &self,
        group: String,
        ids: Vec<Uuid>,
    ) -> Result<(), GroupError> {
        let partition = self.partition_of(&group)?;
        Ok(self
            .runtime
            .write(partition, move |shard, _| {
                shard.forget_share_topics(&group, &ids)
            })
            .await?)
    }
}
