//! A consumer group whose last consumer-protocol member goes becomes a classic group
//! again (KIP-848's online downgrade, Kafka's `convertToClassicGroup`), so a fleet can
//! roll back one consumer at a time as it rolled forward.
//!
//! When a member is fenced (it left with epoch -1, or its session or rebalance timeout
//! ran out) and every member that stays speaks the classic protocol, the step writes
//! the consumer group's tombstones and, after them, a classic group metadata record at
//! the group epoch: each member with the protocols it joined with and its target
//! assignment in the embedded protocol. Once that is committed the classic group
//! prepares a rebalance, so the members hear REBALANCE_IN_PROGRESS on their next
//! heartbeat and rejoin it as any classic group's members do. A member that leaves
//! with LeaveGroup only goes, as in Kafka. A classic static member that takes over the
//! instance of the last consumer-protocol member turns the group classic too, holding
//! the replaced member's target; nothing else moves, so no rebalance follows.

use std::collections::BTreeSet;
use std::time::Instant;

use super::classic::{embedded_version, encode_assignment, CONSUMER_PROTOCOL};
use super::heartbeat::Writer;
use super::offsets::consumer_group_tombstones;
use super::{ConsumerGroup, TopicsView};
use crate::coordinator::Now;
use crate::group::rebalance::select_protocol;
use crate::group::records::GroupRecord;
use crate::group::shard::GroupShard;
use crate::group::state::{Group, GroupState, Member};
use crate::group::GroupConfig;

impl GroupConfig {
    /// The records that turn `group` classic when fencing `leaving` is a downgrade
    /// (see [`GroupConfig::downgrades`] and [`downgrade`]); the stats forget its members.
    pub(super) fn downgrade_fencing(
        &self,
        group: &ConsumerGroup,
        leaving: &BTreeSet<String>,
        topics: &TopicsView,
        now: Now,
    ) -> Option<Vec<GroupRecord>> {
        if !self.downgrades(group, leaving) {
            return None;
        }
        let records = downgrade(group, leaving, topics, now.at, now.ms)?;
        self.forget_members(group);
        Some(records)
    }

    /// The reconciliation stats of a group that stops being a consumer group.
    pub(super) fn forget_members(&self, group: &ConsumerGroup) {
        for id in group.members.keys() {
            self.consumer_stats.forget(&group.id, id);
        }
    }

    /// Whether fencing `leaving` turns `group` classic (Kafka's
    /// `validateOnlineDowngradeWithFencedMember`): members stay, all of them classic,
    /// the policy allows it, and they fit a classic group.
    fn downgrades(&self, group: &ConsumerGroup, leaving: &BTreeSet<String>) -> bool {
        let mut staying = group
            .members
            .values()
            .filter(|m| !leaving.contains(&m.id))
            .peekable();
        let some_stay = staying.peek().is_some();
        let mut count = 0;
        let all_classic = staying.all(|m| {
            count += 1;
            m.metadata.classic.is_some()
        });
        self.consumer_downgrade && some_stay && all_classic && count <= self.max_size
    }

    /// Whether a classic static member taking `replaced`'s instance turns `group`
    /// classic (Kafka's `validateOnlineDowngradeWithReplacedMemberId`): every other
    /// member is classic, the policy allows it, and they fit a classic group.
    pub(super) fn downgrades_replacing(&self, group: &ConsumerGroup, replaced: &str) -> bool {
        self.consumer_downgrade
            && group.members.len() <= self.max_size
            && group
                .members
                .values()
                .all(|m| m.id == replaced || m.metadata.classic.is_some())
    }
}

/// The records that turn `group` classic without the `leaving` members; None when the
/// members share no protocol (Kafka refuses the downgrade then, and the members simply
/// go).
fn downgrade(
    group: &ConsumerGroup,
    leaving: &BTreeSet<String>,
    topics: &TopicsView,
    now: Instant,
    now_ms: i64,
) -> Option<Vec<GroupRecord>> {
    let classic = classic_group(group, leaving, topics, now, now_ms)?;
    let mut records = tombstones(group, now);
    records.push(classic.metadata_record(now_ms));
    Some(records)
}

/// The classic group `group` becomes without `leaving`: at the group epoch, Stable,
/// each member with the protocols it joined with and its target assignment.
pub(super) fn classic_group(
    group: &ConsumerGroup,
    leaving: &BTreeSet<String>,
    topics: &TopicsView,
    now: Instant,
    now_ms: i64,
) -> Option<Group> {
    let mut classic = Group::new(group.id.clone(), now_ms);
    classic.protocol_type = Some(CONSUMER_PROTOCOL.to_string());
    classic.generation = group.epoch;
    for m in group.members.values().filter(|m| !leaving.contains(&m.id)) {
        let joined = m.metadata.classic.as_ref()?;
        classic.members.insert(
            m.id.clone(),
            Member {
                id: m.id.clone(),
                instance_id: m.metadata.instance_id.clone(),
                client_id: m.metadata.client_id.clone(),
                client_host: m.metadata.client_host.clone(),
                rebalance_timeout_ms: m.metadata.rebalance_timeout_ms,
                session_timeout_ms: joined.session_timeout_ms,
                protocols: joined.protocols.clone(),
                assignment: bytes::Bytes::new(),
                last_heartbeat: now,
                join_waiter: None,
                sync_waiter: None,
            },
        );
        if let Some(instance) = &m.metadata.instance_id {
            classic
                .static_members
                .insert(instance.clone(), m.id.clone());
        }
    }
    let protocol = select_protocol(&classic)?;
    for (id, member) in classic.members.iter_mut() {
        let version = embedded_version(&member.metadata_for(&protocol));
        let target = group.members.get(id).map(|m| &m.target)?;
        member.assignment = encode_assignment(version, target, topics);
    }
    classic.protocol = Some(protocol);
    classic.state = GroupState::Stable;
    Some(classic)
}

/// The tombstones of every record of `group`, its metadata's last.
pub(super) fn tombstones(group: &ConsumerGroup, now: Instant) -> Vec<GroupRecord> {
    let mut gone = group.clone();
    let mut w = Writer {
        group: &mut gone,
        records: Vec::new(),
        now,
    };
    for id in group.members.keys() {
        w.remove_member(id);
    }
    let mut records = w.records;
    records.extend(consumer_group_tombstones(group));
    records
}

impl GroupShard {
    /// A downgraded group's records are committed: the classic group asks its members
    /// to rejoin, unless something already moved it on.
    pub(crate) fn rebalance_downgraded(&mut self, downgraded: &[(String, i32)], now: Now) {
        for (id, generation) in downgraded {
            if let Some(group) = self.groups.map.get_mut(id) {
                if group.state == GroupState::Stable && group.generation == *generation {
                    tracing::info!(group = %id, "consumer group downgraded to a classic group");
                    self.config.prepare_rebalance(group, now.at, now.ms);
                }
            }
        }
    }
}
