//! Joining the group from `poll`: eager revocation, JoinGroup/SyncGroup through
//! `coordinator.rs`, and the starting positions of a new assignment (committed offsets,
//! else `auto.offset.reset`).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

use tokio::sync::mpsc;

use super::coordinator::{
    self, Command, JoinParams, Joined, Metadata, Session, Shared, TaskSettings,
};
use super::{AssignmentStrategy, GroupProtocol};
use super::{Consumer, GroupState, OffsetReset};
use crate::error::{ClientError, Result};
use crate::groups::RawConnection;
use crate::partition_admin::TopicPartition;

/// A JoinGroup + SyncGroup under way in its own task; aborted when dropped.
pub(super) struct PendingJoin {
    began: Instant,
    task: tokio::task::JoinHandle<(RawConnection, String, Result<Joined>)>,
}

impl Drop for PendingJoin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the join task needs, owned.
struct JoinRequest {
    group: String,
    instance_id: Option<String>,
    topics: Vec<String>,
    strategies: Vec<AssignmentStrategy>,
    session_timeout: std::time::Duration,
    rebalance_timeout: std::time::Duration,
    cooperative: Option<(Vec<TopicPartition>, i32)>,
    rack: Option<String>,
}

impl Consumer {
    /// Joins when subscribed and not (or no longer) a member of the current generation.
    /// Waits for a join under way at most until `deadline` (the caller's poll then
    /// returns what it has, maybe nothing).
    pub(super) async fn ensure_group(&mut self, deadline: Instant) -> Result<()> {
        let Some(group_id) = self.config.group_id.clone() else {
            return Ok(());
        };
        if self.subscription.is_empty() && self.pattern.is_none() {
            return Ok(());
        }
        if self.config.group_protocol == GroupProtocol::Consumer {
            return self.ensure_consumer_group(&group_id).await;
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
                pending: None,
                kip: None,
            });
        }
        let Some(g) = self.group.as_mut() else {
            return Ok(());
        };
        if g.pending.is_none() {
            let needs_join = g.generation < 0 || g.shared.rejoin_needed.load(Ordering::Relaxed);
            if !needs_join {
                return Ok(());
            }
            if self.config.cooperative() {
                self.prepare_cooperative_join().await;
            } else {
                self.revoke_all().await;
            }
            self.start_join(&group_id).await?;
        }
        let Some(g) = self.group.as_mut() else {
            return Ok(());
        };
        let Some(pending) = g.pending.as_mut() else {
            return Ok(());
        };
        // Wait for the join only until this poll's deadline; the next poll waits again.
        // A cooperative member with partitions only looks: it goes on fetching them, and
        // `poll` looks again after each fetch.
        let remaining = if self.config.cooperative() && !self.assigned.is_empty() {
            std::time::Duration::ZERO
        } else {
            deadline.saturating_duration_since(Instant::now())
        };
        let Ok(finished) = tokio::time::timeout(remaining, &mut pending.task).await else {
            return Ok(());
        };
        let began = pending.began;
        g.pending = None;
        let (conn, member_id, result) =
            finished.map_err(|e| ClientError::Protocol(format!("the join task failed: {e}")))?;
        g.conn = Some(conn);
        g.member_id = member_id;
        let joined = match result {
            Ok(joined) => joined,
            Err(e) if coordinator_moved(&e) => {
                // Found again by the next poll's join.
                tracing::debug!(error = %e, "the coordinator moved during the join");
                g.conn = None;
                return Ok(());
            }
            Err(e) => return Err(e),
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
        if self.config.cooperative() {
            self.apply_cooperative(&joined).await?;
            self.rebalance_time = self.rebalance_time.max(began.elapsed());
            return Ok(());
        }
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

    /// Sends JoinGroup + SyncGroup from a task of their own: the coordinator holds
    /// JoinGroup until every member rejoined, which may be longer than a poll's timeout.
    async fn start_join(&mut self, group_id: &str) -> Result<()> {
        self.connect_coordinator(group_id).await?;
        let config = self.client.config().clone();
        let Some(g) = self.group.as_mut() else {
            return Ok(());
        };
        let _ = g
            .commands
            .send(Command::Session(Session {
                member_id: g.member_id.clone(),
                generation: -1,
            }))
            .await;
        // A cooperative member keeps its generation through the join: it is sent with
        // the owned partitions, and its commits during the join carry it.
        let cooperative = self.config.cooperative();
        let owned: Vec<TopicPartition> = self.assigned.keys().cloned().collect();
        let owned_generation = g.generation;
        if !cooperative {
            g.generation = -1;
        }
        let Some(mut conn) = g.conn.take() else {
            return Err(ClientError::Protocol("no coordinator connection".into()));
        };
        let request = JoinRequest {
            group: group_id.to_owned(),
            instance_id: self.config.group_instance_id.clone(),
            topics: self.subscription.clone(),
            strategies: self.config.assignment_strategies.clone(),
            session_timeout: self.config.session_timeout,
            rebalance_timeout: self.config.max_poll_interval,
            cooperative: cooperative.then_some((owned, owned_generation)),
            rack: self.config.client_rack.clone(),
        };
        let mut member_id = g.member_id.clone();
        let task = tokio::spawn(async move {
            let params = JoinParams {
                group: &request.group,
                instance_id: request.instance_id.as_deref(),
                topics: &request.topics,
                strategies: &request.strategies,
                session_timeout: request.session_timeout,
                rebalance_timeout: request.rebalance_timeout,
                cooperative: request
                    .cooperative
                    .as_ref()
                    .map(|(owned, generation)| (owned.as_slice(), *generation)),
                rack: request.rack.as_deref(),
            };
            let mut metadata = Metadata::Connect(Box::new(config), None);
            let result =
                coordinator::join_and_sync(&mut metadata, &mut conn, &params, &mut member_id).await;
            (conn, member_id, result)
        });
        g.pending = Some(PendingJoin {
            began: Instant::now(),
            task,
        });
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
        let as_member = self.member_committed(&missing).await;
        let committed = match (as_member, self.config.group_id.clone()) {
            (Some(as_member), _) => as_member?,
            (None, Some(group)) => self.client.committed_offsets(&group).await?,
            (None, None) => BTreeMap::new(),
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
