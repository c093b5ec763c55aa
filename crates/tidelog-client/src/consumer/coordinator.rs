//! The classic group protocol from the member's side: JoinGroup + SyncGroup (with the
//! leader's assignment), and one background task per consumer that heartbeats, sends
//! offset commits in order, enforces `max.poll.interval.ms`, and leaves the group.
//!
//! The task owns its own coordinator connection, so heartbeats keep the session alive
//! while the application is busy between polls; it talks to the consumer only through a
//! bounded command channel and a few atomics, and it ends when the channel closes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::heartbeat_request::HeartbeatRequest;
use kafka_protocol::messages::join_group_request::{JoinGroupRequest, JoinGroupRequestProtocol};
use kafka_protocol::messages::leave_group_request::{LeaveGroupRequest, MemberIdentity};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::{SyncGroupRequest, SyncGroupRequestAssignment};
use kafka_protocol::messages::{GroupId, TopicName};
use kafka_protocol::ResponseError;
use tokio::sync::{mpsc, oneshot};

use super::assignors::{self, MemberSubscription};
use super::config::AssignmentStrategy;
use crate::client::Client;
use crate::error::{ClientError, Result};
use crate::groups::{text, RawConnection};
use crate::partition_admin::TopicPartition;

/// Commands queued to the background task; bounded so a caller that commits faster than
/// the coordinator answers waits instead of piling up requests.
pub(crate) const COMMAND_QUEUE: usize = 16;

/// What a member asks for when it joins.
pub(crate) struct JoinParams<'a> {
    pub(crate) group: &'a str,
    pub(crate) instance_id: Option<&'a str>,
    pub(crate) topics: &'a [String],
    pub(crate) strategies: &'a [AssignmentStrategy],
    pub(crate) session_timeout: Duration,
    pub(crate) rebalance_timeout: Duration,
    /// A cooperative member's partitions and the generation it got them in: sent so
    /// that the leader moves a partition only once its owner gave it up.
    pub(crate) cooperative: Option<(&'a [TopicPartition], i32)>,
    /// `client.rack`, sent in the subscription (v3).
    pub(crate) rack: Option<&'a str>,
}

/// The outcome of one join: this member's place in the new generation.
#[derive(Debug, Clone)]
pub(crate) struct Joined {
    pub(crate) member_id: String,
    pub(crate) generation: i32,
    pub(crate) assignment: Vec<TopicPartition>,
}

fn millis(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

/// Where the leader learns partition counts: the caller's client, or one connected when
/// first needed (the join task of a [`crate::Consumer`] has none of its own).
pub(crate) enum Metadata<'a> {
    Client(&'a mut Client),
    Connect(Box<crate::client::ClientConfig>, Option<Box<Client>>),
}

impl Metadata<'_> {
    async fn partition_count(&mut self, topic: &str) -> Result<i32> {
        let client = match self {
            Metadata::Client(client) => &mut **client,
            Metadata::Connect(config, slot) => match slot {
                Some(client) => client,
                None => slot.insert(Box::new(Client::connect((**config).clone()).await?)),
            },
        };
        client.partition_count(topic, false).await
    }
}

/// Joins (or rejoins) the group and returns this generation's assignment. `member_id`
/// is kept across calls: the coordinator hands it out first (MEMBER_ID_REQUIRED) and
/// forgets it when the session expired (UNKNOWN_MEMBER_ID).
pub(crate) async fn join_and_sync(
    metadata: &mut Metadata<'_>,
    conn: &mut RawConnection,
    p: &JoinParams<'_>,
    member_id: &mut String,
) -> Result<Joined> {
    let subscription = assignors::encode_subscription(p.topics, p.cooperative, p.rack);
    // The coordinator holds JoinGroup until every member rejoined or the rebalance
    // timeout passed; give it that long plus the usual request time.
    let join_limit = p.rebalance_timeout + Duration::from_secs(30);
    for _ in 0..20 {
        let request = JoinGroupRequest::default()
            .with_group_id(GroupId(text(p.group)))
            .with_session_timeout_ms(millis(p.session_timeout))
            .with_rebalance_timeout_ms(millis(p.rebalance_timeout))
            .with_member_id(text(member_id))
            .with_group_instance_id(p.instance_id.map(text))
            .with_protocol_type(text("consumer"))
            .with_protocols(
                p.strategies
                    .iter()
                    .map(|s| {
                        JoinGroupRequestProtocol::default()
                            .with_name(text(s.protocol_name()))
                            .with_metadata(subscription.clone())
                    })
                    .collect(),
            );
        let joined = conn.call_for(&request, 5, join_limit).await?;
        match ResponseError::try_from_code(joined.error_code) {
            Some(ResponseError::MemberIdRequired) => {
                *member_id = joined.member_id.to_string();
                continue;
            }
            Some(ResponseError::UnknownMemberId) => {
                member_id.clear();
                continue;
            }
            Some(ResponseError::CoordinatorLoadInProgress | ResponseError::RebalanceInProgress) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            _ => {}
        }
        ClientError::check(joined.error_code, None, || {
            format!("join group {}", p.group)
        })?;
        *member_id = joined.member_id.to_string();
        let protocol = joined
            .protocol_name
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        let assignments = if joined.leader == joined.member_id {
            let strategy = p
                .strategies
                .iter()
                .copied()
                .find(|s| s.protocol_name() == protocol)
                .ok_or_else(|| {
                    ClientError::Protocol(format!(
                        "the coordinator chose unknown assignor {protocol:?}"
                    ))
                })?;
            let members: Vec<MemberSubscription> = joined
                .members
                .iter()
                .map(|m| {
                    MemberSubscription::decode(
                        m.member_id.to_string(),
                        m.group_instance_id.as_ref().map(ToString::to_string),
                        &m.metadata,
                    )
                })
                .collect();
            let mut counts = BTreeMap::new();
            for topic in members.iter().flat_map(|m| &m.topics) {
                if !counts.contains_key(topic) {
                    // A subscribed topic that does not exist yet is simply not assigned.
                    if let Ok(n) = metadata.partition_count(topic).await {
                        counts.insert(topic.clone(), n);
                    }
                }
            }
            let version = i16::from(strategy.is_cooperative());
            assignors::assign(strategy, &members, &counts)
                .into_iter()
                .map(|(member, assigned)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(text(&member))
                        .with_assignment(assignors::encode_assignment(&assigned, version))
                })
                .collect()
        } else {
            Vec::new()
        };
        let sync = SyncGroupRequest::default()
            .with_group_id(GroupId(text(p.group)))
            .with_generation_id(joined.generation_id)
            .with_member_id(text(member_id))
            .with_group_instance_id(p.instance_id.map(text))
            .with_protocol_type(Some(text("consumer")))
            .with_protocol_name(Some(text(&protocol)))
            .with_assignments(assignments);
        let synced = conn.call_for(&sync, 5, join_limit).await?;
        if synced.error_code == ResponseError::RebalanceInProgress.code() {
            continue;
        }
        ClientError::check(synced.error_code, None, || {
            format!("sync group {}", p.group)
        })?;
        return Ok(Joined {
            member_id: member_id.clone(),
            generation: joined.generation_id,
            assignment: assignors::decode_assignment(&synced.assignment),
        });
    }
    Err(ClientError::Protocol(format!(
        "group {} kept rebalancing through 20 join attempts",
        p.group
    )))
}

/// Commits `offsets` (next offset to read) as `member_id` in `generation`.
pub(crate) async fn commit(
    conn: &mut RawConnection,
    group: &str,
    member_id: &str,
    generation: i32,
    offsets: &[(TopicPartition, i64)],
) -> Result<()> {
    let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for ((topic, partition), offset) in offsets {
        by_topic.entry(topic).or_default().push(
            OffsetCommitRequestPartition::default()
                .with_partition_index(*partition)
                .with_committed_offset(*offset)
                .with_committed_metadata(Some(text(""))),
        );
    }
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(text(member_id))
        .with_retention_time_ms(-1)
        .with_topics(
            by_topic
                .into_iter()
                .map(|(t, ps)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(text(t)))
                        .with_partitions(ps)
                })
                .collect(),
        );
    let response = conn.call(&request, 7).await?;
    for t in response.topics {
        for p in t.partitions {
            ClientError::check(p.error_code, None, || {
                format!(
                    "commit {}-{} for group {group}",
                    t.name.0.as_str(),
                    p.partition_index
                )
            })?;
        }
    }
    Ok(())
}

/// Sends LeaveGroup for a dynamic member (static members keep their place on purpose).
pub(crate) async fn leave(conn: &mut RawConnection, group: &str, member_id: &str) -> Result<()> {
    let request = LeaveGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_members(vec![
            MemberIdentity::default().with_member_id(text(member_id))
        ]);
    let response = conn.call(&request, 3).await?;
    let code = response
        .members
        .first()
        .map_or(response.error_code, |m| m.error_code);
    ClientError::check(code, None, || format!("leave group {group}"))
}

/// State the consumer and its background task share.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Set by the task when the coordinator announced a rebalance, the session is gone,
    /// or the coordinator was lost; cleared by the consumer when it rejoined.
    pub(crate) rejoin_needed: AtomicBool,
    /// Set when the coordinator connection broke or moved: the consumer finds it again.
    pub(crate) coordinator_lost: AtomicBool,
    /// Set when the coordinator forgot this member or its generation (or the member left
    /// after `max.poll.interval.ms`): a cooperative member then drops its partitions
    /// without a commit before it rejoins.
    pub(crate) member_lost: AtomicBool,
    /// Milliseconds since `epoch` of the last `poll`.
    last_poll_ms: AtomicU64,
    epoch: Instant,
}

impl Shared {
    pub(crate) fn new() -> Arc<Shared> {
        Arc::new(Shared {
            rejoin_needed: AtomicBool::new(false),
            coordinator_lost: AtomicBool::new(false),
            member_lost: AtomicBool::new(false),
            last_poll_ms: AtomicU64::new(0),
            epoch: Instant::now(),
        })
    }

    pub(crate) fn polled(&self) {
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_poll_ms.store(now, Ordering::Relaxed);
    }

    pub(crate) fn since_poll(&self) -> Duration {
        let last = Duration::from_millis(self.last_poll_ms.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }
}

/// Who the member is in the current generation (`generation < 0`: not joined).
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) member_id: String,
    pub(crate) generation: i32,
}

pub(crate) enum Command {
    /// Use this coordinator connection from now on.
    Connection(RawConnection),
    /// The member joined a new generation (or left one: generation -1).
    Session(Session),
    /// Commit, then report on `reply` (dropped by an asynchronous caller).
    Commit {
        offsets: Vec<(TopicPartition, i64)>,
        session: Session,
        reply: Option<oneshot::Sender<Result<()>>>,
    },
    /// Committed offsets as the member at its epoch (a consumer-protocol member).
    FetchOffsets {
        partitions: Vec<TopicPartition>,
        reply: oneshot::Sender<Result<BTreeMap<TopicPartition, i64>>>,
    },
    /// Leave the group (a consumer-protocol member: `kip848.rs`), then stop.
    Leave { reply: oneshot::Sender<()> },
}

/// Settings of the background task.
pub(crate) struct TaskSettings {
    pub(crate) group: String,
    pub(crate) heartbeat_interval: Duration,
    pub(crate) max_poll_interval: Duration,
    pub(crate) is_static: bool,
}

/// The background task: ends when every command sender is dropped.
pub(crate) async fn run(
    settings: TaskSettings,
    shared: Arc<Shared>,
    mut commands: mpsc::Receiver<Command>,
) {
    let mut conn: Option<RawConnection> = None;
    let mut session = Session {
        member_id: String::new(),
        generation: -1,
    };
    let mut tick = tokio::time::interval(settings.heartbeat_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            command = commands.recv() => match command {
                None => return,
                Some(Command::Connection(c)) => conn = Some(c),
                Some(Command::Session(s)) => session = s,
                Some(Command::FetchOffsets { reply, .. }) => {
                    let _ = reply.send(Err(ClientError::Protocol(
                        "a classic member fetches offsets as a non-member".into())));
                }
                // The classic member leaves from `close` over its own connection.
                Some(Command::Leave { reply }) => {
                    let _ = reply.send(());
                    return;
                }
                Some(Command::Commit { offsets, session: as_member, reply }) => {
                    let result = match conn.as_mut() {
                        Some(c) => commit(c, &settings.group, &as_member.member_id,
                                          as_member.generation, &offsets).await,
                        None => Err(ClientError::Protocol("no coordinator connection".into())),
                    };
                    if let Err(e) = &result {
                        note_failure(&shared, e);
                        if reply.is_none() {
                            tracing::warn!(group = %settings.group, error = %e, "asynchronous commit failed");
                        }
                    }
                    if let Some(reply) = reply {
                        let _ = reply.send(result);
                    }
                }
            },
            _ = tick.tick() => {
                let (Some(c), true) = (conn.as_mut(), session.generation >= 0) else { continue };
                if shared.since_poll() > settings.max_poll_interval {
                    // The application stopped polling: give its partitions to the others
                    // now rather than let them sit until the session times out.
                    tracing::warn!(group = %settings.group, interval = ?settings.max_poll_interval,
                        "poll() was not called within max.poll.interval.ms; leaving the group");
                    if !settings.is_static {
                        let _ = leave(c, &settings.group, &session.member_id).await;
                    }
                    session.generation = -1;
                    shared.member_lost.store(true, Ordering::Relaxed);
                    shared.rejoin_needed.store(true, Ordering::Relaxed);
                    continue;
                }
                let request = HeartbeatRequest::default()
                    .with_group_id(GroupId(text(&settings.group)))
                    .with_generation_id(session.generation)
                    .with_member_id(text(&session.member_id));
                match c.call(&request, 3).await {
                    Ok(r) => match ResponseError::try_from_code(r.error_code) {
                        None => {}
                        Some(ResponseError::RebalanceInProgress) => {
                            shared.rejoin_needed.store(true, Ordering::Relaxed);
                        }
                        Some(ResponseError::IllegalGeneration | ResponseError::UnknownMemberId
                            | ResponseError::FencedInstanceId) => {
                            shared.member_lost.store(true, Ordering::Relaxed);
                            shared.rejoin_needed.store(true, Ordering::Relaxed);
                        }
                        Some(e) => note_failure(&shared, &ClientError::Broker {
                            context: "heartbeat".into(), error: e, message: None }),
                    },
                    Err(e) => note_failure(&shared, &e),
                }
            }
        }
    }
}

/// Whether `e` means the coordinator connection is gone: it broke, or the coordinator
/// moved. Both protocols then find the coordinator again.
pub(super) fn coordinator_lost(e: &ClientError) -> bool {
    let moved = matches!(
        e.response_error(),
        Some(ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable)
    );
    let broken = matches!(
        e,
        ClientError::Io { .. } | ClientError::Closed { .. } | ClientError::Timeout { .. }
    );
    moved || broken
}

fn note_failure(shared: &Shared, e: &ClientError) {
    if coordinator_lost(e) {
        shared.coordinator_lost.store(true, Ordering::Relaxed);
        shared.rejoin_needed.store(true, Ordering::Relaxed);
    }
    if matches!(
        e.response_error(),
        Some(
            ResponseError::IllegalGeneration
                | ResponseError::UnknownMemberId
                | ResponseError::RebalanceInProgress
        )
    ) {
        shared.rejoin_needed.store(true, Ordering::Relaxed);
    }
}
