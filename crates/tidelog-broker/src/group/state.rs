//! A group's in-memory membership state.
//!
//! Two kinds of state live here. The durable kind — the last completed generation
//! (protocol, leader, members, assignments) — changes only by replaying a group
//! metadata record ([`Group::replay_metadata`], from `shard`), whether the record was
//! just appended or is being loaded after a restart. The transient kind — who has
//! rejoined during a rebalance, parked Join/Sync responses, heartbeat times — exists
//! only while this node is coordinator, exactly as in Kafka; after a restart members
//! simply rejoin. Committed offsets live beside the groups, in the shard's timeline.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::oneshot;

use super::records::{GroupRecord, GroupValue, RecordKey, RecordValue, StoredMember};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The name Kafka's tools print and ListGroups filters on.
    pub(crate) fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// What a parked JoinGroup is answered with.
#[derive(Debug, Clone, Default)]
pub(crate) struct JoinOutcome {
    pub(crate) error: i16,
    pub(crate) generation: i32,
    pub(crate) protocol_type: Option<String>,
    pub(crate) protocol: Option<String>,
    pub(crate) leader: String,
    pub(crate) member_id: String,
    pub(crate) skip_assignment: bool,
    /// Filled for the leader only: (member id, instance id, metadata of the chosen protocol).
    pub(crate) members: Vec<(String, Option<String>, Bytes)>,
}

/// What a parked SyncGroup is answered with.
#[derive(Debug, Clone, Default)]
pub(crate) struct SyncOutcome {
    pub(crate) error: i16,
    pub(crate) protocol_type: Option<String>,
    pub(crate) protocol: Option<String>,
    pub(crate) assignment: Bytes,
}

#[derive(Debug)]
pub(crate) struct Member {
    pub(crate) id: String,
    pub(crate) instance_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) rebalance_timeout_ms: i32,
    pub(crate) session_timeout_ms: i32,
    /// (protocol name, metadata) in the member's order of preference.
    pub(crate) protocols: Vec<(String, Bytes)>,
    pub(crate) assignment: Bytes,
    pub(crate) last_heartbeat: Instant,
    pub(crate) join_waiter: Option<oneshot::Sender<JoinOutcome>>,
    pub(crate) sync_waiter: Option<oneshot::Sender<SyncOutcome>>,
}

impl Member {
    pub(crate) fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    fn from_stored(m: &StoredMember, protocol: Option<&str>, now: Instant) -> Member {
        Member {
            id: m.member_id.clone(),
            instance_id: m.instance_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            session_timeout_ms: m.session_timeout_ms,
            protocols: vec![(
                protocol.unwrap_or_default().to_string(),
                m.subscription.clone(),
            )],
            assignment: m.assignment.clone(),
            last_heartbeat: now,
            join_waiter: None,
            sync_waiter: None,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Group {
    pub(crate) id: String,
    pub(crate) state: GroupState,
    /// When the group entered its current state (ms since the epoch); offsets of an
    /// empty group expire `offsets.retention.minutes` after it emptied.
    pub(crate) state_since_ms: i64,
    pub(crate) protocol_type: Option<String>,
    pub(crate) protocol: Option<String>,
    pub(crate) generation: i32,
    pub(crate) leader: Option<String>,
    pub(crate) members: BTreeMap<String, Member>,
    /// group.instance.id -> member id of the static members.
    pub(crate) static_members: HashMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not yet joined, and since when.
    pub(crate) pending: HashMap<String, (Instant, i32)>,
    /// Whether a group metadata record for this group exists in the log.
    pub(crate) stored: bool,
    /// Rebalance bookkeeping: the join phase ends by this instant at the latest...
    pub(crate) rebalance_deadline: Option<Instant>,
    /// ...and not before this one (group.initial.rebalance.delay.ms for a new group).
    pub(crate) join_not_before: Option<Instant>,
    /// The latest instant the initial delay may be extended to.
    pub(crate) initial_delay_limit: Option<Instant>,
}

impl Group {
    pub(crate) fn new(id: String, now_ms: i64) -> Group {
        Group {
            id,
            state: GroupState::Empty,
            state_since_ms: now_ms,
            protocol_type: None,
            protocol: None,
            generation: 0,
            leader: None,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            pending: HashMap::new(),
            stored: false,
            rebalance_deadline: None,
            join_not_before: None,
            initial_delay_limit: None,
        }
    }

    pub(crate) fn set_state(&mut self, state: GroupState, now_ms: i64) {
        if self.state != state {
            self.state = state;
            self.state_since_ms = now_ms;
        }
    }

    /// The record that stores the current generation as it stands.
    pub(crate) fn metadata_record(&self, now_ms: i64) -> GroupRecord {
        let protocol = self.protocol.clone().unwrap_or_default();
        let members = self
            .members
            .values()
            .map(|m| StoredMember {
                member_id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                session_timeout_ms: m.session_timeout_ms,
                subscription: m.metadata_for(&protocol),
                assignment: m.assignment.clone(),
            })
            .collect();
        GroupRecord {
            key: RecordKey::Group {
                group: self.id.clone(),
            },
            value: Some(RecordValue::Group(GroupValue {
                protocol_type: self.protocol_type.clone().unwrap_or_default(),
                generation: self.generation,
                protocol: self.protocol.clone(),
                leader: self.leader.clone(),
                state_timestamp_ms: now_ms,
                members,
            })),
        }
    }

    /// Replays a stored generation: members become exactly those stored (live ones keep
    /// their heartbeat and parked responses), and the group is Stable, or Empty without
    /// members.
    pub(crate) fn replay_metadata(&mut self, value: &GroupValue, now: Instant) {
        self.protocol_type = Some(value.protocol_type.clone()).filter(|t| !t.is_empty());
        self.generation = value.generation;
        self.protocol = value.protocol.clone();
        self.leader = value.leader.clone();
        let mut old = std::mem::take(&mut self.members);
        self.static_members.clear();
        for stored in &value.members {
            let member = match old.remove(&stored.member_id) {
                Some(mut live) => {
                    live.assignment = stored.assignment.clone();
                    live
                }
                None => Member::from_stored(stored, value.protocol.as_deref(), now),
            };
            if let Some(instance) = &member.instance_id {
                self.static_members
                    .insert(instance.clone(), member.id.clone());
            }
            self.members.insert(member.id.clone(), member);
        }
        self.state = if self.members.is_empty() {
            GroupState::Empty
        } else {
            GroupState::Stable
        };
        if value.state_timestamp_ms >= 0 {
            self.state_since_ms = value.state_timestamp_ms;
        }
        self.rebalance_deadline = None;
        self.join_not_before = None;
        self.stored = true;
    }
}

/// Every group this node coordinates.
#[derive(Debug, Default)]
pub(crate) struct Groups {
    pub(crate) map: HashMap<String, Group>,
}

impl Groups {
    pub(crate) fn get_or_create(&mut self, id: &str, now_ms: i64) -> &mut Group {
        self.map
            .entry(id.to_string())
            .or_insert_with(|| Group::new(id.to_string(), now_ms))
    }
}
