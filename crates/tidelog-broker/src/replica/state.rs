//! A partition's replication state and the arithmetic on it: which role this node
//! plays, the ISR, each follower's log end offset and last caught-up time, the high
//! watermark they allow, and which followers should leave or join the ISR. Pure data:
//! no locks, no clock, no I/O, so the rules are tested on their own.

use std::collections::HashMap;

/// What this node is for one partition, per the metadata image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Takes produces, serves consumers and followers.
    Leader,
    /// Copies from `leader`; refuses produces and consumer fetches.
    Follower { leader: i32 },
    /// No leader at all (leader -1 in the image).
    Offline,
}

/// What the leader knows of one follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FollowerState {
    /// The follower's log end offset (its last fetch offset); -1 until it fetches in the
    /// current leader epoch.
    pub(crate) log_end_offset: i64,
    /// Last time (ms) the follower was known to hold everything the leader had.
    pub(crate) last_caught_up_ms: i64,
    /// Where the follower's log starts, as its last fetch said; -1 until it says.
    pub(crate) log_start_offset: i64,
    /// The leader's LEO when this follower last fetched, and when that was.
    prev_fetch_leader_leo: i64,
    prev_fetch_ms: i64,
}

impl FollowerState {
    fn reset(now_ms: i64, caught_up: bool) -> Self {
        FollowerState {
            log_end_offset: -1,
            last_caught_up_ms: if caught_up { now_ms } else { 0 },
            log_start_offset: -1,
            prev_fetch_leader_leo: -1,
            prev_fetch_ms: 0,
        }
    }
}

/// An ISR change sent to the controller and not yet seen in the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PendingIsr {
    pub(crate) new_isr: Vec<i32>,
    /// The partition epoch the change was asked against; a later one in the image
    /// means the controller decided (one way or another).
    pub(crate) from_partition_epoch: i32,
}

/// Everything about one partition's replication, guarded by the partition.
#[derive(Debug, Clone)]
pub(crate) struct ReplicaState {
    pub(crate) node_id: i32,
    pub(crate) role: Role,
    pub(crate) leader_epoch: i32,
    pub(crate) partition_epoch: i32,
    pub(crate) replicas: Vec<i32>,
    pub(crate) isr: Vec<i32>,
    /// min.insync.replicas of the topic (else the broker default).
    pub(crate) min_isr: usize,
    pub(crate) pending_isr: Option<PendingIsr>,
    /// No ISR change is asked before this time (ms): set when the controller refused
    /// one, so a retry waits a check period instead of following every follower fetch.
    pub(crate) isr_retry_at_ms: i64,
    /// Followers of this leader, keyed by broker id (replicas other than this node).
    pub(crate) followers: HashMap<i32, FollowerState>,
    /// The leader's log end offset when it became leader in this epoch: a follower
    /// below it has not yet caught up with this epoch and cannot join the ISR.
    pub(crate) epoch_start_offset: i64,
    /// Whether an image assignment was adopted yet. The first one is always a role
    /// change: a partition opens as a provisional sole leader in the image's epoch, and
    /// taking the image's leadership as "unchanged" left its followers without a
    /// caught-up time (so the first ISR check dropped them all).
    assigned: bool,
}

/// What the image says about a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImageAssignment {
    pub(crate) leader: i32,
    pub(crate) leader_epoch: i32,
    pub(crate) partition_epoch: i32,
    pub(crate) replicas: Vec<i32>,
    pub(crate) isr: Vec<i32>,
    pub(crate) min_isr: usize,
}

impl ImageAssignment {
    /// The image's partition as this node adopts it, with the topic's
    /// min.insync.replicas.
    pub(crate) fn of(p: &tidelog_controller::PartitionImage, min_isr: usize) -> Self {
        ImageAssignment {
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            replicas: p.replicas.clone(),
            isr: p.isr.clone(),
            min_isr,
        }
    }
}

/// What [`ReplicaState::apply`] changed, so the caller can act on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transition {
    /// Same role and epoch (ISR or replicas may have changed).
    Unchanged,
    /// Became leader, or leader in a new epoch.
    BecameLeader,
    /// Became a follower, or follower in a new epoch or of a new leader.
    BecameFollower,
    /// Lost its leader.
    WentOffline,
}

impl ReplicaState {
    /// A partition that is its own only replica and leader until an image says more:
    /// what a cluster of one, and a partition created in a test, look like.
    pub(crate) fn sole_leader(node_id: i32, leader_epoch: i32) -> Self {
        ReplicaState {
            node_id,
            role: Role::Leader,
            leader_epoch,
            partition_epoch: 0,
            replicas: vec![node_id],
            isr: vec![node_id],
            min_isr: 1,
            pending_isr: None,
            isr_retry_at_ms: 0,
            followers: HashMap::new(),
            epoch_start_offset: 0,
            assigned: false,
        }
    }

    pub(crate) fn is_leader(&self) -> bool {
        self.role == Role::Leader
    }

    /// Adopts the image's view. `leo` is the local log end offset now.
    pub(crate) fn apply(&mut self, a: &ImageAssignment, leo: i64, now_ms: i64) -> Transition {
        let role = if a.leader == self.node_id {
            Role::Leader
        } else if a.leader < 0 {
            Role::Offline
        } else {
            Role::Follower { leader: a.leader }
        };
        let new_epoch = a.leader_epoch != self.leader_epoch;
        let changed = !self.assigned || role != self.role || new_epoch;
        self.assigned = true;
        self.role = role;
        self.leader_epoch = a.leader_epoch;
        self.replicas.clone_from(&a.replicas);
        self.isr.clone_from(&a.isr);
        self.min_isr = a.min_isr.max(1);
        if a.partition_epoch != self.partition_epoch || changed {
            // The controller decided on whatever was pending (or leadership moved on).
            if self
                .pending_isr
                .as_ref()
                .is_some_and(|p| a.partition_epoch > p.from_partition_epoch || changed)
            {
                self.pending_isr = None;
            }
        }
        self.partition_epoch = a.partition_epoch;
        if !changed {
            // Replicas added by a reassignment get a state: caught up as of now only if
            // the image already counts them in sync.
            if role == Role::Leader {
                for &r in &self.replicas {
                    if r != self.node_id {
                        let in_sync = self.isr.contains(&r);
                        self.followers
                            .entry(r)
                            .or_insert_with(|| FollowerState::reset(now_ms, in_sync));
                    }
                }
                let replicas = self.replicas.clone();
                self.followers.retain(|id, _| replicas.contains(id));
            }
            return Transition::Unchanged;
        }
        self.pending_isr = None;
        self.isr_retry_at_ms = 0;
        match role {
            Role::Leader => {
                self.epoch_start_offset = leo;
                // ISR members count as caught up now, so none is dropped before it had
                // a chance to fetch from the new leader; nobody's LEO is known yet.
                self.followers = self
                    .replicas
                    .iter()
                    .filter(|&&r| r != self.node_id)
                    .map(|&r| (r, FollowerState::reset(now_ms, self.isr.contains(&r))))
                    .collect();
                Transition::BecameLeader
            }
            Role::Follower { .. } => {
                self.followers.clear();
                Transition::BecameFollower
            }
            Role::Offline => {
                self.followers.clear();
                Transition::WentOffline
            }
        }
    }

    /// The ISR the high watermark waits for: the committed ISR plus any member a pending
    /// change adds (a member being added must already hold what is committed).
    pub(crate) fn maximal_isr(&self) -> Vec<i32> {
        let mut isr = self.isr.clone();
        if let Some(p) = &self.pending_isr {
            for r in &p.new_isr {
                if !isr.contains(r) {
                    isr.push(*r);
                }
            }
        }
        isr
    }

    /// The high watermark this leader may publish: [`Self::isr_high_watermark`], but
    /// none while the committed ISR is smaller than min.insync.replicas (capped by the
    /// replica count) — Kafka's strict min-ISR rule (KIP-966, Kafka 3.7+). Without it a
    /// leader cut off from its followers shrinks the ISR to itself, commits alone, and
    /// answers acks=all writers NOT_ENOUGH_REPLICAS_AFTER_APPEND for records it kept:
    /// a client that then drops them from its retry queue (librdkafka does, on a
    /// transaction abort) reuses their sequence numbers, and the broker deduplicates
    /// the next transaction's records away. Held back, the write simply waits until the
    /// ISR is whole enough again, and then succeeds.
    pub(crate) fn committable_high_watermark(&self, leader_leo: i64) -> Option<i64> {
        if self.isr.len() < self.effective_min_isr() {
            return None;
        }
        self.isr_high_watermark(leader_leo)
    }

    /// min.insync.replicas, but never more than there are replicas (a topic of
    /// replication factor 1 with a cluster-wide minimum of 2 still commits).
    pub(crate) fn effective_min_isr(&self) -> usize {
        self.min_isr.min(self.replicas.len()).max(1)
    }

    /// The high watermark the ISR allows: the smallest LEO over the (maximal) ISR, the
    /// leader's own `leader_leo` included. `None` when a member's LEO is not known yet.
    pub(crate) fn isr_high_watermark(&self, leader_leo: i64) -> Option<i64> {
        let mut hw = leader_leo;
        for r in self.maximal_isr() {
            if r == self.node_id {
                continue;
            }
            let leo = self.followers.get(&r).map_or(-1, |f| f.log_end_offset);
            if leo < 0 {
                return None;
            }
            hw = hw.min(leo);
        }
        Some(hw)
    }

    /// A follower fetched at `fetch_offset` while the leader's LEO was `leader_leo`.
    /// Returns false if `replica` is not a follower of this partition.
    pub(crate) fn record_fetch(
        &mut self,
        replica: i32,
        fetch_offset: i64,
        leader_leo: i64,
        now_ms: i64,
    ) -> bool {
        let Some(f) = self.followers.get_mut(&replica) else {
            return false;
        };
        f.log_end_offset = fetch_offset;
        if fetch_offset >= leader_leo {
            f.last_caught_up_ms = now_ms;
        } else if f.prev_fetch_leader_leo >= 0 && fetch_offset >= f.prev_fetch_leader_leo {
            // It holds everything the leader had at its previous fetch.
            f.last_caught_up_ms = f.last_caught_up_ms.max(f.prev_fetch_ms);
        }
        f.prev_fetch_leader_leo = leader_leo;
        f.prev_fetch_ms = now_ms;
        true
    }

    /// A follower's fetch said where its log starts.
    pub(crate) fn record_log_start(&mut self, replica: i32, log_start_offset: i64) {
        if let Some(f) = self.followers.get_mut(&replica) {
            f.log_start_offset = log_start_offset;
        }
    }

    /// Leader: the lowest log start among this node and the followers in the ISR (Kafka's
    /// low watermark), given the leader's own `leader_log_start`. A follower that has not
    /// said where its log starts counts as -1. DeleteRecords answers once this reaches
    /// its offset, so whichever in-sync replica leads next has dropped the records too.
    pub(crate) fn low_watermark(&self, leader_log_start: i64) -> i64 {
        self.isr
            .iter()
            .filter(|r| **r != self.node_id)
            .map(|r| self.followers.get(r).map_or(-1, |f| f.log_start_offset))
            .fold(leader_log_start, i64::min)
    }

    /// A follower's fetch that sat in the leader's long poll is answered with nothing new:
    /// if it still holds the leader's whole log (`leader_leo`), it is caught up now. An
    /// idle partition's followers so stay in the ISR whatever the poll's length.
    pub(crate) fn record_idle_poll(
        &mut self,
        replica: i32,
        fetch_offset: i64,
        leader_leo: i64,
        now_ms: i64,
    ) {
        if let Some(f) = self.followers.get_mut(&replica) {
            if fetch_offset >= leader_leo && f.log_end_offset == fetch_offset {
                f.last_caught_up_ms = f.last_caught_up_ms.max(now_ms);
            }
        }
    }

    /// ISR members (not the leader) not caught up within `lag_max_ms`.
    pub(crate) fn lagging(&self, now_ms: i64, lag_max_ms: i64) -> Vec<i32> {
        self.isr
            .iter()
            .copied()
            .filter(|&r| r != self.node_id)
            .filter(|r| {
                self.followers
                    .get(r)
                    .is_none_or(|f| now_ms.saturating_sub(f.last_caught_up_ms) > lag_max_ms)
            })
            .collect()
    }

    /// Replicas outside the ISR whose LEO reached the high watermark `hw` (and the start
    /// of this leader epoch) and that were caught up within `lag_max_ms`: they may rejoin.
    /// The last condition is not Kafka's; without it a follower at the HW but not caught
    /// up by the shrink rule rejoined and was dropped again at the next check, a
    /// shrink/expand cycle once per check period.
    pub(crate) fn caught_up_outside_isr(&self, hw: i64, now_ms: i64, lag_max_ms: i64) -> Vec<i32> {
        let mut ready: Vec<i32> = self
            .followers
            .iter()
            .filter(|(id, f)| {
                !self.isr.contains(id)
                    && f.log_end_offset >= 0
                    && f.log_end_offset >= hw
                    && f.log_end_offset >= self.epoch_start_offset
                    && now_ms.saturating_sub(f.last_caught_up_ms) <= lag_max_ms
            })
            .map(|(id, _)| *id)
            .collect();
        ready.sort_unstable();
        ready
    }

    /// The ISR change the leader should ask for now, if any: drop laggards first (so the
    /// HW can move again), else add caught-up replicas. Never leaves the leader out.
    pub(crate) fn wanted_isr_change(
        &self,
        hw: i64,
        now_ms: i64,
        lag_max_ms: i64,
    ) -> Option<Vec<i32>> {
        if !self.is_leader() || self.pending_isr.is_some() {
            return None;
        }
        let lagging = self.lagging(now_ms, lag_max_ms);
        if !lagging.is_empty() {
            let isr: Vec<i32> = self
                .isr
                .iter()
                .copied()
                .filter(|r| !lagging.contains(r))
                .collect();
            return Some(with_leader(isr, self.node_id));
        }
        let joining = self.caught_up_outside_isr(hw, now_ms, lag_max_ms);
        if !joining.is_empty() {
            let mut isr = self.isr.clone();
            isr.extend(joining);
            return Some(with_leader(isr, self.node_id));
        }
        None
    }
}

fn with_leader(mut isr: Vec<i32>, leader: i32) -> Vec<i32> {
    if !isr.contains(&leader) {
        isr.insert(0, leader);
    }
    isr
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
