//! SyncGroup, Heartbeat and LeaveGroup.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;

use super::rebalance::{check_member, maybe_complete_join, millis, persist, Waiting};
use super::state::{Group, GroupState, SyncOutcome};
use super::GroupCoordinator;
use crate::context::{now_ms, BrokerContext};

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

/// One member's LeaveGroup result.
#[derive(Debug, Clone)]
pub(crate) struct LeaveResult {
    pub(crate) member_id: String,
    pub(crate) instance_id: Option<String>,
    pub(crate) error: i16,
}

fn sync_error(error: ResponseError) -> Waiting<SyncOutcome> {
    Waiting::Now(SyncOutcome {
        error: error.code(),
        ..SyncOutcome::default()
    })
}

impl GroupCoordinator {
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
                return (sync_error(ResponseError::UnknownMemberId), None);
            };
            if let Err(e) = check_member(group, member_id, instance_id) {
                return (sync_error(e), None);
            }
            if generation != group.generation {
                return (sync_error(ResponseError::IllegalGeneration), None);
            }
            if protocol_type.is_some_and(|t| Some(t) != group.protocol_type.as_deref())
                || protocol.is_some_and(|p| Some(p) != group.protocol.as_deref())
            {
                return (sync_error(ResponseError::InconsistentGroupProtocol), None);
            }
            match group.state {
                GroupState::Empty | GroupState::Dead => {
                    return (sync_error(ResponseError::UnknownMemberId), None)
                }
                GroupState::PreparingRebalance => {
                    return (sync_error(ResponseError::RebalanceInProgress), None)
                }
                GroupState::Stable => {
                    let assignment = group
                        .members
                        .get(member_id)
                        .map(|m| m.assignment.clone())
                        .unwrap_or_default();
                    return (Waiting::Now(sync_outcome(group, assignment)), None);
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
                return (Waiting::Later(rx, wait), None);
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
            (Waiting::Later(rx, wait), Some(written))
        });
        match result {
            Ok((waiting, None)) => waiting,
            Ok((waiting, Some(written))) => {
                // The members hear the assignment only once it is replicated.
                let written = written.and_then(|w| self.acknowledge(ctx, w));
                self.answer_sync_waiters(group_id, generation, written);
                waiting
            }
            Err(code) => Waiting::Now(SyncOutcome {
                error: code,
                ..SyncOutcome::default()
            }),
        }
    }

    /// Answers the parked SyncGroups of `group_id`'s `generation` once the leader's
    /// assignment is stored: their assignments, or `code` and a new rebalance.
    fn answer_sync_waiters(&self, group_id: &str, generation: i32, written: Result<(), i16>) {
        let mut inner = self.lock();
        let Some(group) = inner.groups.map.get_mut(group_id) else {
            return;
        };
        if group.generation != generation {
            return;
        }
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
                if group.state != GroupState::PreparingRebalance {
                    self.prepare_rebalance(group, Instant::now(), now_ms());
                }
            }
        }
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
}

fn sync_outcome(group: &Group, assignment: Bytes) -> SyncOutcome {
    SyncOutcome {
        error: 0,
        protocol_type: group.protocol_type.clone(),
        protocol: group.protocol.clone(),
        assignment,
    }
}
