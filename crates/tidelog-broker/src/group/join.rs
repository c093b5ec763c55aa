//! JoinGroup: new members (MEMBER_ID_REQUIRED first, from v4), known members
//! rejoining, and static members taking their old slot back.
//!
//! Static members (`group.instance.id`) keep their place across restarts: one that
//! rejoins with an empty member id while the group is Stable gets a new member id and
//! its old assignment back, with no rebalance, unless its subscription changed.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;
use uuid::Uuid;

use super::consumer::offsets::consumer_group_tombstones;
use super::consumer::TopicsView;
use super::rebalance::{check_member, current_outcome, maybe_complete_join, millis, Waiting};
use super::records::GroupRecord;
use super::shard::GroupShard;
use super::state::{Group, GroupState, JoinOutcome, Member, SyncOutcome};
use super::GroupConfig;
use crate::coordinator::{Now, Outcome};

/// A JoinGroup as the state machine sees it.
#[derive(Debug, Clone)]
pub(crate) struct JoinRequest {
    pub(crate) group_id: String,
    pub(crate) member_id: String,
    pub(crate) instance_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) session_timeout_ms: i32,
    pub(crate) rebalance_timeout_ms: i32,
    pub(crate) protocol_type: String,
    pub(crate) protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED.
    pub(crate) require_known_member: bool,
}

/// The longest group id, member id, instance id or protocol name accepted: stored
/// records hold them as i16-length strings.
pub(super) const MAX_NAME_BYTES: u16 = 32_767;

/// `client_id-uuid`, as Kafka forms member ids, with the client id cut to 200 bytes.
pub(crate) fn new_member_id(client_id: &str) -> String {
    let mut end = client_id.len().min(200);
    while !client_id.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}-{}", &client_id[..end], Uuid::new_v4())
}

pub(crate) fn join_error(error: ResponseError, member_id: &str) -> Waiting<JoinOutcome> {
    Waiting::Now(JoinOutcome {
        error: error.code(),
        generation: -1,
        member_id: member_id.to_string(),
        ..JoinOutcome::default()
    })
}

impl GroupShard {
    /// JoinGroup: the answer now (an error, or the current generation), or parked until
    /// the join phase ends; the group's record when the phase ended with it empty.
    pub(crate) fn join(
        &mut self,
        req: JoinRequest,
        topics: &TopicsView,
        now: Now,
    ) -> Outcome<Self, Waiting<JoinOutcome>> {
        let config = std::sync::Arc::clone(&self.config);
        if req.session_timeout_ms < config.min_session_timeout_ms
            || req.session_timeout_ms > config.max_session_timeout_ms
        {
            return Outcome::answer(join_error(
                ResponseError::InvalidSessionTimeout,
                &req.member_id,
            ));
        }
        if req.protocol_type.is_empty() || req.protocols.is_empty() {
            return Outcome::answer(join_error(
                ResponseError::InconsistentGroupProtocol,
                &req.member_id,
            ));
        }
        let too_long = |s: &str| s.len() > usize::from(MAX_NAME_BYTES);
        if too_long(&req.protocol_type)
            || req.protocols.iter().any(|(name, _)| too_long(name))
            || req.instance_id.as_deref().is_some_and(too_long)
            || too_long(&req.member_id)
        {
            return Outcome::answer(join_error(ResponseError::InvalidRequest, ""));
        }
        let mut records = Vec::new();
        if let Some(consumer) = self.consumer_groups.get(&req.group_id) {
            if !consumer.members.is_empty() {
                return self.classic_join(req, topics, now);
            }
            // An empty consumer group gives way to a classic one; its offsets stay.
            records.extend(consumer_group_tombstones(consumer));
        }
        let (reply, record) = self.join_locked(req, now);
        records.extend(record);
        Outcome::records(records, reply)
    }

    pub(super) fn join_locked(
        &mut self,
        req: JoinRequest,
        now: Now,
    ) -> (Waiting<JoinOutcome>, Option<GroupRecord>) {
        let (now, now_ms) = (now.at, now.ms);
        if !self.groups.map.contains_key(&req.group_id) && !req.member_id.is_empty() {
            return (
                join_error(ResponseError::UnknownMemberId, &req.member_id),
                None,
            );
        }
        let config = std::sync::Arc::clone(&self.config);
        let config = &*config;
        let group = self.groups.get_or_create(&req.group_id, now_ms);
        if !supports_protocols(group, &req) {
            return (
                join_error(ResponseError::InconsistentGroupProtocol, &req.member_id),
                None,
            );
        }
        let full = group.members.len() + group.pending.len() >= config.max_size;
        if req.member_id.is_empty() {
            if let Some(instance) = &req.instance_id {
                if let Some(old_id) = group.static_members.get(instance).cloned() {
                    return config.rejoin_static(group, &old_id, req, now, now_ms);
                }
            }
            if full {
                return (join_error(ResponseError::GroupMaxSizeReached, ""), None);
            }
            let member_id = new_member_id(&req.client_id);
            if req.instance_id.is_none() && req.require_known_member {
                group
                    .pending
                    .insert(member_id.clone(), (now, req.session_timeout_ms));
                return (
                    join_error(ResponseError::MemberIdRequired, &member_id),
                    None,
                );
            }
            return config.add_member(group, member_id, req, now, now_ms);
        }
        if group.pending.remove(&req.member_id).is_some() {
            if group.members.len() >= config.max_size {
                return (
                    join_error(ResponseError::GroupMaxSizeReached, &req.member_id),
                    None,
                );
            }
            let member_id = req.member_id.clone();
            return config.add_member(group, member_id, req, now, now_ms);
        }
        if let Err(e) = check_member(group, &req.member_id, req.instance_id.as_deref()) {
            return (join_error(e, &req.member_id), None);
        }
        let is_leader = group.leader.as_deref() == Some(req.member_id.as_str());
        let changed = group
            .members
            .get(&req.member_id)
            .is_some_and(|m| m.protocols != req.protocols);
        match group.state {
            GroupState::Empty | GroupState::Dead => (
                join_error(ResponseError::UnknownMemberId, &req.member_id),
                None,
            ),
            GroupState::CompletingRebalance if !changed => {
                (Waiting::Now(current_outcome(group, &req.member_id)), None)
            }
            GroupState::Stable if !changed && !is_leader => {
                (Waiting::Now(current_outcome(group, &req.member_id)), None)
            }
            _ => {
                let member_id = req.member_id.clone();
                let rx = park_join(group, &member_id, &req, now);
                if group.state != GroupState::PreparingRebalance {
                    config.prepare_rebalance(group, now, now_ms);
                }
                let record = maybe_complete_join(group, now, now_ms);
                (config.later_join(rx, &req), record)
            }
        }
    }
}

impl GroupConfig {
    fn later_join(
        &self,
        rx: oneshot::Receiver<JoinOutcome>,
        req: &JoinRequest,
    ) -> Waiting<JoinOutcome> {
        let wait = millis(req.rebalance_timeout_ms.max(req.session_timeout_ms))
            + self.initial_rebalance_delay
            + Duration::from_secs(5);
        Waiting::Later(rx, wait)
    }

    fn add_member(
        &self,
        group: &mut Group,
        member_id: String,
        req: JoinRequest,
        now: Instant,
        now_ms: i64,
    ) -> (Waiting<JoinOutcome>, Option<GroupRecord>) {
        let member = Member {
            id: member_id.clone(),
            instance_id: req.instance_id.clone(),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            session_timeout_ms: req.session_timeout_ms,
            protocols: req.protocols.clone(),
            assignment: Bytes::new(),
            last_heartbeat: now,
            join_waiter: None,
            sync_waiter: None,
        };
        if let Some(instance) = &req.instance_id {
            group
                .static_members
                .insert(instance.clone(), member_id.clone());
        }
        if group.protocol_type.is_none() {
            group.protocol_type = Some(req.protocol_type.clone());
        }
        if group.leader.is_none() {
            group.leader = Some(member_id.clone());
        }
        group.members.insert(member_id.clone(), member);
        let rx = park_join(group, &member_id, &req, now);
        if group.state == GroupState::PreparingRebalance {
            // New members arriving during the initial delay extend it, up to its limit.
            if let (Some(_), Some(limit)) = (group.join_not_before, group.initial_delay_limit) {
                group.join_not_before = Some((now + self.initial_rebalance_delay).min(limit));
            }
        } else {
            self.prepare_rebalance(group, now, now_ms);
        }
        let record = maybe_complete_join(group, now, now_ms);
        (self.later_join(rx, &req), record)
    }

    /// A static member came back with an empty member id: it takes over its old slot.
    fn rejoin_static(
        &self,
        group: &mut Group,
        old_id: &str,
        req: JoinRequest,
        now: Instant,
        now_ms: i64,
    ) -> (Waiting<JoinOutcome>, Option<GroupRecord>) {
        let Some(mut member) = group.members.remove(old_id) else {
            return (join_error(ResponseError::UnknownMemberId, ""), None);
        };
        let new_id = new_member_id(&req.client_id);
        fence_waiters(&mut member);
        let protocol = group.protocol.clone().unwrap_or_default();
        let changed = member.metadata_for(&protocol)
            != req
                .protocols
                .iter()
                .find(|(n, _)| *n == protocol)
                .map(|(_, m)| m.clone())
                .unwrap_or_default();
        member.id = new_id.clone();
        member.client_id = req.client_id.clone();
        member.client_host = req.client_host.clone();
        member.session_timeout_ms = req.session_timeout_ms;
        member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        member.protocols = req.protocols.clone();
        member.last_heartbeat = now;
        group.members.insert(new_id.clone(), member);
        if let Some(instance) = &req.instance_id {
            group
                .static_members
                .insert(instance.clone(), new_id.clone());
        }
        if group.leader.as_deref() == Some(old_id) {
            group.leader = Some(new_id.clone());
        }
        if group.state == GroupState::Stable && !changed {
            // Same slot, same assignment, no rebalance; the new member id is stored.
            let mut outcome = current_outcome(group, &new_id);
            outcome.skip_assignment = group.leader.as_deref() == Some(new_id.as_str());
            return (Waiting::Now(outcome), Some(group.metadata_record(now_ms)));
        }
        let rx = park_join(group, &new_id, &req, now);
        if group.state != GroupState::PreparingRebalance {
            self.prepare_rebalance(group, now, now_ms);
        }
        let record = maybe_complete_join(group, now, now_ms);
        (self.later_join(rx, &req), record)
    }
}

/// Parks `member_id`'s JoinGroup after taking the request's protocols and timeouts.
fn park_join(
    group: &mut Group,
    member_id: &str,
    req: &JoinRequest,
    now: Instant,
) -> oneshot::Receiver<JoinOutcome> {
    let (tx, rx) = oneshot::channel();
    if let Some(m) = group.members.get_mut(member_id) {
        if let Some(old) = m.join_waiter.replace(tx) {
            let _ = old.send(JoinOutcome {
                error: ResponseError::RebalanceInProgress.code(),
                generation: -1,
                member_id: member_id.to_string(),
                ..JoinOutcome::default()
            });
        }
        m.protocols = req.protocols.clone();
        m.session_timeout_ms = req.session_timeout_ms;
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        m.last_heartbeat = now;
    }
    rx
}

fn fence_waiters(member: &mut Member) {
    if let Some(w) = member.join_waiter.take() {
        let _ = w.send(JoinOutcome {
            error: ResponseError::FencedInstanceId.code(),
            generation: -1,
            member_id: member.id.clone(),
            ..JoinOutcome::default()
        });
    }
    if let Some(w) = member.sync_waiter.take() {
        let _ = w.send(SyncOutcome {
            error: ResponseError::FencedInstanceId.code(),
            ..SyncOutcome::default()
        });
    }
}

/// A non-empty group accepts only its protocol type and a protocol every member knows.
fn supports_protocols(group: &Group, req: &JoinRequest) -> bool {
    if group.members.is_empty() {
        return true;
    }
    if group.protocol_type.as_deref() != Some(req.protocol_type.as_str()) {
        return false;
    }
    req.protocols.iter().any(|(name, _)| {
        group
            .members
            .values()
            .filter(|m| m.id != req.member_id)
            .all(|m| m.protocols.iter().any(|(n, _)| n == name))
    })
}
