//! Classic members in a consumer group (KIP-848's online migration, Kafka's
//! `classicGroup*ToConsumerGroup`): a member speaking JoinGroup, SyncGroup, Heartbeat
//! and LeaveGroup joins a consumer group that has members, so a fleet can move from one
//! protocol to the other one consumer at a time.
//!
//! The coordinator treats it as any other member. Its JoinGroup carries what a
//! heartbeat would: the subscription and the partitions it still owns, in the embedded
//! consumer protocol. Its generation is its member epoch, it is never the leader, and
//! SyncGroup hands it its current assignment. When its reconciliation must move (the
//! group epoch passed it, it has partitions to give up, or partitions it waited for are
//! free), Heartbeat answers REBALANCE_IN_PROGRESS and its rejoin is the next step. Its
//! session is its JoinGroup's session timeout, kept by its heartbeats.
//!
//! The first consumer-protocol member to join a classic group with members turns it
//! into a consumer group (`upgrade`): each classic member becomes a member at the
//! group's generation, holding what the leader had assigned it, so nothing moves until
//! the new member's arrival computes the next target.

use std::collections::BTreeSet;
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_protocol_assignment::{
    ConsumerProtocolAssignment, TopicPartition,
};
use kafka_protocol::messages::{ConsumerProtocolSubscription, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::heartbeat::{join_or_heartbeat, HeartbeatRequest, Writer};
use super::topics::group_topics;
use super::{
    Assignment, ClassicProtocols, ConsumerGroup, ConsumerKey, ConsumerMember, ConsumerValue,
    CurrentAssignment, MemberMetadata, MemberState, TopicsView,
};
use crate::coordinator::{Now, Outcome};
use crate::group::join::{join_error, new_member_id, JoinRequest};
use crate::group::members::{LeaveResult, SyncRequest};
use crate::group::rebalance::Waiting;
use crate::group::records::{GroupRecord, RecordKey};
use crate::group::shard::GroupShard;
use crate::group::state::{Group, JoinOutcome, SyncOutcome};
use crate::group::GroupConfig;

/// The embedded protocol's type: the only one a consumer group accepts.
pub(super) const CONSUMER_PROTOCOL: &str = "consumer";

/// The newest ConsumerProtocolSubscription / ConsumerProtocolAssignment version known;
/// a newer one is read as this one (Kafka's `ConsumerProtocol` does the same).
const NEWEST_EMBEDDED_VERSION: i16 = 3;

/// The subscription a classic member joined with (its protocols all carry the same one).
fn subscription(protocols: &[(String, Bytes)]) -> Option<ConsumerProtocolSubscription> {
    let (_, metadata) = protocols.first()?;
    let mut buf = metadata.clone();
    if buf.remaining() < 2 {
        return None;
    }
    let version = buf.get_i16();
    if version < 0 {
        return None;
    }
    ConsumerProtocolSubscription::decode(&mut buf, version.min(NEWEST_EMBEDDED_VERSION)).ok()
}

/// The version of an embedded subscription, as far as it is known.
pub(super) fn embedded_version(metadata: &[u8]) -> i16 {
    metadata
        .get(..2)
        .map_or(0, |v| i16::from_be_bytes([v[0], v[1]]))
        .clamp(0, NEWEST_EMBEDDED_VERSION)
}

/// The assignment in the embedded protocol at `version` (the one the member subscribed
/// with, as Kafka's `ConsumerProtocol` answers).
pub(super) fn encode_assignment(version: i16, assigned: &Assignment, topics: &TopicsView) -> Bytes {
    let assigned_partitions = assigned
        .iter()
        .filter_map(|(id, partitions)| {
            let name = topics.names.get(id)?;
            Some(
                TopicPartition::default()
                    .with_topic(TopicName(StrBytes::from_string(name.clone())))
                    .with_partitions(partitions.iter().copied().collect()),
            )
        })
        .collect();
    let assignment =
        ConsumerProtocolAssignment::default().with_assigned_partitions(assigned_partitions);
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&version.to_be_bytes());
    if assignment.encode(&mut buf, version).is_err() {
        // Only an oversized field fails to encode; an empty assignment is still one.
        buf.truncate(2);
        buf.extend_from_slice(&[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
    }
    buf.freeze()
}

/// Whether `protocols` share a name with every classic member already in the group,
/// so the protocol each was told it joined with stays one all of them know.
fn supports(group: &ConsumerGroup, member_id: &str, protocols: &[(String, Bytes)]) -> bool {
    let names: BTreeSet<&str> = protocols.iter().map(|(n, _)| n.as_str()).collect();
    !names.is_empty()
        && group
            .members
            .values()
            .filter(|m| m.id != member_id)
            .filter_map(|m| m.metadata.classic.as_ref())
            .all(|c| c.protocols.iter().any(|(n, _)| names.contains(n.as_str())))
}

/// A classic member of `group` by instance id (checked against `member_id` when given)
/// or by member id.
fn classic_member<'a>(
    group: &'a ConsumerGroup,
    member_id: &str,
    instance_id: Option<&str>,
) -> Result<&'a ConsumerMember, ResponseError> {
    let member = match instance_id {
        Some(instance) => {
            let id = group
                .static_members
                .get(instance)
                .ok_or(ResponseError::UnknownMemberId)?;
            if !member_id.is_empty() && id != member_id {
                return Err(ResponseError::FencedInstanceId);
            }
            group
                .members
                .get(id)
                .ok_or(ResponseError::UnknownMemberId)?
        }
        None => group
            .members
            .get(member_id)
            .ok_or(ResponseError::UnknownMemberId)?,
    };
    if member.metadata.classic.is_none() {
        return Err(ResponseError::UnknownMemberId);
    }
    Ok(member)
}

/// Whether a classic member must rejoin for its reconciliation to move on.
fn must_rejoin(group: &ConsumerGroup, member: &ConsumerMember) -> bool {
    let waited_for_is_free = || {
        member.target.iter().any(|(topic, partitions)| {
            partitions.iter().any(|p| {
                !member
                    .current
                    .assigned
                    .get(topic)
                    .is_some_and(|a| a.contains(p))
                    && !group.owned_by_other(*topic, *p, &member.id)
            })
        })
    };
    member.current.member_epoch < group.epoch
        || member.current.state == MemberState::UnrevokedPartitions
        || (member.current.state == MemberState::UnreleasedPartitions && waited_for_is_free())
}

/// The (topic name, partitions) of an embedded ConsumerProtocolAssignment, as a
/// classic leader wrote it; empty bytes (no SyncGroup yet) are no partitions, and None
/// means the bytes are not one.
pub(crate) fn embedded_assignment(bytes: &Bytes) -> Option<Vec<(String, Vec<i32>)>> {
    if bytes.is_empty() {
        return Some(Vec::new());
    }
    let mut buf = bytes.clone();
    if buf.remaining() < 2 {
        return None;
    }
    let version = buf.get_i16();
    if version < 0 {
        return None;
    }
    let assignment =
        ConsumerProtocolAssignment::decode(&mut buf, version.min(NEWEST_EMBEDDED_VERSION)).ok()?;
    Some(
        assignment
            .assigned_partitions
            .into_iter()
            .map(|tp| (tp.topic.0.to_string(), tp.partitions))
            .collect(),
    )
}

/// The partitions of a ConsumerProtocolAssignment that are topics of the image.
fn decode_assignment(bytes: &Bytes, topics: &TopicsView) -> Option<Assignment> {
    let mut out = Assignment::new();
    for (topic, partitions) in embedded_assignment(bytes)? {
        if let Some((id, _)) = topics.by_name.get(topic.as_str()) {
            out.entry(*id).or_default().extend(partitions);
        }
    }
    Some(out)
}

/// The consumer group a classic group becomes, and the records that make it (Kafka's
/// `ConsumerGroup.fromClassicGroup`); None when it cannot move: not the embedded
/// consumer protocol, a member's subscription or assignment unreadable, or more
/// members than a consumer group may have.
pub(super) fn upgrade(
    classic: &Group,
    topics: &TopicsView,
    config: &GroupConfig,
    now: Instant,
) -> Option<(ConsumerGroup, Vec<GroupRecord>)> {
    if !config.consumer_upgrade
        || classic.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL)
        || classic.members.len() > config.consumer_max_size
    {
        return None;
    }
    let protocol = classic.protocol.clone().unwrap_or_default();
    let generation = classic.generation;
    let mut group = ConsumerGroup::new(classic.id.clone());
    let mut records = Vec::new();
    if classic.stored {
        records.push(GroupRecord {
            key: RecordKey::Group {
                group: classic.id.clone(),
            },
            value: None,
        });
    }
    let mut w = Writer {
        group: &mut group,
        records,
        now,
    };
    let group_id = classic.id.clone();
    for m in classic.members.values() {
        let protocols = vec![(protocol.clone(), m.metadata_for(&protocol))];
        let sub = subscription(&protocols)?;
        let assigned = decode_assignment(&m.assignment, topics)?;
        let metadata = MemberMetadata {
            instance_id: m.instance_id.clone(),
            rack_id: sub
                .rack_id
                .as_ref()
                .map(|r| r.to_string())
                .filter(|r| !r.is_empty()),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            subscribed_topic_names: sub.topics.iter().map(|t| t.to_string()).collect(),
            subscribed_topic_regex: None,
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            server_assignor: None,
            classic: Some(ClassicProtocols {
                session_timeout_ms: m.session_timeout_ms,
                protocols: m.protocols.clone(),
            }),
        };
        let key = |member: &str| (group_id.clone(), member.to_string());
        let (group, member) = key(&m.id);
        w.emit(
            ConsumerKey::Member { group, member },
            Some(ConsumerValue::Member(metadata)),
        );
        let (group, member) = key(&m.id);
        w.emit(
            ConsumerKey::TargetMember { group, member },
            Some(ConsumerValue::TargetMember(assigned.clone())),
        );
        let (group, member) = key(&m.id);
        w.emit(
            ConsumerKey::CurrentAssignment { group, member },
            Some(ConsumerValue::CurrentAssignment(CurrentAssignment {
                member_epoch: generation,
                previous_member_epoch: generation,
                state: MemberState::Stable,
                assigned,
                pending_revocation: Assignment::new(),
            })),
        );
    }
    let (_, hash) = group_topics(w.group, topics);
    w.emit(
        ConsumerKey::Metadata {
            group: group_id.clone(),
        },
        Some(ConsumerValue::Metadata {
            epoch: generation,
            metadata_hash: hash,
        }),
    );
    w.emit(
        ConsumerKey::TargetMetadata { group: group_id },
        Some(ConsumerValue::TargetMetadata {
            assignment_epoch: generation,
        }),
    );
    let records = w.records;
    Some((group, records))
}

/// A classic group that became a consumer group: members parked in JoinGroup or
/// SyncGroup hear REBALANCE_IN_PROGRESS and rejoin it.
pub(super) fn fail_waiters(classic: Group) {
    for (_, m) in classic.members {
        if let Some(tx) = m.join_waiter {
            let _ = tx.send(JoinOutcome {
                error: ResponseError::RebalanceInProgress.code(),
                generation: -1,
                member_id: m.id.clone(),
                ..JoinOutcome::default()
            });
        }
        if let Some(tx) = m.sync_waiter {
            let _ = tx.send(SyncOutcome {
                error: ResponseError::RebalanceInProgress.code(),
                ..SyncOutcome::default()
            });
        }
    }
}

impl GroupShard {
    /// JoinGroup to a consumer group with members: the member is added or updated and
    /// moved one step towards its target; it is answered at once with its epoch.
    pub(crate) fn classic_join(
        &mut self,
        req: JoinRequest,
        topics: &TopicsView,
        now: Now,
    ) -> Outcome<Self, Waiting<JoinOutcome>> {
        let Some(existing) = self.consumer_groups.get(&req.group_id) else {
            return Outcome::answer(join_error(ResponseError::UnknownMemberId, &req.member_id));
        };
        if req.protocol_type != CONSUMER_PROTOCOL
            || !supports(existing, &req.member_id, &req.protocols)
        {
            return Outcome::answer(join_error(
                ResponseError::InconsistentGroupProtocol,
                &req.member_id,
            ));
        }
        let mut member_id = req.member_id.clone();
        if member_id.is_empty() {
            member_id = new_member_id(&req.client_id);
            if req.require_known_member && req.instance_id.is_none() {
                return Outcome::answer(join_error(ResponseError::MemberIdRequired, &member_id));
            }
        }
        let Some(subscription) = subscription(&req.protocols) else {
            return Outcome::answer(join_error(
                ResponseError::InconsistentGroupProtocol,
                &member_id,
            ));
        };
        let replaced = req
            .instance_id
            .as_ref()
            .and_then(|i| existing.static_members.get(i))
            .filter(|holder| **holder != member_id)
            .cloned();
        if replaced.is_some() && !req.member_id.is_empty() {
            // Only a static member with no id yet takes an instance over.
            return Outcome::answer(join_error(ResponseError::FencedInstanceId, &member_id));
        }
        let member_epoch = existing
            .members
            .get(&member_id)
            .map_or(0, |m| m.current.member_epoch.max(0));
        let mut owned = Assignment::new();
        for tp in &subscription.owned_partitions {
            if let Some((id, _)) = topics.by_name.get(tp.topic.0.as_str()) {
                owned
                    .entry(*id)
                    .or_default()
                    .extend(tp.partitions.iter().copied());
            }
        }
        let classic = ClassicProtocols {
            session_timeout_ms: req.session_timeout_ms,
            protocols: req.protocols.clone(),
        };
        let heartbeat = HeartbeatRequest {
            group_id: req.group_id.clone(),
            member_id: member_id.clone(),
            member_epoch,
            instance_id: req.instance_id.clone(),
            rack_id: subscription
                .rack_id
                .as_ref()
                .map(|r| r.to_string())
                .filter(|r| !r.is_empty()),
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            subscribed_topic_names: Some(
                subscription.topics.iter().map(|t| t.to_string()).collect(),
            ),
            subscribed_topic_regex: None,
            server_assignor: None,
            owned: Some(owned),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            classic: Some(classic.clone()),
        };
        let mut group = existing.clone();
        let mut w = Writer {
            group: &mut group,
            records: Vec::new(),
            now: now.at,
        };
        let response = match join_or_heartbeat(&mut w, &heartbeat, topics, &self.config) {
            Ok(r) => r,
            Err(refused) => {
                return Outcome::answer(join_error(refused.0, &member_id));
            }
        };
        let records = w.records;
        let downgraded = replaced
            .filter(|old| self.config.downgrades_replacing(existing, old))
            .and_then(|_| {
                let classic = super::downgrade::classic_group(
                    &group,
                    &BTreeSet::new(),
                    topics,
                    now.at,
                    now.ms,
                )?;
                Some((super::downgrade::tombstones(existing, now.at), classic))
            });
        if let Some((tombstones, classic_group)) = downgraded {
            // The last consumer-protocol member was replaced: the group goes classic.
            self.config.forget_members(existing);
            let mut records = tombstones;
            records.push(classic_group.metadata_record(now.ms));
            let outcome = JoinOutcome {
                error: 0,
                generation: classic_group.generation,
                protocol_type: Some(CONSUMER_PROTOCOL.to_string()),
                protocol: classic_group.protocol.clone(),
                leader: String::new(),
                member_id,
                skip_assignment: false,
                members: Vec::new(),
            };
            return Outcome::records(records, Waiting::Now(outcome));
        }
        self.config
            .consumer_stats
            .observe(Some(existing), &group, Some(&member_id), now.at);
        if let Some(m) = self
            .consumer_groups
            .get_mut(&req.group_id)
            .and_then(|g| g.members.get_mut(&member_id))
        {
            m.last_heartbeat = now.at;
        }
        let outcome = JoinOutcome {
            error: 0,
            generation: response.member_epoch,
            protocol_type: Some(CONSUMER_PROTOCOL.to_string()),
            protocol: Some(classic.chosen().to_string()),
            // Nobody leads: the coordinator assigns.
            leader: String::new(),
            member_id,
            skip_assignment: false,
            members: Vec::new(),
        };
        Outcome::records(records, Waiting::Now(outcome))
    }

    /// SyncGroup of a classic member of a consumer group: its current assignment.
    pub(crate) fn classic_sync(
        &mut self,
        req: &SyncRequest,
        topics: &TopicsView,
        now: Now,
    ) -> SyncOutcome {
        let refused = |e: ResponseError| SyncOutcome {
            error: e.code(),
            ..SyncOutcome::default()
        };
        let Some(group) = self.consumer_groups.get_mut(&req.group_id) else {
            return refused(ResponseError::UnknownMemberId);
        };
        let member = match classic_member(group, &req.member_id, req.instance_id.as_deref()) {
            Ok(m) => m,
            Err(e) => return refused(e),
        };
        if req.generation != member.current.member_epoch {
            return refused(ResponseError::IllegalGeneration);
        }
        let Some(classic) = member.metadata.classic.as_ref() else {
            return refused(ResponseError::UnknownMemberId);
        };
        if req
            .protocol_type
            .as_deref()
            .is_some_and(|t| t != CONSUMER_PROTOCOL)
            || req
                .protocol
                .as_deref()
                .is_some_and(|p| p != classic.chosen())
        {
            return refused(ResponseError::InconsistentGroupProtocol);
        }
        if group.epoch > member.current.member_epoch
            && member.current.state != MemberState::UnrevokedPartitions
        {
            return refused(ResponseError::RebalanceInProgress);
        }
        let outcome = SyncOutcome {
            error: 0,
            protocol_type: Some(CONSUMER_PROTOCOL.to_string()),
            protocol: Some(classic.chosen().to_string()),
            assignment: encode_assignment(
                embedded_version(classic.protocols.first().map_or(&[][..], |(_, m)| m)),
                &member.current.assigned,
                topics,
            ),
        };
        let id = member.id.clone();
        if let Some(m) = group.members.get_mut(&id) {
            m.last_heartbeat = now.at;
        }
        outcome
    }

    /// Heartbeat of a classic member of a consumer group: keeps its session, and asks
    /// it to rejoin when its reconciliation must move.
    pub(crate) fn classic_heartbeat(
        &mut self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: Now,
    ) -> i16 {
        let Some(group) = self.consumer_groups.get_mut(group_id) else {
            return ResponseError::UnknownMemberId.code();
        };
        let member = match classic_member(group, member_id, instance_id) {
            Ok(m) => m,
            Err(e) => return e.code(),
        };
        if generation != member.current.member_epoch {
            return ResponseError::IllegalGeneration.code();
        }
        let rejoin = must_rejoin(group, member);
        let id = member.id.clone();
        if let Some(m) = group.members.get_mut(&id) {
            m.last_heartbeat = now.at;
        }
        if rejoin {
            ResponseError::RebalanceInProgress.code()
        } else {
            0
        }
    }

    /// LeaveGroup of classic members of a consumer group: each goes with its
    /// partitions, and the group epoch moves once for all of them.
    pub(crate) fn classic_leave(
        &mut self,
        group_id: &str,
        leaving: Vec<(String, Option<String>)>,
        topics: &TopicsView,
        now: Now,
    ) -> Outcome<Self, Vec<LeaveResult>> {
        let Some(existing) = self.consumer_groups.get(group_id) else {
            return Outcome::answer(LeaveResult::all_unknown(leaving));
        };
        let mut group = existing.clone();
        let mut w = Writer {
            group: &mut group,
            records: Vec::new(),
            now: now.at,
        };
        let mut results = Vec::with_capacity(leaving.len());
        for (member_id, instance_id) in leaving {
            let error = match classic_member(w.group, &member_id, instance_id.as_deref()) {
                Ok(m) => {
                    let id = m.id.clone();
                    w.remove_member(&id);
                    self.config.consumer_stats.forget(group_id, &id);
                    0
                }
                Err(e) => e.code(),
            };
            results.push(LeaveResult {
                member_id,
                instance_id,
                error,
            });
        }
        if w.records.is_empty() {
            return Outcome::answer(results);
        }
        let (_, hash) = group_topics(w.group, topics);
        w.bump_epoch(hash);
        let records = w.records;
        self.config
            .consumer_stats
            .observe(Some(existing), &group, None, now.at);
        Outcome::records(records, results)
    }
}
