//! The group coordinator as the group probe sees it: a copy of each group's state,
//! members and committed offsets, taken under the coordinator's lock.

use super::groups::{CommittedOffset, GroupLagSource, GroupStatus};
use crate::group::GroupCoordinator;

impl GroupLagSource for GroupCoordinator {
    fn groups(&self) -> Vec<GroupStatus> {
        self.with_all(|inner| {
            inner
                .groups
                .map
                .values()
                .map(|g| GroupStatus {
                    group_id: g.id.clone(),
                    state: g.state.name().to_string(),
                    protocol_type: g.protocol_type.clone().unwrap_or_default(),
                    generation: g.generation,
                    members: g.members.len(),
                    committed: g
                        .offsets
                        .iter()
                        .map(|((topic, partition), value)| CommittedOffset {
                            topic: topic.clone(),
                            partition: *partition,
                            offset: value.offset,
                        })
                        .collect(),
                })
                .collect()
        })
    }
}
