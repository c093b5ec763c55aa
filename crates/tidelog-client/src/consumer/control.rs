//! What the application does between polls: commit, seek, pause, ask for lag, close.

use std::time::Instant;

use tokio::sync::oneshot;

use super::coordinator::{self, Command, Session};
use super::{Consumer, IsolationLevel};
use crate::error::{ClientError, Result};
use crate::fetch::OffsetSpec;
use crate::partition_admin::TopicPartition;

/// How far one partition's position trails the end of what it may read, seen from the
/// client: the high watermark, or under read_committed the last stable offset, as of the
/// latest fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerLag {
    /// The partition.
    pub partition: TopicPartition,
    /// The next offset `poll` returns.
    pub position: i64,
    /// The end offset the last fetch reported (-1 before the first fetch).
    pub end_offset: i64,
    /// `end_offset - position`, never negative (0 before the first fetch).
    pub lag: i64,
}

/// An asynchronous commit on its way: await [`PendingCommit::wait`] for the outcome, or
/// drop it (a failure is then logged).
#[derive(Debug)]
pub struct PendingCommit(Option<oneshot::Receiver<Result<()>>>);

impl PendingCommit {
    /// The commit's outcome.
    pub async fn wait(self) -> Result<()> {
        match self.0 {
            None => Ok(()),
            Some(r) => r.await.unwrap_or_else(|_| {
                Err(ClientError::Protocol("the group task has stopped".into()))
            }),
        }
    }
}

impl Consumer {
    /// The positions of every assigned partition that has one: what a commit stores.
    pub fn positions(&self) -> Vec<(TopicPartition, i64)> {
        self.assigned
            .iter()
            .filter_map(|(tp, s)| s.position.map(|p| (tp.clone(), p)))
            .collect()
    }

    /// The next offset `poll` returns for `partition`.
    pub fn position(&self, partition: &TopicPartition) -> Option<i64> {
        self.assigned.get(partition).and_then(|s| s.position)
    }

    /// Commits the current positions and waits for the coordinator's answer.
    pub async fn commit_sync(&mut self) -> Result<()> {
        let offsets = self.positions();
        self.commit_offsets_sync(&offsets).await
    }

    /// Commits the given next offsets and waits for the answer.
    pub async fn commit_offsets_sync(&mut self, offsets: &[(TopicPartition, i64)]) -> Result<()> {
        self.send_commit(offsets.to_vec(), true).await?.wait().await
    }

    /// Queues a commit of the current positions and returns at once; commits are sent
    /// in the order they were made.
    pub async fn commit_async(&mut self) -> Result<PendingCommit> {
        let offsets = self.positions();
        self.send_commit(offsets, true).await
    }

    async fn send_commit(
        &mut self,
        offsets: Vec<(TopicPartition, i64)>,
        want_reply: bool,
    ) -> Result<PendingCommit> {
        let Some(group_id) = self.config.group_id.clone() else {
            return Err(ClientError::InvalidArgument(
                "committing needs a group.id".into(),
            ));
        };
        if offsets.is_empty() {
            return Ok(PendingCommit(None));
        }
        match &self.group {
            Some(g) => {
                let (reply, answer) = oneshot::channel();
                let command = Command::Commit {
                    offsets,
                    session: Session {
                        member_id: g.member_id.clone(),
                        generation: g.generation,
                    },
                    reply: want_reply.then_some(reply),
                };
                g.commands
                    .send(command)
                    .await
                    .map_err(|_| ClientError::Protocol("the group task has stopped".into()))?;
                Ok(PendingCommit(want_reply.then_some(answer)))
            }
            None => {
                // Manually assigned: commit as a non-member (generation -1).
                let flat: Vec<(String, i32, i64)> =
                    offsets.into_iter().map(|((t, p), o)| (t, p, o)).collect();
                self.client.commit_offsets(&group_id, &flat).await?;
                Ok(PendingCommit(None))
            }
        }
    }

    /// Auto-commit from `poll` once `auto.commit.interval.ms` has passed (asynchronous:
    /// poll does not wait for it; failures are logged).
    pub(super) async fn maybe_auto_commit(&mut self) {
        if !self.config.enable_auto_commit
            || self.config.group_id.is_none()
            || self.last_auto_commit.elapsed() < self.config.auto_commit_interval
        {
            return;
        }
        self.last_auto_commit = Instant::now();
        let offsets = self.positions();
        if let Err(e) = self.send_commit(offsets, false).await {
            tracing::warn!(error = %e, "auto-commit failed");
        }
    }

    /// The next `poll` returns `partition` from `offset`.
    pub fn seek(&mut self, partition: &TopicPartition, offset: i64) -> Result<()> {
        let state = self.assigned.get_mut(partition).ok_or_else(|| {
            ClientError::InvalidArgument(format!(
                "{}-{} is not assigned to this consumer",
                partition.0, partition.1
            ))
        })?;
        state.position = Some(offset);
        state.fetch_offset = offset;
        state.buffered.clear();
        Ok(())
    }

    /// Seeks to the offset `spec` names (ListOffsets): earliest, latest, or the first
    /// record at or after a timestamp (ms since the epoch). A timestamp later than every
    /// record seeks to the end. Returns the offset.
    pub async fn seek_to(&mut self, partition: &TopicPartition, spec: OffsetSpec) -> Result<i64> {
        let mut offset = self
            .client
            .list_offsets(&partition.0, partition.1, spec)
            .await?;
        if offset < 0 {
            offset = self
                .client
                .list_offsets(&partition.0, partition.1, OffsetSpec::Latest)
                .await?;
        }
        self.seek(partition, offset)?;
        Ok(offset)
    }

    /// Stops returning (and fetching) records of `partitions` until resumed; the others
    /// go on. Paused partitions stay assigned, keep their positions and heartbeats go on.
    pub fn pause(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            if self.assigned.contains_key(tp) {
                self.paused.insert(tp.clone());
            }
        }
    }

    /// Undoes [`Consumer::pause`].
    pub fn resume(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            self.paused.remove(tp);
        }
    }

    /// The paused partitions.
    pub fn paused(&self) -> Vec<TopicPartition> {
        self.paused.iter().cloned().collect()
    }

    /// Client-side lag of every assigned partition with a position.
    pub fn lag(&self) -> Vec<ConsumerLag> {
        let committed = self.config.isolation_level == IsolationLevel::ReadCommitted;
        self.assigned
            .iter()
            .filter_map(|(tp, s)| {
                let position = s.position?;
                let end = if committed {
                    s.last_stable_offset
                } else {
                    s.high_watermark
                };
                let seen = s.high_watermark > 0 || s.last_stable_offset > 0;
                let end_offset = if seen { end } else { -1 };
                Some(ConsumerLag {
                    partition: tp.clone(),
                    position,
                    end_offset,
                    lag: (end_offset - position).max(0),
                })
            })
            .collect()
    }

    /// Commits (with `enable.auto.commit`), revokes, leaves the group (dynamic members
    /// only: a static member keeps its place for `session.timeout.ms`, so that a restart
    /// does not rebalance), and stops the background task.
    pub async fn close(mut self) -> Result<()> {
        let mut outcome = Ok(());
        if self.config.enable_auto_commit && self.config.group_id.is_some() {
            outcome = self.commit_sync().await;
        }
        let revoked = self.assignment();
        if let Some(listener) = self.listener.as_mut() {
            if !revoked.is_empty() {
                listener.on_revoked(&revoked);
            }
        }
        self.assigned.clear();
        if let Some(mut g) = self.group.take() {
            if g.kip.is_some() {
                // The heartbeat task leaves (epoch -1, or -2 when static) and stops.
                let (reply, left) = oneshot::channel();
                if g.commands.send(Command::Leave { reply }).await.is_ok() {
                    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), left).await;
                }
            }
            if g.pending.take().is_some() {
                // The unfinished join (aborted now) held the connection: leave over a new one.
                if let Some(group) = self.config.group_id.as_deref() {
                    g.conn = self.client.coordinator(group).await.ok();
                }
            }
            let is_static = self.config.group_instance_id.is_some();
            if let (Some(conn), Some(group), false, true) = (
                g.conn.as_mut(),
                self.config.group_id.as_deref(),
                is_static,
                g.generation >= 0 || !g.member_id.is_empty(),
            ) {
                if let Err(e) = coordinator::leave(conn, group, &g.member_id).await {
                    tracing::warn!(error = %e, "leaving the group failed");
                }
            }
            drop(g.commands);
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), &mut g.task).await;
            g.task.abort();
        }
        outcome
    }
}
