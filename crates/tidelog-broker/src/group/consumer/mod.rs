//! Consumer-protocol groups (KIP-848): the broker computes each group's target
//! assignment and every member reconciles towards it one heartbeat at a time.
//!
//! A consumer group lives in the same shard as the classic groups (a group id is one
//! kind or the other). Its durable state is Kafka's records (see `records`): the group
//! epoch (bumped by any change of membership, subscriptions or subscribed topics'
//! metadata), the target assignment and its epoch (computed by an assignor at a group
//! epoch), and per member its metadata and its current assignment (member epoch,
//! assigned partitions, partitions it must still revoke). Steps (`heartbeat`) only
//! return records; [`ConsumerGroup::replay`] applies them, at load and after an append
//! alike. Session deadlines and revocation deadlines are transient, as in Kafka: a new
//! coordinator gives every member a full session from the moment it loads.

pub(crate) mod assignor;
pub(crate) mod classic;
#[cfg(test)]
mod classic_tests;
pub(crate) mod describe;
mod downgrade;
#[cfg(test)]
mod downgrade_tests;
pub(crate) mod heartbeat;
mod leave;
pub(crate) mod offsets;
pub(crate) mod reconcile;
pub(crate) mod records;
#[cfg(test)]
mod regex_tests;
pub(crate) mod stats;
#[cfg(test)]
mod tests;
pub(crate) mod topics;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use uuid::Uuid;

pub(crate) use records::{ConsumerKey, ConsumerValue};

/// Partitions per topic id.
pub(crate) type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// Kafka's member states (their codes are stored in the current assignment record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum MemberState {
    #[default]
    Stable = 0,
    UnrevokedPartitions = 1,
    UnreleasedPartitions = 2,
    Unknown = 127,
}

impl MemberState {
    pub(crate) fn from_code(code: i8) -> MemberState {
        match code {
            0 => MemberState::Stable,
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Unknown,
        }
    }
}

/// What a member told the coordinator about itself (Kafka's member metadata value).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct MemberMetadata {
    pub(crate) instance_id: Option<String>,
    pub(crate) rack_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) subscribed_topic_names: Vec<String>,
    pub(crate) subscribed_topic_regex: Option<String>,
    pub(crate) rebalance_timeout_ms: i32,
    pub(crate) server_assignor: Option<String>,
    /// Set for a member of the classic protocol (JoinGroup, SyncGroup, Heartbeat).
    pub(crate) classic: Option<ClassicProtocols>,
}

/// What a classic member joined with (Kafka's `ClassicMemberMetadata`): its session
/// timeout, and its protocols (name, embedded subscription) in its order of preference.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ClassicProtocols {
    pub(crate) session_timeout_ms: i32,
    pub(crate) protocols: Vec<(String, bytes::Bytes)>,
}

impl ClassicProtocols {
    /// The protocol a classic member is told it joined with: its first.
    pub(crate) fn chosen(&self) -> &str {
        self.protocols.first().map_or("", |(name, _)| name.as_str())
    }
}

/// A member's place in the reconciliation (Kafka's current member assignment value).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct CurrentAssignment {
    pub(crate) member_epoch: i32,
    pub(crate) previous_member_epoch: i32,
    pub(crate) state: MemberState,
    pub(crate) assigned: Assignment,
    pub(crate) pending_revocation: Assignment,
}

/// A subscription regex of the group resolved to topic names (Kafka's
/// ConsumerGroupRegularExpression value): the names it matched that the member whose
/// heartbeat resolved it may describe, as of the metadata image at `version`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ResolvedRegex {
    pub(crate) topics: BTreeSet<String>,
    pub(crate) version: i64,
    pub(crate) timestamp_ms: i64,
}

/// The member epoch of a static member that left and may come back.
pub(crate) const STATIC_LEFT_EPOCH: i32 = -2;

#[derive(Debug, Clone)]
pub(crate) struct ConsumerMember {
    pub(crate) id: String,
    pub(crate) metadata: MemberMetadata,
    pub(crate) current: CurrentAssignment,
    pub(crate) target: Assignment,
    /// Transient: the last heartbeat (or when this coordinator learnt of the member).
    pub(crate) last_heartbeat: Instant,
    /// Transient: when the member must have revoked what it was asked to.
    pub(crate) revoke_by: Option<Instant>,
}

impl ConsumerMember {
    fn new(id: String, now: Instant) -> ConsumerMember {
        ConsumerMember {
            id,
            metadata: MemberMetadata::default(),
            current: CurrentAssignment::default(),
            target: Assignment::new(),
            last_heartbeat: now,
            revoke_by: None,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct ConsumerGroup {
    pub(crate) id: String,
    pub(crate) epoch: i32,
    pub(crate) metadata_hash: i64,
    pub(crate) assignment_epoch: i32,
    pub(crate) members: BTreeMap<String, ConsumerMember>,
    /// group.instance.id -> member id.
    pub(crate) static_members: HashMap<String, String>,
    /// (topic id, partition) -> member id owning it (assigned or pending revocation).
    pub(crate) owners: HashMap<(Uuid, i32), String>,
    /// The subscription regexes of its members, resolved (see `topics`).
    pub(crate) regexes: BTreeMap<String, ResolvedRegex>,
    /// Whether any record of the group is in the log (its metadata key to delete).
    pub(crate) stored: bool,
}

impl ConsumerGroup {
    pub(crate) fn new(id: String) -> ConsumerGroup {
        ConsumerGroup {
            id,
            epoch: 0,
            metadata_hash: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            owners: HashMap::new(),
            regexes: BTreeMap::new(),
            stored: false,
        }
    }

    /// Kafka's group states, derived from the epochs.
    pub(crate) fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.assignment_epoch != self.epoch {
            "Assigning"
        } else if self.members.values().any(|m| {
            m.current.member_epoch != self.assignment_epoch
                || m.current.state != MemberState::Stable
        }) {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// The member holding `partition` of `topic`, if any other than `except`.
    pub(crate) fn owned_by_other(&self, topic: Uuid, partition: i32, except: &str) -> bool {
        self.owners
            .get(&(topic, partition))
            .is_some_and(|owner| owner != except)
    }

    /// Applies one record of this group. A member asked to revoke gets its rebalance
    /// timeout to do so from `now`.
    pub(crate) fn replay(&mut self, key: &ConsumerKey, value: Option<ConsumerValue>, now: Instant) {
        self.stored = true;
        match (key, value) {
            (
                ConsumerKey::Metadata { .. },
                Some(ConsumerValue::Metadata {
                    epoch,
                    metadata_hash,
                }),
            ) => {
                self.epoch = epoch;
                self.metadata_hash = metadata_hash;
            }
            (
                ConsumerKey::TargetMetadata { .. },
                Some(ConsumerValue::TargetMetadata { assignment_epoch }),
            ) => {
                self.assignment_epoch = assignment_epoch;
            }
            (ConsumerKey::Member { member, .. }, Some(ConsumerValue::Member(m))) => {
                let entry = self
                    .members
                    .entry(member.clone())
                    .or_insert_with(|| ConsumerMember::new(member.clone(), now));
                if let Some(old) = &entry.metadata.instance_id {
                    if self.static_members.get(old) == Some(member) {
                        self.static_members.remove(old);
                    }
                }
                if let Some(instance) = &m.instance_id {
                    self.static_members.insert(instance.clone(), member.clone());
                }
                entry.metadata = m;
            }
            (ConsumerKey::Member { member, .. }, None) => {
                if let Some(gone) = self.members.remove(member) {
                    if let Some(instance) = &gone.metadata.instance_id {
                        if self.static_members.get(instance) == Some(member) {
                            self.static_members.remove(instance);
                        }
                    }
                    self.release(member, &gone.current);
                }
            }
            (ConsumerKey::TargetMember { member, .. }, value) => {
                if let Some(m) = self.members.get_mut(member) {
                    m.target = match value {
                        Some(ConsumerValue::TargetMember(a)) => a,
                        _ => Assignment::new(),
                    };
                }
            }
            (ConsumerKey::CurrentAssignment { member, .. }, value) => {
                let current = match value {
                    Some(ConsumerValue::CurrentAssignment(c)) => c,
                    _ => CurrentAssignment::default(),
                };
                let Some(old) = self.members.get(member).map(|m| m.current.clone()) else {
                    return;
                };
                self.release(member, &old);
                for (topic, partitions) in
                    current.assigned.iter().chain(&current.pending_revocation)
                {
                    for p in partitions {
                        self.owners.insert((*topic, *p), member.clone());
                    }
                }
                if let Some(m) = self.members.get_mut(member) {
                    let asked_now = current.state == MemberState::UnrevokedPartitions
                        && (old.state != MemberState::UnrevokedPartitions
                            || old.pending_revocation != current.pending_revocation);
                    if asked_now {
                        let timeout = u64::try_from(m.metadata.rebalance_timeout_ms).unwrap_or(0);
                        m.revoke_by = Some(now + Duration::from_millis(timeout));
                    } else if current.state != MemberState::UnrevokedPartitions {
                        m.revoke_by = None;
                    }
                    m.current = current;
                }
            }
            (ConsumerKey::Regex { regex, .. }, Some(ConsumerValue::Regex(resolved))) => {
                self.regexes.insert(regex.clone(), resolved);
            }
            (ConsumerKey::Regex { regex, .. }, None) => {
                self.regexes.remove(regex);
            }
            // Kafka's old subscription metadata, and tombstones of group-level keys
            // (the group itself goes with its metadata tombstone, see the shard).
            _ => {}
        }
    }

    fn release(&mut self, member: &str, current: &CurrentAssignment) {
        for (topic, partitions) in current.assigned.iter().chain(&current.pending_revocation) {
            for p in partitions {
                if self.owners.get(&(*topic, *p)).map(String::as_str) == Some(member) {
                    self.owners.remove(&(*topic, *p));
                }
            }
        }
    }
}

/// The topics a heartbeat can see: name -> (id, partition count), and back; the
/// offset of the metadata image they come from; and which of them the heartbeat's
/// principal may describe (what a regex it resolves may match).
#[derive(Debug, Clone, Default)]
pub(crate) struct TopicsView {
    pub(crate) by_name: BTreeMap<String, (Uuid, i32)>,
    pub(crate) names: HashMap<Uuid, String>,
    pub(crate) version: i64,
    /// When the view was taken, in milliseconds since the Unix epoch.
    pub(crate) taken_ms: i64,
    pub(crate) describable: TopicFilter,
}

/// Whether a topic (by name) passes.
type TopicCheck = dyn Fn(&str) -> bool + Send + Sync;

/// Which topics a principal may describe: every topic when no authorizer is on.
#[derive(Clone, Default)]
pub(crate) struct TopicFilter(Option<std::sync::Arc<TopicCheck>>);

impl TopicFilter {
    pub(crate) fn new(allows: impl Fn(&str) -> bool + Send + Sync + 'static) -> TopicFilter {
        TopicFilter(Some(std::sync::Arc::new(allows)))
    }

    pub(crate) fn allows(&self, topic: &str) -> bool {
        self.0.as_ref().is_none_or(|allows| allows(topic))
    }
}

impl std::fmt::Debug for TopicFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "TopicFilter(authorizer)"
        } else {
            "TopicFilter(everything)"
        })
    }
}

impl TopicsView {
    pub(crate) fn insert(&mut self, name: &str, id: Uuid, partitions: i32) {
        self.by_name.insert(name.to_string(), (id, partitions));
        self.names.insert(id, name.to_string());
    }
}
