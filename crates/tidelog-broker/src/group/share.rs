//! Share groups (KIP-932): membership of a share group at its coordinator.
//!
//! A share group uses the consumer-protocol heartbeat model (member epochs bumped by
//! the group epoch, a target assignment computed by the coordinator) without any
//! revocation: a partition may be assigned to many members at once, since the records
//! of a partition are shared out by the partition's leader (`crate::share`), not by the
//! assignment. The assignor hands every member every partition of the topics it
//! subscribes to, so every member fetches from every partition and each leader's share
//! partition decides who gets which record.
//!
//! Membership is transient, like a classic group's members: a new coordinator starts
//! the group empty and its members re-join (the heartbeat of an unknown member answers
//! UNKNOWN_MEMBER_ID, on which the client joins again). What must outlive the members is
//! durable (`share_records`): that the group exists, with its epoch, and which share
//! partitions have state, so an empty group can have its offsets described, altered
//! and deleted (`share_offsets`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::consumer::{Assignment, TopicsView};
use super::records::{GroupRecord, RecordKey, RecordValue};
use super::shard::GroupShard;
use super::share_records::{ShareKey, ShareTopics, ShareValue};
use crate::coordinator::{Now, Outcome};

/// A ShareGroupHeartbeat as the coordinator sees it.
#[derive(Debug, Clone, Default)]
pub(crate) struct ShareHeartbeat {
    pub(crate) group_id: String,
    pub(crate) member_id: String,
    pub(crate) member_epoch: i32,
    pub(crate) rack_id: Option<String>,
    pub(crate) subscribed_topic_names: Option<Vec<String>>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ShareHeartbeatResponse {
    pub(crate) error: i16,
    pub(crate) message: Option<String>,
    pub(crate) member_id: String,
    pub(crate) member_epoch: i32,
    pub(crate) heartbeat_interval_ms: i32,
    pub(crate) assignment: Option<Assignment>,
}

#[derive(Debug, Clone)]
pub(crate) struct ShareMember {
    pub(crate) id: String,
    pub(crate) member_epoch: i32,
    pub(crate) rack_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) subscribed_topic_names: Vec<String>,
    pub(crate) assignment: Assignment,
    last_heartbeat: Instant,
}

#[derive(Debug, Clone)]
pub(crate) struct ShareGroup {
    pub(crate) epoch: i32,
    pub(crate) assignment_epoch: i32,
    pub(crate) members: BTreeMap<String, ShareMember>,
    /// The subscribed topics (id, partition count) the assignment was computed for.
    subscribed: BTreeMap<Uuid, i32>,
    /// A ShareGroupMetadata record of the group is in the log: it exists while empty.
    pub(crate) stored: bool,
    /// The share partitions with state, as last written.
    pub(crate) initialized: ShareTopics,
}

/// The assignor's name, as ShareGroupDescribe shows it (Kafka's default share assignor).
pub(crate) const SHARE_ASSIGNOR: &str = "simple";

impl ShareGroup {
    pub(crate) fn new() -> ShareGroup {
        ShareGroup {
            epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            subscribed: BTreeMap::new(),
            stored: false,
            initialized: ShareTopics::new(),
        }
    }

    /// Kafka's share-group states.
    pub(crate) fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else {
            "Stable"
        }
    }

    /// Every subscribed topic of any member, as the image has it.
    fn subscribed_topics(&self, topics: &TopicsView) -> BTreeMap<Uuid, i32> {
        self.members
            .values()
            .flat_map(|m| &m.subscribed_topic_names)
            .filter_map(|name| topics.by_name.get(name).copied())
            .collect()
    }

    /// A new group epoch when membership or the subscribed topics changed, and with it
    /// every member's assignment (all partitions of the topics it subscribes to).
    fn reassign(&mut self, topics: &TopicsView, membership_changed: bool) {
        let subscribed = self.subscribed_topics(topics);
        if !membership_changed && subscribed == self.subscribed {
            return;
        }
        self.epoch = self.epoch.saturating_add(1);
        self.subscribed = subscribed;
        for m in self.members.values_mut() {
            let mut a = Assignment::new();
            for name in &m.subscribed_topic_names {
                if let Some((id, count)) = topics.by_name.get(name) {
                    let partitions: BTreeSet<i32> = (0..*count).collect();
                    a.insert(*id, partitions);
                }
            }
            m.assignment = a;
        }
        self.assignment_epoch = self.epoch;
    }
}

fn refused(code: ResponseError, message: String, member_id: String) -> ShareHeartbeatResponse {
    ShareHeartbeatResponse {
        error: code.code(),
        message: Some(message),
        member_id,
        member_epoch: -1,
        ..ShareHeartbeatResponse::default()
    }
}

impl GroupShard {
    /// ShareGroupHeartbeat: joins (epoch 0), leaves (epoch -1) or keeps a member
    /// alive; a member whose epoch is behind the group's gets the new assignment.
    pub(crate) fn share_heartbeat(
        &mut self,
        req: ShareHeartbeat,
        topics: &TopicsView,
        now: Now,
    ) -> Outcome<Self, ShareHeartbeatResponse> {
        let (group_id, member_id) = (req.group_id.clone(), req.member_id.clone());
        let response = self.share_heartbeat_answer(req, topics, now.at);
        let records = match self.share_groups.get(&group_id) {
            Some(g) if response.error == 0 && response.member_epoch >= 0 => {
                durable_records(&group_id, g, g.members.get(&member_id), topics)
            }
            _ => Vec::new(),
        };
        if records.is_empty() {
            Outcome::answer(response)
        } else {
            Outcome::records(records, response)
        }
    }

    fn share_heartbeat_answer(
        &mut self,
        req: ShareHeartbeat,
        topics: &TopicsView,
        now: Instant,
    ) -> ShareHeartbeatResponse {
        let member_id = req.member_id.clone();
        let invalid = |m: &str| {
            refused(
                ResponseError::InvalidRequest,
                m.to_string(),
                member_id.clone(),
            )
        };
        if req.group_id.is_empty() {
            return invalid("GroupId can't be empty.");
        }
        if req.member_id.is_empty() {
            return invalid("MemberId can't be empty.");
        }
        if req.rack_id.as_deref() == Some("") {
            return invalid("RackId can't be empty.");
        }
        if req.member_epoch == 0
            && req
                .subscribed_topic_names
                .as_ref()
                .is_none_or(|s| s.is_empty())
        {
            return invalid("SubscribedTopicNames must be set in first request.");
        }
        if req.member_epoch < -1 {
            return invalid("MemberEpoch is invalid.");
        }
        if self.groups.map.contains_key(&req.group_id)
            || self.consumer_groups.contains_key(&req.group_id)
        {
            return refused(
                ResponseError::GroupIdNotFound,
                format!("Group {} is not a share group.", req.group_id),
                member_id,
            );
        }
        let interval = self
            .config
            .group_configs
            .share_heartbeat_interval_ms(&req.group_id);
        let max_size = self.config.share_max_size;
        if req.member_epoch == -1 {
            if let Some(g) = self.share_groups.get_mut(&req.group_id) {
                if g.members.remove(&req.member_id).is_some() {
                    g.epoch = g.epoch.saturating_add(1);
                    g.assignment_epoch = g.epoch;
                }
                if g.members.is_empty() && !g.stored {
                    self.share_groups.remove(&req.group_id);
                }
            }
            return ShareHeartbeatResponse {
                member_id,
                member_epoch: -1,
                heartbeat_interval_ms: interval,
                ..ShareHeartbeatResponse::default()
            };
        }
        let known = self
            .share_groups
            .get(&req.group_id)
            .is_some_and(|g| g.members.contains_key(&member_id));
        let size = self
            .share_groups
            .get(&req.group_id)
            .map_or(0, |g| g.members.len());
        if !known && req.member_epoch != 0 {
            return refused(
                ResponseError::UnknownMemberId,
                format!(
                    "Member {member_id} is not a member of group {}.",
                    req.group_id
                ),
                member_id,
            );
        }
        if !known && size >= max_size {
            return refused(
                ResponseError::GroupMaxSizeReached,
                format!("The share group has reached its maximum capacity of {max_size} members."),
                member_id,
            );
        }
        let group = self
            .share_groups
            .entry(req.group_id.clone())
            .or_insert_with(ShareGroup::new);
        let before = group.members.get(&member_id).map(|m| m.assignment.clone());
        let mut changed = !known;
        let member = group
            .members
            .entry(member_id.clone())
            .or_insert_with(|| ShareMember {
                id: member_id.clone(),
                member_epoch: 0,
                rack_id: None,
                client_id: String::new(),
                client_host: String::new(),
                subscribed_topic_names: Vec::new(),
                assignment: Assignment::new(),
                last_heartbeat: now,
            });
        if known && req.member_epoch != member.member_epoch && req.member_epoch != 0 {
            return refused(
                ResponseError::FencedMemberEpoch,
                format!(
                    "The share group member has a member epoch ({}) which differs from the one \
                     the coordinator expects ({}).",
                    req.member_epoch, member.member_epoch
                ),
                member_id,
            );
        }
        member.last_heartbeat = now;
        member.client_id = req.client_id;
        member.client_host = req.client_host;
        if req.rack_id.is_some() {
            member.rack_id = req.rack_id;
        }
        if let Some(mut names) = req.subscribed_topic_names {
            names.sort_unstable();
            names.dedup();
            if names != member.subscribed_topic_names {
                member.subscribed_topic_names = names;
                changed = true;
            }
        }
        group.reassign(topics, changed);
        let epoch = group.epoch;
        let member = group.members.get_mut(&member_id);
        let Some(member) = member else {
            return invalid("The member went away.");
        };
        member.member_epoch = epoch;
        let send_assignment = req.member_epoch == 0 || before.as_ref() != Some(&member.assignment);
        ShareHeartbeatResponse {
            error: 0,
            message: None,
            member_id: member_id.clone(),
            member_epoch: epoch,
            heartbeat_interval_ms: interval,
            assignment: send_assignment.then(|| member.assignment.clone()),
        }
    }

    /// The clock: members silent for longer than the share session timeout leave
    /// (the others' assignments do not change: each has every partition it subscribes
    /// to; the group epoch moves on).
    pub(crate) fn expire_share_members(&mut self, now: Now) {
        let configs = &self.config.group_configs;
        self.share_groups.retain(|id, g| {
            let session = Duration::from_millis(
                u64::try_from(configs.share_session_timeout_ms(id)).unwrap_or(0),
            );
            let before = g.members.len();
            g.members.retain(|member, m| {
                let alive = now.at.saturating_duration_since(m.last_heartbeat) <= session;
                if !alive {
                    tracing::info!(group = %id, member = %member, "share group member fenced: session timeout");
                }
                alive
            });
            if g.members.len() != before {
                g.epoch = g.epoch.saturating_add(1);
                g.assignment_epoch = g.epoch;
            }
            !g.members.is_empty() || g.stored
        });
    }

    /// A share group's durable record replayed (a tombstone when `value` is `None`).
    pub(crate) fn replay_share(&mut self, key: ShareKey, value: Option<ShareValue>) {
        let id = key.group().to_string();
        match (key, value) {
            (ShareKey::Metadata { .. }, Some(ShareValue::Metadata { epoch })) => {
                let g = self.share_groups.entry(id).or_insert_with(ShareGroup::new);
                g.stored = true;
                g.epoch = g.epoch.max(epoch);
            }
            (
                ShareKey::PartitionMetadata { .. },
                Some(ShareValue::PartitionMetadata { initialized }),
            ) => {
                self.share_groups
                    .entry(id)
                    .or_insert_with(ShareGroup::new)
                    .initialized = initialized;
            }
            (ShareKey::Metadata { .. }, None) => {
                if let Some(g) = self.share_groups.get_mut(&id) {
                    g.stored = false;
                    if g.members.is_empty() {
                        self.share_groups.remove(&id);
                    }
                }
            }
            (ShareKey::PartitionMetadata { .. }, None) => {
                if let Some(g) = self.share_groups.get_mut(&id) {
                    g.initialized.clear();
                }
            }
            // A value of the other kind cannot be decoded for a key (share_records.rs).
            _ => {}
        }
    }

    pub(crate) fn describe_share(&self, group_id: &str) -> Option<ShareGroup> {
        self.share_groups.get(group_id).cloned()
    }
}

/// One share-group record of `__consumer_offsets`.
pub(crate) fn share_record(key: ShareKey, value: Option<ShareValue>) -> GroupRecord {
    GroupRecord {
        key: RecordKey::Share(key),
        value: value.map(RecordValue::Share),
    }
}

/// The tombstones of a deleted share group's records.
pub(crate) fn share_group_tombstones(group_id: &str) -> Vec<GroupRecord> {
    let group = group_id.to_string();
    vec![
        share_record(
            ShareKey::PartitionMetadata {
                group: group.clone(),
            },
            None,
        ),
        share_record(ShareKey::Metadata { group }, None),
    ]
}

/// What a heartbeat of `member` must make durable: the group, when it is new, and the
/// partitions of the member's topics that have no recorded state yet (each leader
/// initializes a share partition's state when it first serves it).
fn durable_records(
    group_id: &str,
    group: &ShareGroup,
    member: Option<&ShareMember>,
    topics: &TopicsView,
) -> Vec<GroupRecord> {
    let mut records = Vec::new();
    if !group.stored {
        records.push(share_record(
            ShareKey::Metadata {
                group: group_id.to_string(),
            },
            Some(ShareValue::Metadata { epoch: group.epoch }),
        ));
    }
    let mut initialized = group.initialized.clone();
    for name in member.map_or(&[][..], |m| &m.subscribed_topic_names[..]) {
        if let Some((id, count)) = topics.by_name.get(name) {
            let entry = initialized
                .entry(*id)
                .or_insert_with(|| (name.clone(), BTreeSet::new()));
            entry.0.clone_from(name);
            entry.1.extend(0..*count);
        }
    }
    if initialized != group.initialized {
        records.push(share_record(
            ShareKey::PartitionMetadata {
                group: group_id.to_string(),
            },
            Some(ShareValue::PartitionMetadata { initialized }),
        ));
    }
    records
}
