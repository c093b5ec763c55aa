//! A native consumer: subscribe with the classic group protocol (or assign partitions by
//! hand), `poll` for records, commit, seek, pause. Heartbeats, asynchronous commits and
//! the `max.poll.interval.ms` check run in one background task per consumer (see
//! `coordinator.rs`), which ends when the consumer is closed or dropped.
//!
//! Rebalances are eager: every partition is revoked (after an automatic commit when
//! `enable.auto.commit` is on), the member rejoins, and the new assignment starts from
//! the group's committed offsets, or `auto.offset.reset` where there are none. The
//! cooperative-sticky protocol is not implemented yet.
//!
//! ```no_run
//! # async fn demo() -> tidelog_client::Result<()> {
//! use std::time::Duration;
//! use tidelog_client::{Client, Consumer, ConsumerConfig, OffsetReset};
//!
//! let client = Client::connect_to("127.0.0.1:9092").await?;
//! let mut config = ConsumerConfig::for_group("billing");
//! config.auto_offset_reset = OffsetReset::Earliest;
//! let mut consumer = Consumer::new(client, config)?;
//! consumer.subscribe(&["payments"])?;
//! for _ in 0..10 {
//!     for record in consumer.poll(Duration::from_secs(1)).await? {
//!         println!("{}-{}@{}: {:?}", record.topic, record.partition, record.offset, record.value);
//!     }
//! }
//! consumer.close().await?; // commits, then leaves the group
//! # Ok(())
//! # }
//! ```

mod assignors;
mod config;
mod control;
pub(crate) mod coordinator;
mod fetcher;
mod storm;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

pub use config::{AssignmentStrategy, ConsumerConfig, IsolationLevel, OffsetReset};
pub use control::{ConsumerLag, PendingCommit};

use crate::client::Client;
use crate::error::{ClientError, Result};
use crate::groups::RawConnection;
use crate::partition_admin::TopicPartition;
use crate::records::ConsumedRecord;
use coordinator::{Command, JoinParams, Session, Shared, TaskSettings};

/// Told when partitions leave and join this member's assignment (Kafka's
/// `ConsumerRebalanceListener`). Called from inside `poll`, on the caller's task.
pub trait RebalanceListener: Send {
    /// Before a rebalance takes `partitions` away; with `enable.auto.commit` their
    /// positions have just been committed. Finish (or abandon) work on them here.
    fn on_revoked(&mut self, partitions: &[TopicPartition]);
    /// After the new generation's assignment, before any of its records are returned.
    fn on_assigned(&mut self, partitions: &[TopicPartition]);
}

/// A record as `poll` returns it: the record and the topic it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    /// The topic.
    pub topic: String,
    /// Partition, offset, key, value, headers, producer id.
    pub record: ConsumedRecord,
}

impl std::ops::Deref for ConsumerRecord {
    type Target = ConsumedRecord;
    fn deref(&self) -> &ConsumedRecord {
        &self.record
    }
}

/// Per assigned partition.
#[derive(Debug, Default)]
struct PartitionState {
    /// Offset of the next record handed to the application; `None` until resolved from
    /// the committed offset or `auto.offset.reset`.
    position: Option<i64>,
    /// Where the next fetch starts (ahead of `position` while records are buffered).
    fetch_offset: i64,
    /// Fetched records not yet returned; at most one fetch response's worth, because a
    /// partition with buffered records is not fetched again.
    buffered: VecDeque<ConsumedRecord>,
    high_watermark: i64,
    last_stable_offset: i64,
}

/// The group side of a subscribed consumer.
struct GroupState {
    conn: Option<RawConnection>,
    member_id: String,
    generation: i32,
    shared: Arc<Shared>,
    commands: mpsc::Sender<Command>,
    task: tokio::task::JoinHandle<()>,
}

/// A Kafka consumer. See the module docs for an example.
pub struct Consumer {
    client: Client,
    config: ConsumerConfig,
    subscription: Vec<String>,
    listener: Option<Box<dyn RebalanceListener>>,
    group: Option<GroupState>,
    assigned: BTreeMap<TopicPartition, PartitionState>,
    paused: BTreeSet<TopicPartition>,
    last_auto_commit: Instant,
    storm: storm::StormGuard,
    /// Longest join + sync + offset load measured so far (for the sink's dedup window).
    rebalance_time: Duration,
    /// Where the last drain stopped, so every partition gets its turn.
    drain_from: usize,
}

impl Consumer {
    /// A consumer over `client`'s cluster; nothing is sent until `subscribe` or `assign`.
    pub fn new(client: Client, config: ConsumerConfig) -> Result<Consumer> {
        config.validate()?;
        Ok(Consumer {
            client,
            config,
            subscription: Vec::new(),
            listener: None,
            group: None,
            assigned: BTreeMap::new(),
            paused: BTreeSet::new(),
            last_auto_commit: Instant::now(),
            storm: storm::StormGuard::default(),
            rebalance_time: Duration::ZERO,
            drain_from: 0,
        })
    }

    /// The settings.
    pub fn config(&self) -> &ConsumerConfig {
        &self.config
    }

    /// Installs the rebalance listener.
    pub fn set_rebalance_listener(&mut self, listener: Box<dyn RebalanceListener>) {
        self.listener = Some(listener);
    }

    /// Subscribes to `topics` as a member of `group.id`; the group is joined in the next
    /// `poll`.
    pub fn subscribe(&mut self, topics: &[&str]) -> Result<()> {
        if self.config.group_id.is_none() {
            return Err(ClientError::InvalidArgument(
                "subscribe needs a group.id".into(),
            ));
        }
        if topics.is_empty() {
            return Err(ClientError::InvalidArgument(
                "subscribe to at least one topic".into(),
            ));
        }
        let mut topics: Vec<String> = topics.iter().map(|t| (*t).to_owned()).collect();
        topics.sort();
        topics.dedup();
        self.subscription = topics;
        if let Some(g) = &self.group {
            g.shared.rejoin_needed.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Reads exactly `partitions`, outside any group membership (commits, when a
    /// `group.id` is set, are made as a non-member, as Kafka's `assign` does).
    pub fn assign(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        if !self.subscription.is_empty() {
            return Err(ClientError::InvalidArgument(
                "assign and subscribe cannot be mixed on one consumer".into(),
            ));
        }
        let wanted: BTreeSet<&TopicPartition> = partitions.iter().collect();
        self.assigned.retain(|tp, _| wanted.contains(tp));
        for tp in partitions {
            self.assigned.entry(tp.clone()).or_default();
        }
        self.paused.retain(|tp| wanted.contains(tp));
        Ok(())
    }

    /// The partitions currently assigned.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.assigned.keys().cloned().collect()
    }

    /// This member's generation and member id in its group (`None` before it joined).
    pub fn generation(&self) -> Option<(i32, &str)> {
        self.group
            .as_ref()
            .filter(|g| g.generation >= 0)
            .map(|g| (g.generation, g.member_id.as_str()))
    }

    /// Longest rebalance this member measured (join, sync and loading committed
    /// offsets): with `session.timeout.ms`, what sizes the sink's dedup window.
    pub fn measured_rebalance_time(&self) -> Duration {
        self.rebalance_time
    }

    /// Up to `max.poll.records` records, waiting at most `timeout` for some to arrive.
    /// Joins or rejoins the group when needed and auto-commits when due.
    pub async fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumerRecord>> {
        let started = Instant::now();
        self.storm.on_poll(
            started,
            self.config.max_poll_records,
            self.config.max_poll_interval,
        );
        let deadline = started + timeout;
        let records = loop {
            if let Some(g) = &self.group {
                g.shared.polled();
            }
            self.ensure_group().await?;
            self.maybe_auto_commit().await;
            self.resolve_positions().await?;
            let records = self.drain();
            let now = Instant::now();
            if !records.is_empty() || now >= deadline {
                break records;
            }
            let wait = (deadline - now).min(self.config.fetch.max_wait);
            self.fetch_once(wait).await?;
        };
        self.storm.on_return(Instant::now(), records.len());
        Ok(records)
    }

    /// Joins when subscribed and not (or no longer) a member of the current generation.
    async fn ensure_group(&mut self) -> Result<()> {
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
            g.shared.rejoin_needed.store(false, Ordering::Relaxed);
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
    async fn resolve_positions(&mut self) -> Result<()> {
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
    async fn reset_offset(&mut self, tp: &TopicPartition) -> Result<i64> {
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

    /// Takes up to `max.poll.records` buffered records, partition by partition in turn.
    fn drain(&mut self) -> Vec<ConsumerRecord> {
        let limit = self.config.max_poll_records;
        let mut out = Vec::new();
        let count = self.assigned.len();
        let start = self.drain_from % count.max(1);
        let order: Vec<TopicPartition> = self
            .assigned
            .keys()
            .cycle()
            .skip(start)
            .take(count)
            .cloned()
            .collect();
        for (i, tp) in order.iter().enumerate() {
            if out.len() >= limit {
                self.drain_from = start + i;
                break;
            }
            if self.paused.contains(tp) {
                continue;
            }
            let Some(state) = self.assigned.get_mut(tp) else {
                continue;
            };
            while out.len() < limit {
                let Some(record) = state.buffered.pop_front() else {
                    break;
                };
                state.position = Some(record.offset + 1);
                out.push(ConsumerRecord {
                    topic: tp.0.clone(),
                    record,
                });
            }
            if state.buffered.is_empty() {
                // Control batches and aborted records advance the position too.
                state.position = Some(state.fetch_offset);
            }
        }
        if out.len() < limit {
            self.drain_from = start + 1;
        }
        out
    }

    /// One fetch of every assigned, unpaused partition whose buffer is empty.
    async fn fetch_once(&mut self, wait: Duration) -> Result<()> {
        let positions: Vec<(TopicPartition, i64)> = self
            .assigned
            .iter()
            .filter(|(tp, s)| {
                !self.paused.contains(*tp) && s.buffered.is_empty() && s.position.is_some()
            })
            .map(|(tp, s)| (tp.clone(), s.fetch_offset))
            .collect();
        if positions.is_empty() {
            tokio::time::sleep(wait.min(Duration::from_millis(100))).await;
            return Ok(());
        }
        let mut options = self.config.fetch.clone();
        options.max_wait = wait;
        let fetched = fetcher::fetch_round(
            &mut self.client,
            &positions,
            &options,
            self.config.isolation_level,
        )
        .await?;
        let mut leaderless = false;
        for p in fetched {
            match p.error {
                None => {}
                Some(kafka_protocol::ResponseError::OffsetOutOfRange) => {
                    let offset = self.reset_offset(&p.tp).await?;
                    tracing::warn!(topic = %p.tp.0, partition = p.tp.1, from = p.fetch_offset,
                        to = offset, "fetch offset out of range; reset by auto.offset.reset");
                    if let Some(state) = self.assigned.get_mut(&p.tp) {
                        state.position = Some(offset);
                        state.fetch_offset = offset;
                    }
                    continue;
                }
                Some(e) if crate::client::is_leadership_error(e) => {
                    leaderless = true;
                    continue;
                }
                Some(error) => {
                    return Err(ClientError::Broker {
                        context: format!("fetch {}-{}", p.tp.0, p.tp.1),
                        error,
                        message: None,
                    })
                }
            }
            let Some(state) = self.assigned.get_mut(&p.tp) else {
                continue;
            };
            if state.fetch_offset != p.fetch_offset {
                continue;
            }
            state.high_watermark = p.high_watermark;
            state.last_stable_offset = p.last_stable_offset;
            state.fetch_offset = p.next_offset;
            state.buffered.extend(p.records);
        }
        if leaderless {
            tokio::time::sleep(self.client.config().retry_backoff).await;
        }
        Ok(())
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
