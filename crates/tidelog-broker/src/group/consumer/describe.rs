//! ConsumerGroupDescribe's view of a group, and what ListGroups and the metrics show of
//! consumer groups.

use super::heartbeat::group_assignor;
use super::ConsumerMember;
use crate::group::shard::GroupShard;

/// A consumer group as ConsumerGroupDescribe shows it.
#[derive(Debug, Clone)]
pub(crate) struct DescribedConsumerGroup {
    pub(crate) state: &'static str,
    pub(crate) epoch: i32,
    pub(crate) assignment_epoch: i32,
    pub(crate) assignor: String,
    pub(crate) members: Vec<ConsumerMember>,
}

#[derive(Debug, Clone)]
pub(crate) enum ConsumerDescribe {
    NotFound,
    /// A classic group of that id.
    NotConsumer,
    Group(DescribedConsumerGroup),
}

impl GroupShard {
    pub(crate) fn describe_consumer(&self, group_id: &str) -> ConsumerDescribe {
        match self.consumer_groups.get(group_id) {
            Some(g) => ConsumerDescribe::Group(DescribedConsumerGroup {
                state: g.state_name(),
                epoch: g.epoch,
                assignment_epoch: g.assignment_epoch,
                assignor: group_assignor(g, &self.config),
                members: g.members.values().cloned().collect(),
            }),
            None if self.groups.map.contains_key(group_id) => ConsumerDescribe::NotConsumer,
            None => ConsumerDescribe::NotFound,
        }
    }
}
