//! A classic member's side of incremental cooperative rebalancing (KIP-429, with the
//! `cooperative-sticky` assignor). Unlike the eager path, nothing is revoked before the
//! join: the member keeps its partitions (and keeps fetching them while the join is
//! under way) and tells the leader what it owns. After SyncGroup it revokes only what
//! the new assignment left out and, when it revoked anything, rejoins at once so that
//! the second round can hand those partitions to their new owner.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use super::coordinator::Joined;
use super::incremental;
use super::Consumer;
use crate::error::Result;
use crate::partition_admin::TopicPartition;

impl Consumer {
    /// Before a cooperative join: a member that lost its membership (fenced, or left
    /// after `max.poll.interval.ms`) drops everything without a commit, as the partitions
    /// may already be someone else's; partitions of topics no longer subscribed are
    /// revoked, since the leader ignores claims on them and may hand them out at once.
    pub(super) async fn prepare_cooperative_join(&mut self) {
        let lost = self
            .group
            .as_ref()
            .is_some_and(|g| g.shared.member_lost.swap(false, Ordering::Relaxed));
        if lost {
            self.lose_all();
            if let Some(g) = self.group.as_mut() {
                g.generation = -1;
            }
            return;
        }
        let unsubscribed: Vec<TopicPartition> = self
            .assigned
            .keys()
            .filter(|tp| !self.subscription.contains(&tp.0))
            .cloned()
            .collect();
        self.revoke_some(&unsubscribed).await;
    }

    /// After SyncGroup: revoke what left, assign what is new, keep the rest untouched.
    pub(super) async fn apply_cooperative(&mut self, joined: &Joined) -> Result<()> {
        let target: BTreeSet<TopicPartition> = joined
            .assignment
            .iter()
            .filter(|tp| self.subscription.contains(&tp.0))
            .cloned()
            .collect();
        let current: BTreeSet<TopicPartition> = self.assigned.keys().cloned().collect();
        let step = incremental::plan(&current, &target);
        if !step.revoke.is_empty() {
            self.revoke_some(&step.revoke).await;
            // The leader holds these back until we have given them up: ask for the
            // round that hands them over now rather than at the next heartbeat.
            if let Some(g) = self.group.as_ref() {
                g.shared.rejoin_needed.store(true, Ordering::Relaxed);
            }
        }
        for tp in &step.assign {
            self.assigned.entry(tp.clone()).or_default();
        }
        self.resolve_positions().await?;
        tracing::info!(generation = joined.generation, assigned = ?step.assign,
            revoked = ?step.revoke, "cooperative rebalance");
        if !step.assign.is_empty() {
            if let Some(listener) = self.listener.as_mut() {
                listener.on_assigned(&step.assign);
            }
        }
        Ok(())
    }

    /// Commits (when automatic) and revokes `partitions` alone.
    async fn revoke_some(&mut self, partitions: &[TopicPartition]) {
        if partitions.is_empty() {
            return;
        }
        if self.config.enable_auto_commit {
            let offsets: Vec<(TopicPartition, i64)> = self
                .positions()
                .into_iter()
                .filter(|(tp, _)| partitions.contains(tp))
                .collect();
            if let Err(e) = self.commit_offsets_sync(&offsets).await {
                tracing::warn!(error = %e, "commit before the revocation failed; \
                    the next owner re-reads from the last committed offsets");
            }
        }
        if let Some(listener) = self.listener.as_mut() {
            listener.on_revoked(partitions);
        }
        for tp in partitions {
            self.assigned.remove(tp);
            self.paused.remove(tp);
        }
    }
}
