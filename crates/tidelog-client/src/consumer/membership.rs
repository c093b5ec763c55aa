//! Joining the group from `poll`: eager revocation, JoinGroup/SyncGroup through
//! `coordinator.rs`, and the starting positions of a new assignment (committed offsets,
//! else `auto.offset.reset`).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

use tokio::sync::mpsc;

use super::coordinator::{self, Command, JoinParams, Session, Shared, TaskSettings};
use super::{Consumer, GroupState, OffsetReset};
use crate::error::{ClientError, Result};
use crate::partition_admin::TopicPartition;

impl Consumer {
    /// Joins when subscribed and not (or no longer) a member of the current generation.
    pub(super) async fn ensure_group(&mut self) -> Result<()> {
        let Some(group_id) = self.config.group_id.clone() else {
            return Ok(());
        };
        if self.subscription.is_empty() {
            return Ok(());
        }
        if self.group.is_none() {
            let shared = Shared::new();
            let (commands, receiver) = mpsc::channel(coordinator::COMMAND_QUEUE);
            let settings = TaskSettings {
                group: group_id.clone(),
                heartbeat_interval: self.config.heartbeat_interval,
                max_poll_interval: self.config.max_poll_interval,
                is_static: self.config.group_instance_id.is_some(),
            };
            let task = tokio::spawn(coordinator::run(settings, shared.clone(), receiver));
            shared.polled();
            self.group = Some(GroupState {
                conn: None,
                member_id: String::new(),
                generation: -1,
                shared,
                commands,
                task,
            });
        }
        let needs_join = self
            .group
            .as_ref()
            .is_some_and(|g| g.generation < 0 || g.shared.rejoin_needed.load(Ordering::Relaxed));
        if !needs_join {
            return Ok(());
        }
        let began = Instant::now();
        self.revoke_all().await;
        let mut attempts = 0;
        let joined = loop {
            self.connect_coordinator(&group_id).await?;
            let Some(g) = self.group.as_mut() else {
                return Err(ClientError::Protocol("group state vanished".into()));
            };
            let _ = g
                .commands
                .send(Command::Session(Session {
                    member_id: g.member_id.clone(),
                    generation: -1,
                }))
                .await;
            g.generation = -1;
            let Some(conn) = g.conn.as_mut() else {
                continue;
            };
            let params = JoinParams {
                group: &group_id,
                instance_id: self.config.group_instance_id.as_deref(),
                topics: &self.subscription,
                strategies: &self.config.assignment_strategies,
                session_timeout: self.config.session_timeout,
                rebalance_timeout: self.config.max_poll_interval,
            };
            match coordinator::join_and_sync(&mut self.client, conn, &params, &mut g.member_id)
                .await
            {
                Ok(joined) => break joined,
                Err(e) if attempts < 10 && coordinator_moved(&e) => {
                    attempts += 1;
                    g.conn = None;
                    tokio::time::sleep(self.client.config().backoff(attempts)).await;
                }
                Err(e) => return Err(e),
            }
        };
        let Some(g) = self.group.as_mut() else {
            return Err(ClientError::Protocol("group state vanished".into()));
        };
        g.generation = joined.generation;
        // Cleared only now: a heartbeat answered during the join still reports the
        // rebalance that this join completed. A newer rebalance is announced again by
        // the next heartbeat, so nothing is lost.
        g.shared.rejoin_needed.store(false, Ordering::Relaxed);
        let _ = g
            .commands
            .send(Command::Session(Session {
                member_id: joined.member_id.clone(),
                generation: joined.generation,
            }))
            .await;
        g.shared.polled();
        for tp in &joined.assignment {
            if self.subscription.contains(&tp.0) {
                self.assigned.entry(tp.clone()).or_default();
            }
        }
        self.resolve_positions().await?;
        self.rebalance_time = self.rebalance_time.max(began.elapsed());
        let assigned = self.assignment();
        tracing::info!(group = %group_id, generation = joined.generation,
            partitions = ?assigned, "joined the group");
        if let Some(listener) = self.listener.as_mut() {
            listener.on_assigned(&assigned);
        }
        Ok(())
    }

    /// Opens the coordinator connections (the consumer's and the task's) when missing.
    async fn connect_coordinator(&mut self, group_id: &str) -> Result<()> {
        let Some(g) = self.group.as_mut() else {
            return Ok(());
        };
        if g.conn.is_some() && !g.shared.coordinator_lost.load(Ordering::Relaxed) {
            return Ok(());
        }
        g.shared.coordinator_lost.store(false, Ordering::Relaxed);
        let ours = self.client.coordinator(group_id).await?;
        let theirs = self.client.coordinator(group_id).await?;
        g.conn = Some(ours);
        g.commands
            .send(Command::Connection(theirs))
            .await
            .map_err(|_| ClientError::Protocol("the group task has stopped".into()))
    }

    /// Eager rebalance: commit (when automatic), tell the listener, forget everything.
    async fn revoke_all(&mut self) {
        if self.assigned.is_empty() {
            return;
        }
        if self.config.enable_auto_commit {
            if let Err(e) = self.commit_sync().await {
                tracing::warn!(error = %e, "commit before the rebalance failed; \
                    the next owner re-reads from the last committed offsets");
            }
        }
        let revoked = self.assignment();
        if let Some(listener) = self.listener.as_mut() {
            listener.on_revoked(&revoked);
        }
        self.assigned.clear();
        self.paused.clear();
    }

    /// Positions for partitions that have none: the committed offset, else the reset.
    pub(super) async fn resolve_positions(&mut self) -> Result<()> {
        let missing: Vec<TopicPartition> = self
            .assigned
            .iter()
            .filter(|(_, s)| s.position.is_none())
            .map(|(tp, _)| tp.clone())
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let committed = match &self.config.group_id {
            Some(group) => self.client.committed_offsets(group).await?,
            None => BTreeMap::new(),
        };
        for tp in missing {
            let offset = match committed.get(&tp) {
                Some(&offset) => offset,
                None => self.reset_offset(&tp).await?,
            };
            if let Some(state) = self.assigned.get_mut(&tp) {
                state.position = Some(offset);
                state.fetch_offset = offset;
                state.buffered.clear();
            }
        }
        Ok(())
    }

    /// Where `auto.offset.reset` puts a partition.
    pub(super) async fn reset_offset(&mut self, tp: &TopicPartition) -> Result<i64> {
        let spec = match self.config.auto_offset_reset {
            OffsetReset::Earliest => crate::fetch::OffsetSpec::Earliest,
            OffsetReset::Latest => crate::fetch::OffsetSpec::Latest,
            OffsetReset::None => {
                return Err(ClientError::InvalidArgument(format!(
                    "{}-{} has no committed offset and auto.offset.reset is none",
                    tp.0, tp.1
                )))
            }
        };
        self.client.list_offsets(&tp.0, tp.1, spec).await
    }
}

fn coordinator_moved(e: &ClientError) -> bool {
    matches!(
        e.response_error(),
        Some(
            kafka_protocol::ResponseError::NotCoordinator
                | kafka_protocol::ResponseError::CoordinatorNotAvailable
                | kafka_protocol::ResponseError::CoordinatorLoadInProgress
        )
    ) || matches!(
        e,
        ClientError::Io { .. } | ClientError::Closed { .. } | ClientError::Timeout { .. }
    )
}
