//! The classic rebalance protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, and
//! the clocks that end a join phase or expire a member.
//!
//! States: Empty → PreparingRebalance (a member joined, left, or changed) →
//! CompletingRebalance (every member rejoined, or the rebalance timeout passed: a new
//! generation, the leader gets everyone's metadata) → Stable (the leader's SyncGroup
//! assignment was written to the log and replayed). A group whose last member left
//! goes back to Empty, stored, so its offsets' retention clock starts.
//!
//! Static members (`group.instance.id`) keep their place across restarts: one that
//! rejoins with an empty member id while the group is Stable gets a new member id and
//! its old assignment back, with no rebalance, unless its subscription changed.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;
use uuid::Uuid;

use super::records::GroupRecord;
use super::state::{Group, GroupState, JoinOutcome, Member, SyncOutcome};
use super::{GroupCoordinator, Inner};
use crate::context::{now_ms, BrokerContext};

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

/// A SyncGroup as the state machine sees it.
#[derive(Debug, Clone)]
pub(crate) struct SyncRequest {
    pub(crate) group_id: String,
    pub(crate) member_id: String,
    pub(crate) instance_id: Option<String>,
    pub(crate) generation: i32,
    pub(crate) protocol_type: Option<String>,
    pub(crate) protocol: Option<String>,
    /// (member id, assignment), from the leader only.
    pub(crate) assignments: Vec<(String, Bytes)>,
}

/// An answer now, or a parked one with the longest it may take.
pub(crate) enum Waiting<T> {
    Now(T),
    Later(oneshot::Receiver<T>, Duration),
}

/// One member's LeaveGroup result.
#[derive(Debug, Clone)]
pub(crate) struct LeaveResult {
    pub(crate) member_id: String,
    pub(crate) instance_id: Option<String>,
    pub(crate) error: i16,
}

fn join_error(error: ResponseError, member_id: &str) -> Waiting<JoinOutcome> {
    Waiting::Now(JoinOutcome {
        error: error.code(),
        generation: -1,
        member_id: member_id.to_string(),
        ..JoinOutcome::default()
    })
}

fn sync_error(error: ResponseError) -> Waiting<SyncOutcome> {
    Waiting::Now(SyncOutcome {
        error: error.code(),
        ..SyncOutcome::default()
    })
}

fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

impl GroupCoordinator {
    pub(crate) fn join(&self, ctx: &BrokerContext, req: JoinRequest) -> Waiting<JoinOutcome> {
        let cfg = &self.config;
        if req.session_timeout_ms < cfg.min_session_timeout_ms
            || req.session_timeout_ms > cfg.max_session_timeout_ms
        {
            return join_error(ResponseError::InvalidSessionTimeout, &req.member_id);
        }
        if req.protocol_type.is_empty() || req.protocols.is_empty() {
            return join_error(ResponseError::InconsistentGroupProtocol, &req.member_id);
        }
        let group_id = req.group_id.clone();
        let result = self.with_partition(ctx, &group_id, |inner, partition| {
            let (reply, record) = self.join_locked(inner, partition, req);
            if let Some(record) = record {
                persist(ctx, inner, partition, record);
            }
            reply
        });
        result.unwrap_or_else(|code| {
            Waiting::Now(JoinOutcome {
                error: code,
                generation: -1,
                ..JoinOutcome::default()
            })
        })
    }

    fn join_locked(
        &self,
        inner: &mut Inner,
        partition: i32,
        req: JoinRequest,
    ) -> (Waiting<JoinOutcome>, Option<GroupRecord>) {
        let (now, now_ms) = (Instant::now(), now_ms());
        if !inner.groups.map.contains_key(&req.group_id) && !req.member_id.is_empty() {
            return (
                join_error(ResponseError::UnknownMemberId, &req.member_id),
                None,
            );
        }
        let group = inner.groups.get_or_create(&req.group_id, partition, now_ms);
        if !supports_protocols(group, &req) {
            return (
                join_error(ResponseError::InconsistentGroupProtocol, &req.member_id),
                None,
            );
        }
        let full = group.members.len() + group.pending.len() >= self.config.max_size;
        if req.member_id.is_empty() {
            if let Some(instance) = &req.instance_id {
                if let Some(old_id) = group.static_members.get(instance).cloned() {
                    return self.rejoin_static(group, &old_id, req, now, now_ms);
                }
            }
            if full {
                return (join_error(ResponseError::GroupMaxSizeReached, ""), None);
            }
            let member_id = format!("{}-{}", req.client_id, Uuid::new_v4());
            if req.instance_id.is_none() && req.require_known_member {
                group
                    .pending
                    .insert(member_id.clone(), (now, req.session_timeout_ms));
                return (
                    join_error(ResponseError::MemberIdRequired, &member_id),
                    None,
                );
            }
            return self.add_member(group, member_id, req, now, now_ms);
        }
        if group.pending.remove(&req.member_id).is_some() {
            if group.members.len() >= self.config.max_size {
                return (
                    join_error(ResponseError::GroupMaxSizeReached, &req.member_id),
                    None,
                );
            }
            let member_id = req.member_id.clone();
            return self.add_member(group, member_id, req, now, now_ms);
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
                    self.prepare_rebalance(group, now, now_ms);
                }
                let record = maybe_complete_join(group, now, now_ms);
                (self.later_join(rx, &req), record)
            }
        }
    }

    fn later_join(
        &self,
        rx: oneshot::Receiver<JoinOutcome>,
        req: &JoinRequest,
    ) -> Waiting<JoinOutcome> {
        let wait = millis(req.rebalance_timeout_ms.max(req.session_timeout_ms))
            + self.config.initial_rebalance_delay
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
                group.join_not_before =
                    Some((now + self.config.initial_rebalance_delay).min(limit));
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
        let new_id = format!("{}-{}", req.client_id, Uuid::new_v4());
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

    fn prepare_rebalance(&self, group: &mut Group, now: Instant, now_ms: i64) {
        if group.state == GroupState::CompletingRebalance {
            for member in group.members.values_mut() {
                member.assignment = Bytes::new();
                if let Some(w) = member.sync_waiter.take() {
                    let _ = w.send(SyncOutcome {
                        error: ResponseError::RebalanceInProgress.code(),
                        ..SyncOutcome::default()
                    });
                }
            }
        }
        let longest = group
            .members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0);
        group.rebalance_deadline = Some(now + millis(longest));
        let delay = self.config.initial_rebalance_delay;
        if group.state == GroupState::Empty && !delay.is_zero() {
            group.join_not_before = Some(now + delay);
            group.initial_delay_limit = Some(now + delay.max(millis(longest)));
        }
        group.set_state(GroupState::PreparingRebalance, now_ms);
    }

    pub(crate) fn sync(&self, ctx: &BrokerContext, req: SyncRequest) -> Waiting<SyncOutcome> {
        let SyncRequest {
            group_id,
            member_id,
            instance_id,
            generation,
            protocol_type,
            protocol,
            assignments,
        } = req;
        let (group_id, member_id) = (group_id.as_str(), member_id.as_str());
        let (instance_id, protocol_type, protocol) = (
            instance_id.as_deref(),
            protocol_type.as_deref(),
            protocol.as_deref(),
        );
        let result = self.with_partition(ctx, group_id, |inner, partition| {
            let (now, now_ms) = (Instant::now(), now_ms());
            let Some(group) = inner.groups.map.get_mut(group_id) else {
                return sync_error(ResponseError::UnknownMemberId);
            };
            if let Err(e) = check_member(group, member_id, instance_id) {
                return sync_error(e);
            }
            if generation != group.generation {
                return sync_error(ResponseError::IllegalGeneration);
            }
            if protocol_type.is_some_and(|t| Some(t) != group.protocol_type.as_deref())
                || protocol.is_some_and(|p| Some(p) != group.protocol.as_deref())
            {
                return sync_error(ResponseError::InconsistentGroupProtocol);
            }
            match group.state {
                GroupState::Empty | GroupState::Dead => {
                    return sync_error(ResponseError::UnknownMemberId)
                }
                GroupState::PreparingRebalance => {
                    return sync_error(ResponseError::RebalanceInProgress)
                }
                GroupState::Stable => {
                    let assignment = group
                        .members
                        .get(member_id)
                        .map(|m| m.assignment.clone())
                        .unwrap_or_default();
                    return Waiting::Now(sync_outcome(group, assignment));
                }
                GroupState::CompletingRebalance => {}
            }
            let (tx, rx) = oneshot::channel();
            let mut wait = Duration::from_secs(5);
            if let Some(m) = group.members.get_mut(member_id) {
                m.last_heartbeat = now;
                m.sync_waiter = Some(tx);
                wait += millis(m.rebalance_timeout_ms.max(m.session_timeout_ms));
            }
            if group.leader.as_deref() != Some(member_id) {
                return Waiting::Later(rx, wait);
            }
            for m in group.members.values_mut() {
                m.assignment = assignments
                    .iter()
                    .find(|(id, _)| *id == m.id)
                    .map(|(_, a)| a.clone())
                    .unwrap_or_default();
            }
            let record = group.metadata_record(now_ms);
            let written = GroupCoordinator::write(ctx, inner, partition, &[record]);
            let Some(group) = inner.groups.map.get_mut(group_id) else {
                return Waiting::Later(rx, wait);
            };
            match written {
                Ok(()) => {
                    let (ptype, proto) = (group.protocol_type.clone(), group.protocol.clone());
                    for m in group.members.values_mut() {
                        if let Some(w) = m.sync_waiter.take() {
                            let _ = w.send(SyncOutcome {
                                error: 0,
                                protocol_type: ptype.clone(),
                                protocol: proto.clone(),
                                assignment: m.assignment.clone(),
                            });
                        }
                    }
                }
                Err(code) => {
                    for m in group.members.values_mut() {
                        m.assignment = Bytes::new();
                        if let Some(w) = m.sync_waiter.take() {
                            let _ = w.send(SyncOutcome {
                                error: code,
                                ..SyncOutcome::default()
                            });
                        }
                    }
                    self.prepare_rebalance(group, now, now_ms);
                }
            }
            Waiting::Later(rx, wait)
        });
        result.unwrap_or_else(|code| {
            Waiting::Now(SyncOutcome {
                error: code,
                ..SyncOutcome::default()
            })
        })
    }

    pub(crate) fn heartbeat(
        &self,
        ctx: &BrokerContext,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> i16 {
        let result = self.with_partition(ctx, group_id, |inner, _| {
            let Some(group) = inner.groups.map.get_mut(group_id) else {
                return ResponseError::UnknownMemberId.code();
            };
            if let Err(e) = check_member(group, member_id, instance_id) {
                return e.code();
            }
            if generation != group.generation {
                return ResponseError::IllegalGeneration.code();
            }
            let state = group.state;
            if let Some(m) = group.members.get_mut(member_id) {
                m.last_heartbeat = Instant::now();
            }
            match state {
                GroupState::Empty | GroupState::Dead => ResponseError::UnknownMemberId.code(),
                GroupState::PreparingRebalance => ResponseError::RebalanceInProgress.code(),
                GroupState::CompletingRebalance | GroupState::Stable => 0,
            }
        });
        result.unwrap_or_else(|code| code)
    }

    /// LeaveGroup for several members (v3+ batches them; static members by instance id).
    pub(crate) fn leave(
        &self,
        ctx: &BrokerContext,
        group_id: &str,
        leaving: Vec<(String, Option<String>)>,
    ) -> Result<Vec<LeaveResult>, i16> {
        self.with_partition(ctx, group_id, |inner, partition| {
            let (now, now_ms) = (Instant::now(), now_ms());
            let Some(group) = inner.groups.map.get_mut(group_id) else {
                return leaving
                    .into_iter()
                    .map(|(member_id, instance_id)| LeaveResult {
                        member_id,
                        instance_id,
                        error: ResponseError::UnknownMemberId.code(),
                    })
                    .collect();
            };
            let mut results = Vec::with_capacity(leaving.len());
            for (member_id, instance_id) in leaving {
                let target = match &instance_id {
                    Some(instance) => match group.static_members.get(instance) {
                        None => Err(ResponseError::UnknownMemberId),
                        Some(id) if !member_id.is_empty() && *id != member_id => {
                            Err(ResponseError::FencedInstanceId)
                        }
                        Some(id) => Ok(id.clone()),
                    },
                    None => Ok(member_id.clone()),
                };
                let error = match target {
                    Err(e) => e.code(),
                    Ok(id) if group.pending.remove(&id).is_some() => 0,
                    Ok(id) if group.members.contains_key(&id) => {
                        self.remove_member(group, &id, now, now_ms);
                        0
                    }
                    Ok(_) => ResponseError::UnknownMemberId.code(),
                };
                results.push(LeaveResult {
                    member_id,
                    instance_id,
                    error,
                });
            }
            if let Some(record) = maybe_complete_join(group, now, now_ms) {
                persist(ctx, inner, partition, record);
            }
            results
        })
    }

    fn remove_member(&self, group: &mut Group, member_id: &str, now: Instant, now_ms: i64) {
        let Some(mut member) = group.members.remove(member_id) else {
            return;
        };
        if let Some(instance) = &member.instance_id {
            if group.static_members.get(instance).map(String::as_str) == Some(member_id) {
                group.static_members.remove(instance);
            }
        }
        if let Some(w) = member.join_waiter.take() {
            let _ = w.send(JoinOutcome {
                error: ResponseError::UnknownMemberId.code(),
                generation: -1,
                member_id: member_id.to_string(),
                ..JoinOutcome::default()
            });
        }
        if let Some(w) = member.sync_waiter.take() {
            let _ = w.send(SyncOutcome {
                error: ResponseError::UnknownMemberId.code(),
                ..SyncOutcome::default()
            });
        }
        if group.leader.as_deref() == Some(member_id) {
            group.leader = None;
        }
        if matches!(
            group.state,
            GroupState::Stable | GroupState::CompletingRebalance
        ) {
            self.prepare_rebalance(group, now, now_ms);
        }
    }

    /// One pass of the clocks: expired sessions and pending member ids, and join phases
    /// whose members all rejoined, whose delay ended, or whose deadline passed.
    pub(crate) fn tick(&self, ctx: &BrokerContext, now: Instant) {
        let now_ms = now_ms();
        let mut inner = self.lock();
        let ids: Vec<String> = inner.groups.map.keys().cloned().collect();
        for id in ids {
            let Some(group) = inner.groups.map.get_mut(&id) else {
                continue;
            };
            let expired: Vec<String> = group
                .members
                .values()
                .filter(|m| {
                    m.join_waiter.is_none()
                        && m.sync_waiter.is_none()
                        && now.saturating_duration_since(m.last_heartbeat)
                            > millis(m.session_timeout_ms)
                })
                .map(|m| m.id.clone())
                .collect();
            for member_id in expired {
                tracing::info!(group = %id, member = %member_id, "member session expired");
                self.remove_member(group, &member_id, now, now_ms);
            }
            group.pending.retain(|_, (since, session)| {
                now.saturating_duration_since(*since) <= millis(*session)
            });
            let partition = group.partition;
            if let Some(record) = maybe_complete_join(group, now, now_ms) {
                persist(ctx, &mut inner, partition, record);
            }
        }
    }

    /// Answers every parked response (the node is stopping).
    pub(crate) fn shutdown(&self) {
        let mut inner = self.lock();
        for group in inner.groups.map.values_mut() {
            for member in group.members.values_mut() {
                if let Some(w) = member.join_waiter.take() {
                    let _ = w.send(JoinOutcome {
                        error: ResponseError::NotCoordinator.code(),
                        generation: -1,
                        member_id: member.id.clone(),
                        ..JoinOutcome::default()
                    });
                }
                if let Some(w) = member.sync_waiter.take() {
                    let _ = w.send(SyncOutcome {
                        error: ResponseError::NotCoordinator.code(),
                        ..SyncOutcome::default()
                    });
                }
            }
        }
    }
}

fn persist(ctx: &BrokerContext, inner: &mut Inner, partition: i32, record: GroupRecord) {
    if let Err(code) = GroupCoordinator::write(ctx, inner, partition, &[record]) {
        tracing::warn!(partition, code, "storing group metadata failed");
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

/// The member exists, and a static member's instance id still maps to it.
fn check_member(
    group: &Group,
    member_id: &str,
    instance_id: Option<&str>,
) -> Result<(), ResponseError> {
    if let Some(instance) = instance_id {
        match group.static_members.get(instance) {
            Some(id) if id != member_id => return Err(ResponseError::FencedInstanceId),
            None if group.members.contains_key(member_id) => {
                return Err(ResponseError::FencedInstanceId)
            }
            _ => {}
        }
    }
    if group.members.contains_key(member_id) {
        Ok(())
    } else {
        Err(ResponseError::UnknownMemberId)
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

/// The protocol every member supports that most members prefer (first in their list).
fn select_protocol(group: &Group) -> Option<String> {
    let first = group.members.values().next()?;
    let candidates: Vec<&String> = first
        .protocols
        .iter()
        .map(|(n, _)| n)
        .filter(|n| {
            group
                .members
                .values()
                .all(|m| m.protocols.iter().any(|(p, _)| p == *n))
        })
        .collect();
    let votes = |name: &String| {
        group
            .members
            .values()
            .filter(|m| {
                m.protocols
                    .iter()
                    .map(|(n, _)| n)
                    .find(|n| candidates.contains(n))
                    == Some(name)
            })
            .count()
    };
    let mut best: Option<(&String, usize)> = None;
    for name in &candidates {
        let v = votes(name);
        if best.is_none_or(|(_, b)| v > b) {
            best = Some((name, v));
        }
    }
    best.map(|(n, _)| n.clone())
}

/// Ends the join phase when every member rejoined (and any initial delay is over) or
/// the rebalance timeout passed. Returns the record to store when the group emptied.
fn maybe_complete_join(group: &mut Group, now: Instant, now_ms: i64) -> Option<GroupRecord> {
    if group.state != GroupState::PreparingRebalance {
        return None;
    }
    if group.join_not_before.is_some_and(|t| now < t) {
        return None;
    }
    let all_joined =
        group.members.values().all(|m| m.join_waiter.is_some()) && group.pending.is_empty();
    let timed_out = group.rebalance_deadline.is_none_or(|d| now >= d);
    if !all_joined && !timed_out {
        return None;
    }
    complete_join(group, now, now_ms)
}

fn complete_join(group: &mut Group, now: Instant, now_ms: i64) -> Option<GroupRecord> {
    // Dynamic members that did not rejoin in time are out; static ones keep their slot
    // until their session expires.
    group
        .members
        .retain(|_, m| m.join_waiter.is_some() || m.instance_id.is_some());
    group.join_not_before = None;
    group.initial_delay_limit = None;
    group.rebalance_deadline = None;
    group.generation = group.generation.wrapping_add(1);
    if group.members.is_empty() {
        group.protocol = None;
        group.leader = None;
        group.set_state(GroupState::Empty, now_ms);
        return Some(group.metadata_record(now_ms));
    }
    group.protocol = select_protocol(group);
    let leader_ok = group
        .leader
        .as_ref()
        .and_then(|l| group.members.get(l))
        .is_some_and(|m| m.join_waiter.is_some());
    if !leader_ok {
        group.leader = group
            .members
            .values()
            .find(|m| m.join_waiter.is_some())
            .or_else(|| group.members.values().next())
            .map(|m| m.id.clone());
    }
    group.set_state(GroupState::CompletingRebalance, now_ms);
    let ids: Vec<String> = group.members.keys().cloned().collect();
    for id in ids {
        let outcome = current_outcome(group, &id);
        if let Some(m) = group.members.get_mut(&id) {
            m.last_heartbeat = now;
            if let Some(w) = m.join_waiter.take() {
                let _ = w.send(outcome);
            }
        }
    }
    None
}

/// The JoinGroup answer for `member_id` in the current generation.
fn current_outcome(group: &Group, member_id: &str) -> JoinOutcome {
    let leader = group.leader.clone().unwrap_or_default();
    let protocol = group.protocol.clone().unwrap_or_default();
    let members = if leader == member_id {
        group
            .members
            .values()
            .map(|m| {
                (
                    m.id.clone(),
                    m.instance_id.clone(),
                    m.metadata_for(&protocol),
                )
            })
            .collect()
    } else {
        Vec::new()
    };
    JoinOutcome {
        error: 0,
        generation: group.generation,
        protocol_type: group.protocol_type.clone(),
        protocol: group.protocol.clone(),
        leader,
        member_id: member_id.to_string(),
        skip_assignment: false,
        members,
    }
}

fn sync_outcome(group: &Group, assignment: Bytes) -> SyncOutcome {
    SyncOutcome {
        error: 0,
        protocol_type: group.protocol_type.clone(),
        protocol: group.protocol.clone(),
        assignment,
    }
}
