//! What the consumer-group coordinator counts for the metrics (Kafka's
//! group-coordinator metrics of KIP-848 groups): rebalances (group epoch bumps),
//! partitions members were asked to revoke, and reconciliation time, from the moment a
//! member is behind its group's assignment epoch to the heartbeat that finds it there
//! with nothing left to revoke. Counted when a step is taken (a step whose records then
//! fail to be written is still counted).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use prometheus_client::metrics::histogram::Histogram;

use super::{ConsumerGroup, MemberState};
use crate::poison::LockTolerant;

/// Members tracked as reconciling at once, at most; past it a member's reconciliation
/// is not timed (group and member ids are client input).
const MAX_RECONCILING: usize = 100_000;

/// 10 ms to ~5 min: a member reconciles in a few heartbeats, or stalls in a revocation.
fn reconciliation_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.01, 2.0, 15,
    ))
}

#[derive(Debug)]
pub(crate) struct ConsumerGroupStats {
    rebalances: AtomicU64,
    revocations: AtomicU64,
    reconciliation: Histogram,
    /// (group, member) -> when it was first seen behind the assignment epoch.
    behind_since: Mutex<HashMap<(String, String), Instant>>,
}

impl Default for ConsumerGroupStats {
    fn default() -> Self {
        ConsumerGroupStats {
            rebalances: AtomicU64::new(0),
            revocations: AtomicU64::new(0),
            reconciliation: reconciliation_histogram(),
            behind_since: Mutex::new(HashMap::new()),
        }
    }
}

fn reconciled(group: &ConsumerGroup, member: &str) -> Option<bool> {
    let m = group.members.get(member)?;
    Some(
        m.current.member_epoch == group.assignment_epoch
            && m.current.state == MemberState::Stable
            && m.current.pending_revocation.is_empty(),
    )
}

fn partitions(a: &super::Assignment) -> impl Iterator<Item = (&uuid::Uuid, &i32)> {
    a.iter().flat_map(|(t, ps)| ps.iter().map(move |p| (t, p)))
}

impl ConsumerGroupStats {
    pub(crate) fn rebalances(&self) -> u64 {
        self.rebalances.load(Ordering::Relaxed)
    }

    pub(crate) fn revocations(&self) -> u64 {
        self.revocations.load(Ordering::Relaxed)
    }

    pub(crate) fn reconciliation(&self) -> &Histogram {
        &self.reconciliation
    }

    /// One step of `member`'s heartbeat (or the clock's fencing, `member` = None)
    /// took the group from `before` to `after`.
    pub(crate) fn observe(
        &self,
        before: Option<&ConsumerGroup>,
        after: &ConsumerGroup,
        member: Option<&str>,
        now: Instant,
    ) {
        if after.epoch > before.map_or(0, |g| g.epoch) {
            self.rebalances.fetch_add(1, Ordering::Relaxed);
        }
        let Some(member) = member else {
            return;
        };
        let was_revoking = before
            .and_then(|g| g.members.get(member))
            .map(|m| &m.current.pending_revocation);
        if let Some(m) = after.members.get(member) {
            let newly = partitions(&m.current.pending_revocation)
                .filter(|(t, p)| {
                    !was_revoking.is_some_and(|r| r.get(*t).is_some_and(|ps| ps.contains(*p)))
                })
                .count();
            self.revocations
                .fetch_add(u64::try_from(newly).unwrap_or(0), Ordering::Relaxed);
        }
        let key = (after.id.clone(), member.to_string());
        let mut behind = self.behind_since.locked();
        match reconciled(after, member) {
            // Gone (left or fenced).
            None => {
                behind.remove(&key);
            }
            Some(true) => {
                if let Some(since) = behind.remove(&key) {
                    self.reconciliation
                        .observe(now.saturating_duration_since(since).as_secs_f64());
                }
            }
            Some(false) => {
                if behind.len() < MAX_RECONCILING {
                    behind.entry(key).or_insert(now);
                }
            }
        }
    }

    /// The clock fenced `member` of `group`: it is not timed any more.
    pub(crate) fn forget(&self, group: &str, member: &str) {
        self.behind_since
            .locked()
            .remove(&(group.to_string(), member.to_string()));
    }
}

/// Shared by the coordinator's shards and read by the metrics.
pub(crate) type SharedStats = Arc<ConsumerGroupStats>;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::{Assignment, ConsumerMember};
    use super::*;

    fn member(epoch: i32, pending: Assignment) -> ConsumerMember {
        ConsumerMember {
            id: "m".into(),
            metadata: Default::default(),
            current: super::super::CurrentAssignment {
                member_epoch: epoch,
                pending_revocation: pending,
                ..Default::default()
            },
            target: Assignment::new(),
            last_heartbeat: Instant::now(),
            revoke_by: None,
        }
    }

    fn group(epoch: i32, m: Option<ConsumerMember>) -> ConsumerGroup {
        let mut g = ConsumerGroup::new("g".into());
        g.epoch = epoch;
        g.assignment_epoch = epoch;
        if let Some(m) = m {
            g.members.insert("m".into(), m);
        }
        g
    }

    #[test]
    fn counts_epoch_bumps_new_revocations_and_times_reconciliation() {
        let stats = ConsumerGroupStats::default();
        let t0 = Instant::now();
        let topic = uuid::Uuid::from_u128(1);
        let revoking: Assignment = [(topic, [0, 1].into())].into();
        // Epoch 2 asks the member, still at epoch 1, to give back two partitions.
        let before = group(1, Some(member(1, Assignment::new())));
        let behind = group(2, Some(member(1, revoking.clone())));
        stats.observe(Some(&before), &behind, Some("m"), t0);
        assert_eq!((stats.rebalances(), stats.revocations()), (1, 2));
        // The same pending revocation seen again is not counted twice.
        stats.observe(
            Some(&behind),
            &behind,
            Some("m"),
            t0 + Duration::from_millis(100),
        );
        assert_eq!((stats.rebalances(), stats.revocations()), (1, 2));
        let done = group(2, Some(member(2, Assignment::new())));
        stats.observe(Some(&behind), &done, Some("m"), t0 + Duration::from_secs(3));
        let text = {
            let mut registry = prometheus_client::registry::Registry::default();
            registry.register("r", "r", stats.reconciliation().clone());
            let mut out = String::new();
            prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
            out
        };
        assert!(text.contains("r_count 1\n"), "{text}");
        assert!(text.contains("r_sum 3.0\n"), "{text}");
        // A member that leaves is not timed any more.
        stats.observe(Some(&done), &behind, Some("m"), t0);
        stats.observe(Some(&behind), &group(3, None), Some("m"), t0);
        assert!(stats.behind_since.lock().unwrap().is_empty());
    }
}
