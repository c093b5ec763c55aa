//! The group coordinator as the group probe sees it: each group's state, members and
//! committed offsets as its shard last published them.

use super::groups::{CommittedOffset, GroupLagSource, GroupStatus};
use crate::group::GroupCoordinator;

impl GroupLagSource for GroupCoordinator {
    fn groups(&self) -> Vec<GroupStatus> {
        self.published()
            .into_iter()
            .map(|(group_id, summary, offsets)| GroupStatus {
                group_id,
                state: summary.as_ref().map_or("Empty", |s| s.state).to_string(),
                group_type: summary.as_ref().map_or("", |s| s.group_type).to_string(),
                protocol_type: summary
                    .as_ref()
                    .map(|s| s.protocol_type.clone())
                    .unwrap_or_default(),
                generation: summary.as_ref().map_or(0, |s| s.generation),
                members: summary.as_ref().map_or(0, |s| s.members),
                member_list: summary
                    .as_ref()
                    .map(|s| s.member_list.clone())
                    .unwrap_or_default(),
                committed: offsets
                    .into_iter()
                    .map(|(topic, partition, offset)| CommittedOffset {
                        topic,
                        partition,
                        offset,
                    })
                    .collect(),
            })
            .collect()
    }
}
