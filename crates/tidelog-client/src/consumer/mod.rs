//! A native consumer: subscribe with the classic group protocol (or assign partitions by
//! hand), `poll` for records, commit, seek, pause. Heartbeats, asynchronous commits and
//! the `max.poll.interval.ms` check run in one background task per consumer (see
//! `coordinator.rs`), which ends when the consumer is closed or dropped; a join runs in
//! a task of its own that `poll` waits for only until its timeout (`membership.rs`).
//!
//! With `group.protocol=consumer` the member speaks KIP-848 instead (`kip848.rs`,
//! `incremental.rs`): the broker assigns, and only the partitions that move are revoked.
//! Such a member may also subscribe by regular expression (`subscribe_regex`).
//!
//! Classic rebalances are eager: every partition is revoked (after an automatic commit when
//! `enable.auto.commit` is on), the member rejoins, and the new assignment starts from
//! the group's committed offsets, or `auto.offset.reset` where there are none. With
//! `partition.assignment.strategy=cooperative-sticky` they are incremental (KIP-429,
//! `cooperative.rs`): the member keeps consuming through the rebalance and revokes only
//! the partitions that move.
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
mod cooperative;
pub(crate) mod coordinator;
mod fetcher;
mod incremental;
mod kip848;
mod member_offsets;
mod membership;
mod sticky;
mod storm;
mod subscription;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

pub use config::{AssignmentStrategy, ConsumerConfig, GroupProtocol, IsolationLevel, OffsetReset};
pub use control::{ConsumerLag, PendingCommit};

use crate::client::Client;
use crate::error::{ClientError, Result};
use crate::groups::RawConnection;
use crate::partition_admin::TopicPartition;
use crate::records::ConsumedRecord;
use coordinator::{Command, Shared};

/// Told when partitions leave and join this member's assignment (Kafka's
/// `ConsumerRebalanceListener`). Called from inside `poll`, on the caller's task.
pub trait RebalanceListener: Send {
    /// Before a rebalance takes `partitions` away; with `enable.auto.commit` their
    /// positions have just been committed. Finish (or abandon) work on them here.
    fn on_revoked(&mut self, partitions: &[TopicPartition]);
    /// After the new generation's assignment, before any of its records are returned.
    fn on_assigned(&mut self, partitions: &[TopicPartition]);
    /// The membership was lost (fenced by the coordinator, or left after
    /// `max.poll.interval.ms`): the partitions may already belong to another member, so
    /// nothing was committed. Kafka's default: the same as `on_revoked`.
    fn on_lost(&mut self, partitions: &[TopicPartition]) {
        self.on_revoked(partitions);
    }
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
    /// A join under way (`poll` waits for it only until its own deadline).
    pending: Option<membership::PendingJoin>,
    /// With `group.protocol=consumer`: the membership the KIP-848 heartbeat task keeps.
    kip: Option<Arc<kip848::Membership>>,
}

/// A Kafka consumer. See the module docs for an example.
pub struct Consumer {
    client: Client,
    config: ConsumerConfig,
    subscription: Vec<String>,
    /// `subscribe_regex`: the broker matches topics (KIP-848 only).
    pattern: Option<String>,
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
            pattern: None,
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
        self.pattern = None;
        if let Some(g) = &self.group {
            g.shared.rejoin_needed.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Subscribes to every topic whose name matches `regex` (RE2/J syntax, matched by
    /// the broker: KIP-848's `SubscribedTopicRegex`), now and as topics are created.
    /// Needs `group.protocol=consumer`; the broker refuses a bad expression with
    /// INVALID_REGULAR_EXPRESSION, which the next `poll` returns.
    pub fn subscribe_regex(&mut self, regex: &str) -> Result<()> {
        if self.config.group_id.is_none() || self.config.group_protocol != GroupProtocol::Consumer {
            return Err(ClientError::InvalidArgument(
                "subscribe_regex needs a group.id and group.protocol=consumer".into(),
            ));
        }
        if regex.is_empty() {
            return Err(ClientError::InvalidArgument(
                "subscribe_regex needs a non-empty expression".into(),
            ));
        }
        self.subscription.clear();
        self.pattern = Some(regex.to_owned());
        Ok(())
    }

    /// Reads exactly `partitions`, outside any group membership (commits, when a
    /// `group.id` is set, are made as a non-member, as Kafka's `assign` does).
    pub fn assign(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        if !self.subscription.is_empty() || self.pattern.is_some() {
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

    /// The group, generation, member id and instance id to pass to
    /// [`crate::Producer::send_offsets_to_transaction`] (`None` without `group.id`).
    pub fn group_metadata(&self) -> Option<crate::ConsumerGroupMetadata> {
        let group_id = self.config.group_id.as_deref()?;
        let mut metadata = crate::ConsumerGroupMetadata::new(group_id);
        if let Some((generation, member_id)) = self.generation() {
            metadata.generation_id = generation;
            metadata.member_id = member_id.to_owned();
        }
        metadata.group_instance_id = self.config.group_instance_id.clone();
        Some(metadata)
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
            self.ensure_group(deadline).await?;
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
