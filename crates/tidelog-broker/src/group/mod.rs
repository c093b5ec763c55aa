//! The group coordinator: consumer groups, their rebalances, and committed offsets.
//!
//! A group lives in partition `partition_for(group, offsets.topic.num.partitions)` of
//! `__consumer_offsets` (see `internal_topic`), and its coordinator is that
//! partition's leader, read from the metadata image. Each led partition is a
//! [`GroupShard`] on the coordinator runtime (`crate::coordinator`): the steps in
//! `join`, `members` and `offsets` are pure functions of the shard, the request and the
//! time; the runtime appends their records, replays them, and answers once they are
//! replicated. Rebalance waits (JoinGroup until all members rejoined, SyncGroup until
//! the leader's assignment is stored) are parked oneshot channels answered by later
//! steps. The runtime's clock tick drives session expiry, rebalance timeouts and the
//! initial rebalance delay; [`GroupCoordinator::run`] follows the metadata image (which
//! partitions are led here) and runs offsets retention.
//!
//! What a transaction does to a group goes through two steps only: TxnOffsetCommit
//! writes the offsets as a transactional batch, and the transaction coordinator's marker
//! ([`GroupCoordinator::complete_transaction`], the one interface between the two
//! coordinators) commits or drops them.

pub(crate) mod consumer;
mod join;
pub(crate) mod member_summary;
mod members;
mod offsets;
mod rebalance;
pub(crate) mod records;
mod shard;
pub(crate) mod share;
pub(crate) mod share_offsets;
pub(crate) mod share_records;
#[cfg(test)]
mod share_tests;
mod state;
#[cfg(test)]
mod tests;
mod topic;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::poison::{LockTolerant, RwLockTolerant};
use kafka_protocol::error::ResponseError;
use kafka_protocol::protocol::StrBytes;
use tidelog_controller::MetadataImage;
use tokio::sync::{mpsc, watch};

pub(crate) use crate::internal_topic::{coordinator_for, Coordinates};
pub(crate) use join::JoinRequest;
pub(crate) use members::{LeaveResult, SyncRequest};
pub(crate) use offsets::{CommitRequest, DescribedGroup, ListedGroup};
pub(crate) use rebalance::Waiting;
pub(crate) use shard::{GroupShard, GroupSummary, PublishedGroups};
pub(crate) use state::{JoinOutcome, SyncOutcome};
pub(crate) use topic::ensure_offsets_topic;

use crate::config::BrokerConfig;
use crate::coordinator::{
    CoordinatorError, CoordinatorRuntime, LogSource, Now, Outcome, RuntimeConfig,
};
use crate::internal_topic::partition_for;
use crate::settings;
use tidelog_env::clock::Clock;

/// The internal topic holding committed offsets and group metadata.
pub(crate) const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// How often the runtime looks at the groups' clocks.
const TICK: Duration = Duration::from_millis(100);
/// Requests queued per offsets partition at most.
const QUEUE: usize = 4096;

/// Broker settings the coordinator follows, read once at start-up.
#[derive(Debug, Clone)]
pub(crate) struct GroupConfig {
    pub(crate) min_session_timeout_ms: i32,
    pub(crate) max_session_timeout_ms: i32,
    pub(crate) initial_rebalance_delay: Duration,
    pub(crate) max_size: usize,
    pub(crate) offsets_retention_ms: i64,
    pub(crate) retention_check_every: Duration,
    pub(crate) metadata_max_bytes: usize,
    /// `offsets.commit.timeout.ms`: how long a write waits for replication.
    pub(crate) commit_timeout: Duration,
    /// Each group's session timeout and heartbeat interval (its group configs, else
    /// the broker's `group.consumer.*` defaults).
    pub(crate) group_configs: crate::group_config::GroupConfigs,
    /// The cluster's topics, for steps the clock takes (None in unit tests: no topics).
    pub(crate) images: Option<watch::Receiver<Arc<MetadataImage>>>,
    /// What the consumer-group steps count for the metrics, shared by the shards.
    pub(crate) consumer_stats: consumer::stats::SharedStats,
    /// Server-side assignors by their short names, the default first.
    pub(crate) consumer_assignors: Vec<String>,
    pub(crate) consumer_max_size: usize,
    /// `group.consumer.migration.policy` lets a classic group become a consumer group...
    pub(crate) consumer_upgrade: bool,
    /// ...and a consumer group whose last consumer-protocol member left become classic.
    pub(crate) consumer_downgrade: bool,
    pub(crate) share_max_size: usize,
}

/// `group.consumer.assignors`: short names, or Kafka's class names of the same.
fn assignor_names(setting: &str) -> Vec<String> {
    let mut names: Vec<String> = setting
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s.rsplit('.').next().unwrap_or(s) {
            "UniformAssignor" => consumer::assignor::UNIFORM.to_string(),
            "RangeAssignor" => consumer::assignor::RANGE.to_string(),
            other => other.to_string(),
        })
        .filter(|s| s == consumer::assignor::UNIFORM || s == consumer::assignor::RANGE)
        .collect();
    names.dedup();
    if names.is_empty() {
        names.push(consumer::assignor::UNIFORM.to_string());
    }
    names
}

/// What Kafka's `group.consumer.migration.policy` value allows, (upgrade, downgrade)
/// (Kafka reads it case-insensitively); an error names the values it takes.
pub(crate) fn migration_policy(value: &str) -> Result<(bool, bool), String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "bidirectional" => Ok((true, true)),
        "upgrade" => Ok((true, false)),
        "downgrade" => Ok((false, true)),
        "disabled" => Ok((false, false)),
        _ => Err("expected one of disabled, downgrade, upgrade, bidirectional".into()),
    }
}

impl GroupConfig {
    /// The topics of the newest image.
    pub(crate) fn topics_view(&self) -> consumer::TopicsView {
        let mut view = consumer::TopicsView {
            taken_ms: crate::context::now_ms(),
            ..consumer::TopicsView::default()
        };
        if let Some(images) = &self.images {
            let image = images.borrow();
            view.version = image
                .last_offset()
                .map_or(-1, |o| i64::try_from(o).unwrap_or(i64::MAX));
            for t in image.topics() {
                view.insert(&t.name, t.topic_id, t.partition_count());
            }
        }
        view
    }

    pub(crate) fn from_broker(config: &BrokerConfig) -> GroupConfig {
        // The setting is checked when the configuration is read; bidirectional is the default.
        let migration = migration_policy(&config.get(settings::GROUP_CONSUMER_MIGRATION_POLICY))
            .unwrap_or((true, true));
        GroupConfig {
            min_session_timeout_ms: config.count(settings::GROUP_MIN_SESSION_TIMEOUT_MS),
            max_session_timeout_ms: config.count(settings::GROUP_MAX_SESSION_TIMEOUT_MS),
            initial_rebalance_delay: config.duration(settings::GROUP_INITIAL_REBALANCE_DELAY_MS),
            max_size: config.count(settings::GROUP_MAX_SIZE),
            offsets_retention_ms: config
                .get(settings::OFFSETS_RETENTION_MINUTES)
                .saturating_mul(60_000),
            retention_check_every: config
                .duration(settings::OFFSETS_RETENTION_CHECK_INTERVAL_MS)
                .max(TICK),
            metadata_max_bytes: config.count(settings::OFFSET_METADATA_MAX_BYTES),
            commit_timeout: config
                .duration(settings::OFFSETS_COMMIT_TIMEOUT_MS)
                .max(Duration::from_millis(1)),
            images: None,
            group_configs: crate::group_config::GroupConfigs::new(
                crate::group_config::BrokerGroupDefaults::from_broker(config),
            ),
            consumer_stats: Arc::default(),
            consumer_assignors: assignor_names(&config.get(settings::GROUP_CONSUMER_ASSIGNORS)),
            consumer_max_size: config.count(settings::GROUP_CONSUMER_MAX_SIZE),
            consumer_upgrade: migration.0,
            consumer_downgrade: migration.1,
            share_max_size: config.count(settings::GROUP_SHARE_MAX_SIZE),
        }
    }
}

/// Settings for the tests: short timeouts, a group of at most 3.
#[cfg(test)]
pub(crate) fn test_config() -> GroupConfig {
    GroupConfig {
        min_session_timeout_ms: 1000,
        max_session_timeout_ms: 60_000,
        initial_rebalance_delay: Duration::ZERO,
        max_size: 3,
        offsets_retention_ms: 60_000,
        retention_check_every: Duration::from_secs(1),
        metadata_max_bytes: 4096,
        commit_timeout: Duration::from_secs(5),
        images: None,
        group_configs: crate::group_config::GroupConfigs::new(
            crate::group_config::BrokerGroupDefaults::from_settings(|name| match name {
                "group.consumer.session.timeout.ms" => Some("1000".into()),
                "group.consumer.heartbeat.interval.ms" => Some("100".into()),
                "group.consumer.min.session.timeout.ms" => Some("1".into()),
                "group.consumer.min.heartbeat.interval.ms" => Some("1".into()),
                "group.share.session.timeout.ms" => Some("1000".into()),
                "group.share.heartbeat.interval.ms" => Some("100".into()),
                _ => None,
            }),
        ),
        consumer_stats: Arc::default(),
        consumer_assignors: vec!["uniform".into(), "range".into()],
        consumer_max_size: 4,
        consumer_upgrade: true,
        consumer_downgrade: true,
        share_max_size: 4,
    }
}

/// Why a group request could not be served; its Kafka code at the protocol edge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GroupError {
    #[error("invalid group id")]
    InvalidGroupId,
    #[error(transparent)]
    Coordinator(#[from] CoordinatorError),
    /// The group's own answer (a member check).
    #[error("{0:?}")]
    Kafka(ResponseError),
}

impl GroupError {
    pub(crate) fn code(&self) -> i16 {
        match self {
            GroupError::InvalidGroupId => ResponseError::InvalidGroupId.code(),
            GroupError::Coordinator(e) => e.code(),
            GroupError::Kafka(e) => e.code(),
        }
    }
}

/// One group as published: its id, summary (none yet for a group known only by its
/// offsets) and committed (topic, partition, offset)s.
pub(crate) type PublishedGroup = (String, Option<GroupSummary>, Vec<(String, i32, i64)>);

/// Each led partition's published groups, for readers outside the runtime.
type Published = Arc<Mutex<BTreeMap<i32, Arc<RwLock<PublishedGroups>>>>>;

pub(crate) struct GroupCoordinator {
    runtime: Arc<CoordinatorRuntime<GroupShard>>,
    images: watch::Receiver<Arc<MetadataImage>>,
    node_id: i32,
    pub(crate) config: Arc<GroupConfig>,
    published: Published,
}

impl GroupCoordinator {
    /// A coordinator for the `__consumer_offsets` partitions this node leads in the
    /// images `images` publishes, on the logs `logs` hands out.
    pub(crate) fn new(
        config: GroupConfig,
        node_id: i32,
        images: watch::Receiver<Arc<MetadataImage>>,
        logs: Arc<dyn LogSource>,
        clock: Arc<dyn Clock>,
    ) -> GroupCoordinator {
        let mut config = config;
        config.group_configs = config.group_configs.clone().with_images(images.clone());
        config.images = Some(images.clone());
        let config = Arc::new(config);
        let shard_config = Arc::clone(&config);
        let published: Published = Arc::default();
        let registry = Arc::clone(&published);
        // Group steps have no effects outside their shard.
        let (effects, _) = mpsc::channel(1);
        let runtime = CoordinatorRuntime::new(
            RuntimeConfig {
                topic: OFFSETS_TOPIC,
                tick: TICK,
                write_timeout: config.commit_timeout,
                queue: QUEUE,
            },
            logs,
            clock,
            move |partition, _epoch| {
                let view = Arc::new(RwLock::new(PublishedGroups::default()));
                registry.locked().insert(partition, Arc::clone(&view));
                GroupShard::new(Arc::clone(&shard_config), view)
            },
            effects,
        );
        GroupCoordinator {
            runtime: Arc::new(runtime),
            images,
            node_id,
            config,
            published,
        }
    }

    /// The offsets partition of `group` if this node leads it; else the error a client
    /// should see (INVALID_GROUP_ID, NOT_COORDINATOR).
    fn partition_of(&self, group: &str) -> Result<i32, GroupError> {
        // Stored keys hold names as i16-length strings.
        if group.is_empty() || group.len() > usize::from(join::MAX_NAME_BYTES) {
            return Err(GroupError::InvalidGroupId);
        }
        let image = self.images.borrow();
        // Without the topic (or the key's partition) this node coordinates nothing:
        // NOT_COORDINATOR, as Kafka answers, sends the client back to FindCoordinator,
        // which creates the topic.
        let Some(topic) = image.topic(OFFSETS_TOPIC) else {
            return Err(CoordinatorError::NotCoordinator.into());
        };
        let partition = partition_for(group, topic.partition_count());
        match topic.partitions.get(&partition) {
            Some(p) if p.leader == self.node_id => Ok(partition),
            _ => Err(CoordinatorError::NotCoordinator.into()),
        }
    }

    /// Whether each (topic, partition) of `offsets` exists in the image.
    fn known(&self, offsets: &[(String, i32, i64, i32, Option<String>)]) -> Vec<bool> {
        let image = self.images.borrow();
        offsets
            .iter()
            .map(|(topic, p, ..)| {
                image
                    .topic(topic)
                    .is_some_and(|t| t.partitions.contains_key(p))
            })
            .collect()
    }

    pub(crate) async fn join(&self, req: JoinRequest) -> Result<Waiting<JoinOutcome>, GroupError> {
        let partition = self.partition_of(&req.group_id)?;
        let topics = self.topics_view();
        Ok(self
            .runtime
            .write(partition, move |shard, now| shard.join(req, &topics, now))
            .await?)
    }

    pub(crate) async fn sync(&self, req: SyncRequest) -> Result<Waiting<SyncOutcome>, GroupError> {
        let partition = self.partition_of(&req.group_id)?;
        let topics = self.topics_view();
        Ok(self
            .runtime
            .write(partition, move |shard, now| shard.sync(req, &topics, now))
            .await?)
    }

    /// ConsumerGroupHeartbeat (KIP-848), answered once its records are replicated.
    /// ConsumerGroupHeartbeat (KIP-848); a regex the step resolves matches only the
    /// topics `describable` lets the member's principal see.
    pub(crate) async fn consumer_heartbeat(
        &self,
        req: consumer::heartbeat::HeartbeatRequest,
        describable: consumer::TopicFilter,
    ) -> Result<consumer::heartbeat::HeartbeatResponse, GroupError> {
        let partition = self.partition_of(&req.group_id)?;
        let topics = consumer::TopicsView {
            describable,
            ..self.topics_view()
        };
        Ok(self
            .runtime
            .write(partition, move |shard, now| {
                shard.consumer_heartbeat(req, &topics, now)
            })
            .await?)
    }

    /// ConsumerGroupDescribe of one group, with the topic names of the image.
    pub(crate) async fn consumer_describe(
        &self,
        group: String,
    ) -> Result<(consumer::describe::ConsumerDescribe, consumer::TopicsView), GroupError> {
        let partition = self.partition_of(&group)?;
        let described = self
            .runtime
            .read(partition, move |shard| shard.describe_consumer(&group))
            .await?;
        Ok((described, self.topics_view()))
    }

    /// ShareGroupHeartbeat (KIP-932).
    pub(crate) async fn share_heartbeat(
        &self,
        req: share::ShareHeartbeat,
    ) -> Result<share::ShareHeartbeatResponse, GroupError> {
        let partition = self.partition_of(&req.group_id)?;
        let topics = self.topics_view();
        Ok(self
            .runtime
            .write(partition, move |shard, now| {
                shard.share_heartbeat(req, &topics, now)
            })
            .await?)
    }

    /// ShareGroupDescribe of one group (None: no share group of that id), with the
    /// topic names of the image.
    pub(crate) async fn share_describe(
        &self,
        group: String,
    ) -> Result<(Option<share::ShareGroup>, consumer::TopicsView), GroupError> {
        let partition = self.partition_of(&group)?;
        let described = self
            .runtime
            .read(partition, move |shard| shard.describe_share(&group))
            .await?;
        Ok((described, self.topics_view()))
    }

    /// The topics of the current image as a consumer-group step sees them.
    fn topics_view(&self) -> consumer::TopicsView {
        self.config.topics_view()
    }

    pub(crate) async fn heartbeat(
        &self,
        group: String,
        member: String,
        instance: Option<String>,
        generation: i32,
    ) -> Result<i16, GroupError> {
        let partition = self.partition_of(&group)?;
        let step = move |shard: &mut GroupShard, now| {
            let code = shard.heartbeat(&group, &member, instance.as_deref(), generation, now);
            Outcome::answer(code)
        };
        Ok(self.runtime.write(partition, step).await?)
    }

    pub(crate) async fn leave(
        &self,
        group: String,
        leaving: Vec<(String, Option<String>)>,
    ) -> Result<Vec<LeaveResult>, GroupError> {
        let partition = self.partition_of(&group)?;
        let topics = self.topics_view();
        Ok(self
            .runtime
            .write(partition, move |shard, now| {
                shard.leave(&group, leaving, &topics, now)
            })
            .await?)
    }

    /// OffsetCommit: one code per requested offset, once the records are replicated.
    pub(crate) async fn commit(&self, req: CommitRequest) -> Vec<i16> {
        self.write_offsets(req, |shard, req, known, now| {
            shard.offset_commit(req, known, now)
        })
        .await
    }

    /// Runs an offset-writing step for `req` on its group's shard: one code per offset.
    async fn write_offsets(
        &self,
        req: CommitRequest,
        step: impl FnOnce(&mut GroupShard, CommitRequest, &[bool], Now) -> Outcome<GroupShard, Vec<i16>>
            + Send
            + 'static,
    ) -> Vec<i16> {
        let count = req.offsets.len();
        let partition = match self.partition_of(&req.group_id) {
            Ok(p) => p,
            Err(e) => return vec![e.code(); count],
        };
        let known = self.known(&req.offsets);
        let written = self
            .runtime
            .write_reporting(partition, move |shard, now| step(shard, req, &known, now))
            .await;
        commit_codes(written, count)
    }

    /// Starts verifying a TxnOffsetCommit of `producer_id` for `group` (see
    /// [`GroupShard::begin_txn_commit`]); the guard for [`GroupCoordinator::txn_commit`].
    pub(crate) async fn begin_txn_commit(
        &self,
        group: &str,
        producer_id: i64,
    ) -> Result<u64, GroupError> {
        let partition = self.partition_of(group)?;
        Ok(self
            .runtime
            .write(partition, move |shard, _| {
                Outcome::answer(shard.begin_txn_commit(producer_id))
            })
            .await?)
    }

    /// TxnOffsetCommit: `producer`'s offsets, counted at its transaction's marker;
    /// `guard` from [`GroupCoordinator::begin_txn_commit`] when it was verified.
    pub(crate) async fn txn_commit(
        &self,
        req: CommitRequest,
        producer: (i64, i16),
        guard: Option<u64>,
    ) -> Vec<i16> {
        self.write_offsets(req, move |shard, req, known, now| {
            shard.txn_commit(req, producer, guard, known, now)
        })
        .await
    }

    /// The one thing the transaction coordinator asks of this one: the transaction of
    /// `producer_id` ended on `partition` (a COMMIT or ABORT marker there). Answers once
    /// the marker is replicated.
    pub(crate) async fn complete_transaction(
        &self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    ) -> Result<(), CoordinatorError> {
        self.runtime
            .write(partition, move |shard, _| {
                shard.complete_transaction(producer_id, producer_epoch, commit, coordinator_epoch)
            })
            .await
    }

    /// The committed offsets of `group` for `topics` (all when `None`), each with
    /// whether an open transaction may still change it.
    /// `member`: the member id and epoch OffsetFetch v9+ names, checked against a
    /// consumer-protocol group's members (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH).
    pub(crate) async fn fetch_offsets(
        &self,
        group: String,
        topics: Option<Vec<(String, Vec<i32>)>>,
        member: Option<(String, i32)>,
    ) -> Result<Vec<(String, Vec<(i32, i64, i32, String, bool)>)>, GroupError> {
        let partition = self.partition_of(&group)?;
        let read = move |shard: &GroupShard| {
            if let (Some((member_id, epoch)), Some(consumer)) =
                (&member, shard.consumer_groups.get(&group))
            {
                consumer::offsets::validate_consumer_fetcher(consumer, member_id, *epoch)?;
            }
            Ok(shard
                .fetch_offsets(&group, topics)
                .into_iter()
                .map(|(topic, parts)| {
                    let parts = parts
                        .into_iter()
                        .map(|(p, offset, epoch, meta)| {
                            let pending = shard.offset_pending(&group, &topic, p);
                            (p, offset, epoch, meta, pending)
                        })
                        .collect();
                    (topic, parts)
                })
                .collect())
        };
        self.runtime
            .read(partition, read)
            .await?
            .map_err(GroupError::Kafka)
    }

    /// Waits (bounded) until every partition the image says this node leads runs.
    pub(crate) async fn wait_started(&self) {
        let image = Arc::clone(&self.images.borrow());
        self.runtime
            .wait_started(&image, self.node_id, Duration::from_secs(5))
            .await;
    }

    /// Every group of every loaded partition, and whether some partition is still
    /// loading (ListGroups says so rather than answer with a partial list).
    pub(crate) async fn list_groups(&self) -> (Vec<ListedGroup>, bool) {
        let (lists, loading) = self.runtime.read_all(GroupShard::list_groups).await;
        let mut all: Vec<ListedGroup> = lists.into_iter().flatten().collect();
        all.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        (all, loading)
    }

    pub(crate) async fn describe(&self, group: String) -> Result<DescribedGroup, GroupError> {
        let partition = self.partition_of(&group)?;
        Ok(self
            .runtime
            .read(partition, move |shard| shard.describe(&group))
            .await?)
    }

    pub(crate) async fn delete_group(&self, group: String) -> i16 {
        let partition = match self.partition_of(&group) {
            Ok(p) => p,
            Err(e) => return e.code(),
        };
        self.runtime
            .write(partition, move |shard, _| shard.delete_group(&group))
            .await
            .unwrap_or_else(|e| e.code())
    }

    pub(crate) async fn delete_offsets(
        &self,
        group: String,
        partitions: Vec<(String, i32)>,
    ) -> (i16, Vec<i16>) {
        let count = partitions.len();
        let partition = match self.partition_of(&group) {
            Ok(p) => p,
            Err(e) => return (e.code(), vec![0; count]),
        };
        self.runtime
            .write(partition, move |shard, _| {
                shard.delete_offsets(&group, &partitions)
            })
            .await
            .unwrap_or_else(|e| (e.code(), vec![0; count]))
    }

    /// Every group this node coordinates with its committed offsets, as last published
    /// by its shard (for the metrics, which read without going through the runtime).
    pub(crate) fn published(&self) -> Vec<PublishedGroup> {
        let views: Vec<Arc<RwLock<PublishedGroups>>> =
            self.published.locked().values().cloned().collect();
        let mut out = Vec::new();
        for view in views {
            let view = view.read_locked();
            let mut by_group: BTreeMap<&str, Vec<(String, i32, i64)>> = BTreeMap::new();
            for ((group, topic, partition), offset) in &view.offsets {
                by_group
                    .entry(group)
                    .or_default()
                    .push((topic.clone(), *partition, *offset));
            }
            for id in view.groups.keys() {
                by_group.entry(id).or_default();
            }
            for (group, offsets) in by_group {
                out.push((group.to_string(), view.groups.get(group).cloned(), offsets));
            }
        }
        out
    }

    /// Follows the image (which partitions are led here) and runs offsets retention
    /// every `offsets.retention.check.interval.ms`, until `shutdown`; then stops the
    /// shards, answering whatever is parked with NOT_COORDINATOR.
    pub(crate) async fn run(self: Arc<Self>, shutdown: watch::Receiver<bool>) {
        let follower = tokio::spawn(Arc::clone(&self.runtime).run(
            self.images.clone(),
            self.node_id,
            shutdown.clone(),
        ));
        let mut stop = shutdown;
        let mut retention = tokio::time::interval(self.config.retention_check_every);
        retention.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while !*stop.borrow() {
            tokio::select! {
                _ = retention.tick() => self.expire_offsets().await,
                changed = stop.changed() => if changed.is_err() { break },
            }
        }
        let _ = follower.await;
    }

    async fn expire_offsets(&self) {
        let topics: Arc<HashSet<String>> = Arc::new(
            self.images
                .borrow()
                .topics()
                .map(|t| t.name.clone())
                .collect(),
        );
        let led: Vec<i32> = {
            let image = self.images.borrow();
            image
                .topic(OFFSETS_TOPIC)
                .map(|t| {
                    t.partitions
                        .iter()
                        .filter(|(_, p)| p.leader == self.node_id)
                        .map(|(i, _)| *i)
                        .collect()
                })
                .unwrap_or_default()
        };
        for partition in led.into_iter().filter(|p| self.runtime.is_loaded(*p)) {
            let topics = Arc::clone(&topics);
            let expired = self
                .runtime
                .write(partition, move |shard, now| {
                    shard.expire_offsets(now, |t| topics.contains(t))
                })
                .await;
            if let Err(e) = expired {
                tracing::warn!(partition, error = %e, "offsets retention write failed");
            }
        }
    }
}

/// An offset commit's codes: those the step accepted take the write's error, if any.
fn commit_codes(
    written: Result<(Vec<i16>, Result<(), CoordinatorError>), CoordinatorError>,
    count: usize,
) -> Vec<i16> {
    let code = |e: &CoordinatorError| match e {
        // Offsets larger than the partition takes: Kafka's name for it.
        CoordinatorError::TooLarge => ResponseError::InvalidCommitOffsetSize.code(),
        other => other.code(),
    };
    match written {
        Ok((codes, Ok(()))) => codes,
        Ok((mut codes, Err(e))) => {
            for c in codes.iter_mut().filter(|c| **c == 0) {
                *c = code(&e);
            }
            codes
        }
        Err(e) => vec![code(&e); count],
    }
}

/// `Some(text)` as the protocol's string type.
pub(crate) fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}
