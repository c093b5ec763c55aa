//! SyncGroup, Heartbeat and LeaveGroup.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;

use super::consumer::TopicsView;
use super::rebalance::{check_member, maybe_complete_join, millis, Waiting};
use super::shard::GroupShard;
use super::state::{Group, GroupState, SyncOutcome};
use crate::coordinator::{CoordinatorError, Now, Outcome};

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

impl LeaveResult {
    /// Each leaving member refused as unknown (the group is not there).
    pub(crate) fn all_unknown(leaving: Vec<(String, Option<String>)>) -> Vec<LeaveResult> {
        leaving
            .into_iter()
            .map(|(member_id, instance_id)| LeaveResult {
                member_id,
                instance_id,
                error: ResponseError::UnknownMemberId.code(),
            })
            .collect()
    }
}

fn sync_error(error: ResponseError) -> Waiting<SyncOutcome> {
    Waiting::Now(SyncOutcome {
        error: error.code(),
        ..SyncOutcome::default()
    })
}

impl GroupShard {
    /// SyncGroup: members park until the leader's assignment is stored; the leader's
    /// SyncGroup writes it, and once it is committed every parked member hears its
    /// part (or, if the write failed, an error and a new rebalance).
    pub(crate) fn sync(
        &mut self,
        req: SyncRequest,
        topics: &TopicsView,
        now: Now,
    ) -> Outcome<Self, Waiting<SyncOutcome>> {
        if self.consumer_groups.contains_key(&req.group_id) {
            return Outcome::answer(Waiting::Now(self.classic_sync(&req, topics, now)));
        }
        let SyncRequest {
            group_id,
            member_id,
            instance_id,
            generation,
            protocol_type,
            protocol,
            assignments,
        } = req;
        let Some(group) = self.groups.map.get_mut(&group_id) else {
            return Outcome::answer(sync_error(ResponseError::UnknownMemberId));
        };
        if let Err(e) = check_member(group, &member_id, instance_id.as_deref()) {
            return Outcome::answer(sync_error(e));
        }
        if generation != group.generation {
            return Outcome::answer(sync_error(ResponseError::IllegalGeneration));
        }
        if protocol_type.is_some_and(|t| Some(t.as_str()) != group.protocol_type.as_deref())
            || protocol.is_some_and(|p| Some(p.as_str()) != group.protocol.as_deref())
        {
            return Outcome::answer(sync_error(ResponseError::InconsistentGroupProtocol));
        }
        match group.state {
            GroupState::Empty | GroupState::Dead => {
                return Outcome::answer(sync_error(ResponseError::UnknownMemberId))
            }
            GroupState::PreparingRebalance => {
                return Outcome::answer(sync_error(ResponseError::RebalanceInProgress))
            }
            GroupState::Stable => {
                let assignment = group
                    .members
                    .get(&member_id)
                    .map(|m| m.assignment.clone())
                    .unwrap_or_default();
                return Outcome::answer(Waiting::Now(sync_outcome(group, assignment)));
            }
            GroupState::CompletingRebalance => {}
        }
        let (tx, rx) = oneshot::channel();
        let mut wait = Duration::from_secs(5);
        if let Some(m) = group.members.get_mut(&member_id) {
            m.last_heartbeat = now.at;
            m.sync_waiter = Some(tx);
            wait += millis(m.rebalance_timeout_ms.max(m.session_timeout_ms));
        }
        if group.leader.as_deref() != Some(member_id.as_str()) {
            return Outcome::answer(Waiting::Later(rx, wait));
        }
        for m in group.members.values_mut() {
            m.assignment = assignments
                .iter()
                .find(|(id, _)| *id == m.id)
                .map(|(_, a)| a.clone())
                .unwrap_or_default();
        }
        let record = group.metadata_record(now.ms);
        // The members hear the assignment only once it is replicated.
        Outcome::records(vec![record], Waiting::Later(rx, wait)).then(
            move |shard: &mut GroupShard, written| {
                shard.answer_sync_waiters(&group_id, generation, written, now);
            },
        )
    }

    /// Answers the parked SyncGroups of `group_id`'s `generation` once the leader's
    /// assignment is stored: their assignments, or an error and a new rebalance.
    fn answer_sync_waiters(
        &mut self,
        group_id: &str,
        generation: i32,
        written: Result<(), CoordinatorError>,
        now: Now,
    ) {
        let config = std::sync::Arc::clone(&self.config);
        let Some(group) = self.groups.map.get_mut(group_id) else {
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
            Err(e) => {
                let code = e.code();
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
                    config.prepare_rebalance(group, now.at, now.ms);
                }
            }
        }
    }

    pub(crate) fn heartbeat(
        &mut self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: Now,
    ) -> i16 {
        if self.consumer_groups.contains_key(group_id) {
            return self.classic_heartbeat(group_id, member_id, instance_id, generation, now);
        }
        let Some(group) = self.groups.map.get_mut(group_id) else {
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
            m.last_heartbeat = now.at;
        }
        match state {
            GroupState::Empty | GroupState::Dead => ResponseError::UnknownMemberId.code(),
            GroupState::PreparingRebalance => ResponseError::RebalanceInProgress.code(),
            GroupState::CompletingRebalance | GroupState::Stable => 0,
        }
    }

    /// LeaveGroup for several members (v3+ batches them; static members by instance id).
    pub(crate) fn leave(
        &mut self,
        group_id: &str,
        leaving: Vec<(String, Option<String>)>,
        topics: &TopicsView,
        now: Now,
    ) -> Outcome<Self, Vec<LeaveResult>> {
        if self.consumer_groups.contains_key(group_id) {
            return self.classic_leave(group_id, leaving, topics, now);
        }
        let config = std::sync::Arc::clone(&self.config);
        let Some(group) = self.groups.map.get_mut(group_id) else {
            return Outcome::answer(LeaveResult::all_unknown(leaving));
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
                    config.remove_member(group, &id, now.at, now.ms);
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
        let record = maybe_complete_join(group, now.at, now.ms);
        Outcome::records(record.into_iter().collect(), results)
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
