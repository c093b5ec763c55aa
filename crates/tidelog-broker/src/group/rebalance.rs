//! The classic rebalance protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, and
//! the clocks that end a join phase or expire a member.
//!
//! States: Empty → PreparingRebalance (a member joined, left, or changed) →
//! CompletingRebalance (every member rejoined, or the rebalance timeout passed: a new
//! generation, the leader gets everyone's metadata) → Stable (the leader's SyncGroup
//! assignment was written to the log and replayed). A group whose last member left
//! goes back to Empty, stored, so its offsets' retention clock starts.
//!
//! The join phase and member removal live here; `join` and `members` hold the
//! request steps. Everything here is a pure function of the group and the time.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;

use super::records::GroupRecord;
use super::shard::GroupShard;
use super::state::{Group, GroupState, JoinOutcome, SyncOutcome};
use super::GroupConfig;
use crate::coordinator::Now;

/// An answer now, or a parked one with the longest it may take.
pub(crate) enum Waiting<T> {
    Now(T),
    Later(oneshot::Receiver<T>, Duration),
}

pub(super) fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

impl GroupConfig {
    pub(super) fn prepare_rebalance(&self, group: &mut Group, now: Instant, now_ms: i64) {
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
        let delay = self.initial_rebalance_delay;
        if group.state == GroupState::Empty && !delay.is_zero() {
            group.join_not_before = Some(now + delay);
            group.initial_delay_limit = Some(now + delay.max(millis(longest)));
        }
        group.set_state(GroupState::PreparingRebalance, now_ms);
    }

    pub(super) fn remove_member(
        &self,
        group: &mut Group,
        member_id: &str,
        now: Instant,
        now_ms: i64,
    ) {
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
}

impl GroupShard {
    /// One pass of the clocks: expired sessions and pending member ids, and join phases
    /// whose members all rejoined, whose delay ended, or whose deadline passed. Returns
    /// the records to store (groups that emptied).
    pub(super) fn expire_members(&mut self, now: Now) -> Vec<GroupRecord> {
        let config = std::sync::Arc::clone(&self.config);
        let mut records = Vec::new();
        for group in self.groups.map.values_mut() {
            let expired: Vec<String> = group
                .members
                .values()
                .filter(|m| {
                    m.join_waiter.is_none()
                        && m.sync_waiter.is_none()
                        && now.at.saturating_duration_since(m.last_heartbeat)
                            > millis(m.session_timeout_ms)
                })
                .map(|m| m.id.clone())
                .collect();
            for member_id in expired {
                tracing::info!(group = %group.id, member = %member_id, "member session expired");
                config.remove_member(group, &member_id, now.at, now.ms);
            }
            group.pending.retain(|_, (since, session)| {
                now.at.saturating_duration_since(*since) <= millis(*session)
            });
            records.extend(maybe_complete_join(group, now.at, now.ms));
        }
        records
    }
}

/// Answers every parked request of `group` (its coordinator is going away).
pub(super) fn answer_all(group: &mut Group, (join, sync): (JoinOutcome, SyncOutcome)) {
    for member in group.members.values_mut() {
        if let Some(w) = member.join_waiter.take() {
            let _ = w.send(JoinOutcome {
                member_id: member.id.clone(),
                ..join.clone()
            });
        }
        if let Some(w) = member.sync_waiter.take() {
            let _ = w.send(sync.clone());
        }
    }
}

/// The member exists, and a static member's instance id still maps to it.
pub(super) fn check_member(
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

/// The protocol every member supports that most members prefer (first in their list).
pub(super) fn select_protocol(group: &Group) -> Option<String> {
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
pub(super) fn maybe_complete_join(
    group: &mut Group,
    now: Instant,
    now_ms: i64,
) -> Option<GroupRecord> {
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
pub(super) fn current_outcome(group: &Group, member_id: &str) -> JoinOutcome {
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
