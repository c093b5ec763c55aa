//! The replication side of a partition: adopting the image's role, the leader's view of
//! its followers and the high watermark, the follower's appends and truncations, and
//! acks=all waits. The arithmetic lives in `state.rs`; this file applies it under the
//! partition's locks (always `log` before `repl`).

use std::sync::MutexGuard;
use std::time::Duration;

use crate::poison::LockTolerant;
use kafka_protocol::error::ResponseError;
use tidelog_storage::Log;

pub(crate) use super::follower::Truncation;
use super::partition::{Partition, PartitionError, PartitionRead};
use super::state::{ImageAssignment, PendingIsr, ReplicaState, Role, Transition};

/// Why a partition cannot do what a request asks of its leader; the Kafka code at
/// the protocol edge ([`ReplicaError::code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ReplicaError {
    #[error("the request's leader epoch is older than the partition's")]
    FencedLeaderEpoch,
    #[error("the request's leader epoch is newer than the partition's")]
    UnknownLeaderEpoch,
    #[error("this node does not lead the partition")]
    NotLeader,
    #[error("the ISR is smaller than min.insync.replicas")]
    NotEnoughReplicas,
    #[error("the ISR fell below min.insync.replicas before the write was replicated")]
    NotEnoughReplicasAfterAppend,
    #[error("the write was not replicated in time")]
    TimedOut,
}

impl ReplicaError {
    pub(crate) fn code(self) -> i16 {
        match self {
            ReplicaError::FencedLeaderEpoch => ResponseError::FencedLeaderEpoch.code(),
            ReplicaError::UnknownLeaderEpoch => ResponseError::UnknownLeaderEpoch.code(),
            ReplicaError::NotLeader => ResponseError::NotLeaderOrFollower.code(),
            ReplicaError::NotEnoughReplicas => ResponseError::NotEnoughReplicas.code(),
            ReplicaError::NotEnoughReplicasAfterAppend => {
                ResponseError::NotEnoughReplicasAfterAppend.code()
            }
            ReplicaError::TimedOut => ResponseError::RequestTimedOut.code(),
        }
    }
}

/// What acks=all and DeleteRecords waiters watch: the high watermark, the low
/// watermark (see [`ReplicaState::low_watermark`]) and who leads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct HwSnapshot {
    pub(crate) high_watermark: i64,
    pub(crate) low_watermark: i64,
    pub(crate) leader_epoch: i32,
    pub(crate) is_leader: bool,
    pub(crate) isr_len: usize,
    pub(crate) min_isr: usize,
}

impl Partition {
    /// Sets the node id the image's leader is compared with (at open).
    pub(crate) fn hosted_by(self, node_id: i32) -> Self {
        {
            let mut repl = self.repl_state();
            *repl = ReplicaState::sole_leader(node_id, repl.leader_epoch);
        }
        self
    }

    pub(super) fn repl_state(&self) -> MutexGuard<'_, ReplicaState> {
        self.repl.locked()
    }

    /// A copy of the replication state (for the ISR check and metrics).
    pub(crate) fn replica_state(&self) -> ReplicaState {
        self.repl_state().clone()
    }

    /// Whether this node is in the ISR the partition last adopted.
    pub(crate) fn in_known_isr(&self) -> bool {
        let repl = self.repl_state();
        repl.isr.contains(&repl.node_id)
    }

    pub(crate) fn role(&self) -> Role {
        self.repl_state().role
    }

    /// The checks of a client request naming `current_leader_epoch` (-1: none):
    /// FENCED_LEADER_EPOCH when older than ours, UNKNOWN_LEADER_EPOCH when newer,
    /// NOT_LEADER_OR_FOLLOWER when this node does not lead the partition.
    pub(crate) fn check_leader(&self, current_leader_epoch: i32) -> Result<(), ReplicaError> {
        let repl = self.repl_state();
        if current_leader_epoch >= 0 {
            if current_leader_epoch < repl.leader_epoch {
                return Err(ReplicaError::FencedLeaderEpoch);
            }
            if current_leader_epoch > repl.leader_epoch {
                return Err(ReplicaError::UnknownLeaderEpoch);
            }
        }
        if !repl.is_leader() {
            return Err(ReplicaError::NotLeader);
        }
        Ok(())
    }

    /// OffsetForLeaderEpoch: the largest epoch `<= epoch` in this log and the offset
    /// where it ended (the log end for the latest); for an epoch older than every one
    /// known, that epoch and the first known one's start; (-1, -1) when none is known.
    pub(crate) fn end_offset_for_epoch(&self, epoch: i32) -> Result<(i32, i64), PartitionError> {
        self.with_log(|log| Ok(log.end_offset_for_epoch(epoch).unwrap_or((-1, -1))))
    }

    /// acks=all, before appending: NOT_LEADER_OR_FOLLOWER off the leader,
    /// NOT_ENOUGH_REPLICAS when the ISR is smaller than min.insync.replicas.
    pub(crate) fn check_min_isr(&self) -> Result<(), ReplicaError> {
        let repl = self.repl_state();
        if !repl.is_leader() {
            return Err(ReplicaError::NotLeader);
        }
        if repl.isr.len() < repl.min_isr {
            return Err(ReplicaError::NotEnoughReplicas);
        }
        Ok(())
    }

    /// Watches the high watermark and leadership (acks=all).
    pub(crate) fn hw_watch(&self) -> tokio::sync::watch::Receiver<HwSnapshot> {
        self.hw_watch.subscribe()
    }

    /// Adopts the image's leader, epochs, replicas and ISR.
    pub(crate) fn apply_assignment(&self, a: &ImageAssignment, now_ms: i64) -> Transition {
        let mut guard = self.lock();
        let leo = guard.as_ref().map_or(0, Log::log_end_offset);
        let transition = self.repl_state().apply(a, leo, now_ms);
        self.set_leader_epoch(a.leader_epoch);
        if let Some(log) = guard.as_mut() {
            self.advance_high_watermark(log);
        }
        drop(guard);
        self.publish();
        if transition != Transition::Unchanged {
            // Parked fetches re-check: a consumer of a former leader gets its error now.
            self.wake_waiters();
        }
        transition
    }

    /// Leader only: moves the high watermark up to what the ISR allows. Returns whether
    /// it moved. Called with the log lock held.
    pub(super) fn advance_high_watermark(&self, log: &mut Log) -> bool {
        let candidate = {
            let repl = self.repl_state();
            if !repl.is_leader() {
                return false;
            }
            repl.committable_high_watermark(log.log_end_offset())
        };
        let old = log.high_watermark();
        match candidate {
            Some(hw) if hw > old => {
                log.set_high_watermark(hw);
                let moved = log.high_watermark() > old;
                if moved {
                    self.publish_hw(log.high_watermark());
                }
                moved
            }
            _ => false,
        }
    }

    fn publish_hw(&self, hw: i64) {
        self.hw_watch.send_modify(|s| s.high_watermark = hw);
    }

    /// Tells acks=all waiters the current leadership, ISR and high watermark.
    pub(super) fn publish(&self) {
        let (hw, log_start) = self.lock().as_ref().map_or((-1, -1), |log| {
            (log.high_watermark(), log.log_start_offset())
        });
        let repl = self.repl_state();
        let snapshot = HwSnapshot {
            high_watermark: hw,
            low_watermark: repl.low_watermark(log_start),
            leader_epoch: repl.leader_epoch,
            is_leader: repl.is_leader(),
            isr_len: repl.isr.len(),
            min_isr: repl.min_isr,
        };
        drop(repl);
        self.hw_watch.send_replace(snapshot);
    }

    /// Leader: a follower fetched from `fetch_offset`, its log starting at
    /// `log_start_offset`. Records its LEO, log start and caught-up time and moves the HW
    /// and the low watermark (waking consumers, acks=all and DeleteRecords waiters).
    /// Returns whether it should now join the ISR, or the error code when this node
    /// cannot serve it.
    pub(crate) fn record_follower_fetch(
        &self,
        replica: i32,
        fetch_offset: i64,
        log_start_offset: i64,
        now_ms: i64,
        lag_max_ms: i64,
    ) -> Result<bool, ReplicaError> {
        let mut guard = self.lock();
        let log = guard.as_mut().ok_or(ReplicaError::NotLeader)?;
        let leo = log.log_end_offset();
        let expand = {
            let mut repl = self.repl_state();
            if !repl.is_leader() {
                return Err(ReplicaError::NotLeader);
            }
            if !repl.record_fetch(replica, fetch_offset, leo, now_ms) {
                return Err(ReplicaError::NotLeader);
            }
            repl.record_log_start(replica, log_start_offset);
            let low = repl.low_watermark(log.log_start_offset());
            self.hw_watch.send_if_modified(|s| {
                let moved = s.low_watermark != low;
                s.low_watermark = low;
                moved
            });
            let hw = repl
                .isr_high_watermark(leo)
                .unwrap_or(-1)
                .max(log.high_watermark());
            repl.pending_isr.is_none()
                && !repl
                    .caught_up_outside_isr(hw, now_ms, lag_max_ms)
                    .is_empty()
        };
        let moved = self.advance_high_watermark(log);
        drop(guard);
        if moved {
            self.wake_waiters();
        }
        Ok(expand)
    }

    /// Leader: a follower's long-polled fetch from `fetch_offset` is being answered; if
    /// nothing arrived meanwhile it is still caught up (see `ReplicaState::record_idle_poll`).
    pub(crate) fn record_follower_idle_poll(&self, replica: i32, fetch_offset: i64, now_ms: i64) {
        let guard = self.lock();
        let Some(log) = guard.as_ref() else { return };
        let leo = log.log_end_offset();
        let mut repl = self.repl_state();
        if repl.is_leader() {
            repl.record_idle_poll(replica, fetch_offset, leo, now_ms);
        }
    }

    /// Leader: where the log ends for `epoch` if a follower that last fetched in `epoch`
    /// at `fetch_offset` diverges from it (Fetch v12+ diverging epoch), else `None`.
    pub(crate) fn diverging_epoch(&self, epoch: i32, fetch_offset: i64) -> Option<(i32, i64)> {
        if epoch < 0 {
            return None;
        }
        let guard = self.lock();
        let log = guard.as_ref()?;
        match log.end_offset_for_epoch(epoch) {
            Some((found, end)) if found == epoch && end >= fetch_offset => None,
            Some((found, end)) => Some((found, end)),
            // No epochs known here (an empty log): nothing to compare; an offset past
            // the end is answered with OFFSET_OUT_OF_RANGE instead.
            None => None,
        }
    }

    /// Leader, serving a follower: whole batches from `offset` up to the log end (not
    /// the HW: followers copy everything).
    pub(crate) fn read_for_follower(
        &self,
        offset: i64,
        max_bytes: usize,
    ) -> Result<PartitionRead, PartitionError> {
        self.with_log(|log| {
            let end = log.log_end_offset();
            let read = log.read(offset, max_bytes, end)?;
            Ok(PartitionRead {
                slice: read.slice,
                high_watermark: log.high_watermark(),
                last_stable_offset: log.high_watermark(),
                log_start_offset: log.log_start_offset(),
                aborted: Vec::new(),
            })
        })
    }

    /// Marks `pending` as the ISR change in flight, unless the state moved on since the
    /// snapshot `seen` it was planned from (another change in flight, a new epoch).
    pub(crate) fn begin_isr_change(&self, seen: &ReplicaState, pending: PendingIsr) -> bool {
        {
            let mut repl = self.repl_state();
            if !repl.is_leader()
                || repl.pending_isr.is_some()
                || repl.leader_epoch != seen.leader_epoch
                || repl.partition_epoch != seen.partition_epoch
            {
                return false;
            }
            repl.pending_isr = Some(pending);
        }
        self.advance_after_isr_change();
        true
    }

    /// Clears the in-flight ISR change if it is still `pending` (refused, or accepted
    /// without a new partition epoch); no other change is asked before `retry_at_ms`.
    pub(crate) fn clear_pending_isr(&self, pending: &PendingIsr, retry_at_ms: i64) {
        {
            let mut repl = self.repl_state();
            if repl.pending_isr.as_ref() != Some(pending) {
                return;
            }
            repl.pending_isr = None;
            repl.isr_retry_at_ms = retry_at_ms;
        }
        self.advance_after_isr_change();
    }

    fn advance_after_isr_change(&self) {
        let moved = {
            let mut guard = self.lock();
            match guard.as_mut() {
                Some(log) => self.advance_high_watermark(log),
                None => false,
            }
        };
        if moved {
            self.wake_waiters();
        }
    }

    /// acks=all: waits until the high watermark reaches `end` (written in `epoch`).
    /// Kafka's outcomes: NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
    /// min.insync.replicas, NOT_LEADER_OR_FOLLOWER when leadership moved on,
    /// REQUEST_TIMED_OUT after `timeout`.
    pub(crate) async fn wait_replicated(
        &self,
        end: i64,
        epoch: i32,
        timeout: Duration,
    ) -> Result<(), ReplicaError> {
        let mut rx = self.hw_watch();
        let wait = async {
            loop {
                let outcome = {
                    let s = *rx.borrow_and_update();
                    replication_outcome(&s, end, epoch)
                };
                if let Some(outcome) = outcome {
                    return outcome;
                }
                if rx.changed().await.is_err() {
                    return Err(ReplicaError::NotLeader);
                }
            }
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(outcome) => outcome,
            Err(_) => Err(ReplicaError::TimedOut),
        }
    }

    /// Leader: this node's log start moved (DeleteRecords). Waiters see the new low
    /// watermark, and parked follower fetches answer at once with the new log start, so
    /// the followers drop the records without waiting out their long poll.
    pub(crate) fn log_start_moved(&self) {
        self.publish();
        self.wake_waiters();
    }

    /// Leader: waits (up to `timeout`) until the low watermark reaches `offset` and
    /// returns it; NOT_LEADER_OR_FOLLOWER if leadership is lost meanwhile,
    /// REQUEST_TIMED_OUT when an in-sync follower does not catch up in time.
    pub(crate) async fn wait_low_watermark(
        &self,
        offset: i64,
        timeout: Duration,
    ) -> Result<i64, ReplicaError> {
        let mut rx = self.hw_watch();
        let wait = async {
            loop {
                let s = *rx.borrow_and_update();
                if !s.is_leader {
                    return Err(ReplicaError::NotLeader);
                }
                if s.low_watermark >= offset {
                    return Ok(s.low_watermark);
                }
                if rx.changed().await.is_err() {
                    return Err(ReplicaError::NotLeader);
                }
            }
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(outcome) => outcome,
            Err(_) => Err(ReplicaError::TimedOut),
        }
    }
}

/// What an acks=all waiter answers given the partition's state, or `None` to keep
/// waiting.
pub(crate) fn replication_outcome(
    s: &HwSnapshot,
    end: i64,
    epoch: i32,
) -> Option<Result<(), ReplicaError>> {
    if !s.is_leader || s.leader_epoch != epoch {
        return Some(Err(ReplicaError::NotLeader));
    }
    if s.high_watermark >= end {
        if s.isr_len < s.min_isr {
            return Some(Err(ReplicaError::NotEnoughReplicasAfterAppend));
        }
        return Some(Ok(()));
    }
    None
}

#[cfg(test)]
#[path = "replication_tests.rs"]
mod tests;
