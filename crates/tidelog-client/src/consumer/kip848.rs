//! The KIP-848 consumer group protocol from the member's side: one background task per
//! consumer sends ConsumerGroupHeartbeat at the interval the coordinator returns, keeps
//! the member epoch, and hands each assignment the coordinator sends to the consumer,
//! which reconciles it from `poll` (`incremental.rs`) and reports back what it owns.
//!
//! The task runs where the classic heartbeats run, for the same reason: the session
//! stays alive while the application is busy between polls. It also sends the offset
//! commits, so that they carry the member epoch of the latest heartbeat response, which
//! is the only epoch the coordinator accepts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kafka_protocol::messages::consumer_group_heartbeat_request::{
    ConsumerGroupHeartbeatRequest, TopicPartitions,
};
use kafka_protocol::messages::{GroupId, TopicName};
use kafka_protocol::ResponseError;
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;
use uuid::Uuid;

use super::coordinator::{self, Command, Shared};
use super::member_offsets;
use crate::client::{Client, ClientConfig};
use crate::error::{ClientError, Result};
use crate::groups::{text, RawConnection};

/// ConsumerGroupHeartbeat v1: the member id is made by the client (KIP-1082).
const HEARTBEAT_VERSION: i16 = 1;
/// The epoch a dynamic member leaves with.
const LEAVE_EPOCH: i32 = -1;
/// The epoch a static member leaves with: it keeps its place for the session timeout.
const STATIC_LEAVE_EPOCH: i32 = -2;
/// Wait before retrying after the coordinator could not be reached or refused.
const RETRY: Duration = Duration::from_millis(500);

/// A partition by topic id, as the coordinator names it.
pub(crate) type IdPartition = (Uuid, i32);

/// An assignment the coordinator sent and the consumer has yet to reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// Which membership it belongs to (see [`Inner::joins`]).
    pub(crate) join: u64,
    pub(crate) partitions: BTreeSet<IdPartition>,
}

#[derive(Debug, Default)]
struct Inner {
    member_id: String,
    epoch: i32,
    /// Counts (re)joins at epoch 0, so that a reconciliation of an assignment from an
    /// earlier membership is not reported as owned in the new one.
    joins: u64,
    target: Option<Target>,
    /// What the consumer reconciled: sent as the owned partitions.
    owned: BTreeSet<IdPartition>,
    /// The membership was lost (fenced, forgotten, or left for max.poll.interval.ms):
    /// the consumer drops its partitions without committing.
    lost: bool,
    topics: Vec<String>,
    /// A subscription by regular expression (the broker resolves it), instead of names.
    regex: Option<String>,
    /// Whether a regex was ever sent: leaving it is then announced with an empty one.
    sent_regex: bool,
    /// A refusal that retrying does not cure, for `poll` to return.
    failure: Option<(ResponseError, Option<String>)>,
}

/// What the consumer and its heartbeat task share.
#[derive(Debug, Default)]
pub(crate) struct Membership {
    inner: Mutex<Inner>,
    /// Wakes the task to heartbeat now (an assignment was reconciled).
    wake: Notify,
}

impl Membership {
    pub(crate) fn new() -> Arc<Membership> {
        let m = Membership::default();
        m.lock().member_id = Uuid::new_v4().to_string();
        Arc::new(m)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain data behind, still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn identity(&self) -> (String, i32) {
        let inner = self.lock();
        (inner.member_id.clone(), inner.epoch)
    }

    pub(crate) fn set_topics(&self, topics: &[String]) {
        let mut inner = self.lock();
        if inner.topics != topics {
            inner.topics = topics.to_vec();
            drop(inner);
            self.wake.notify_one();
        }
    }

    pub(crate) fn set_regex(&self, regex: Option<&str>) {
        let mut inner = self.lock();
        if inner.regex.as_deref() != regex {
            inner.regex = regex.map(str::to_owned);
            drop(inner);
            self.wake.notify_one();
        }
    }

    pub(crate) fn take_target(&self) -> Option<Target> {
        self.lock().target.take()
    }

    /// Puts back a target not fully reconciled, unless a newer one arrived meanwhile.
    pub(crate) fn retry_target(&self, target: Target) {
        let mut inner = self.lock();
        if inner.target.is_none() && inner.joins == target.join {
            inner.target = Some(target);
        }
    }

    pub(crate) fn take_lost(&self) -> bool {
        std::mem::take(&mut self.lock().lost)
    }

    pub(crate) fn take_failure(&self) -> Option<(ResponseError, Option<String>)> {
        self.lock().failure.take()
    }

    /// The consumer now owns `owned` (of the membership `join`): acknowledge it at once.
    pub(crate) fn set_owned(&self, join: u64, owned: BTreeSet<IdPartition>) {
        let mut inner = self.lock();
        if inner.joins != join {
            return;
        }
        inner.owned = owned;
        drop(inner);
        self.wake.notify_one();
    }

    /// Drops the membership: rejoin at epoch 0 owning nothing.
    fn lose(&self) {
        let mut inner = self.lock();
        inner.epoch = 0;
        inner.joins = inner.joins.wrapping_add(1);
        inner.target = None;
        inner.owned.clear();
        inner.lost = true;
    }
}

/// Settings of the heartbeat task.
pub(crate) struct Settings {
    pub(crate) group: String,
    pub(crate) instance_id: Option<String>,
    pub(crate) rebalance_timeout: Duration,
    pub(crate) assignor: Option<String>,
    /// `client.rack`, sent as the member's rack id for rack-aware broker assignors.
    pub(crate) rack: Option<String>,
    pub(crate) heartbeat_interval: Duration,
    pub(crate) max_poll_interval: Duration,
    pub(crate) client: ClientConfig,
}

/// The coordinator connection, found again (through a client of the task's own) when
/// it broke or moved.
struct Link {
    client: Option<Client>,
    conn: Option<RawConnection>,
}

impl Link {
    async fn get(&mut self, settings: &Settings) -> Result<&mut RawConnection> {
        if self.conn.is_none() {
            let client = match &mut self.client {
                Some(c) => c,
                None => self
                    .client
                    .insert(Client::connect(settings.client.clone()).await?),
            };
            self.conn = Some(client.coordinator(&settings.group).await?);
        }
        self.conn
            .as_mut()
            .ok_or_else(|| ClientError::Protocol("no coordinator connection".into()))
    }

    /// Forgets the connection when `e` says it broke or the coordinator moved.
    fn note(&mut self, e: &ClientError) {
        if coordinator::coordinator_lost(e) {
            self.conn = None;
        }
    }
}

/// The task: ends after a Leave command or when every command sender is dropped.
pub(crate) async fn run(
    settings: Settings,
    shared: Arc<Shared>,
    state: Arc<Membership>,
    mut commands: mpsc::Receiver<Command>,
) {
    let mut link = Link {
        client: None,
        conn: None,
    };
    let mut interval = settings.heartbeat_interval;
    let mut next = Instant::now();
    loop {
        tokio::select! {
            command = commands.recv() => match command {
                None => return,
                Some(Command::Connection(c)) => link.conn = Some(c),
                Some(Command::Session(_)) => {}
                Some(Command::Commit { offsets, reply, .. }) => {
                    let (member, epoch) = state.identity();
                    let result = match link.get(&settings).await {
                        Ok(c) => coordinator::commit(c, &settings.group, &member, epoch, &offsets).await,
                        Err(e) => Err(e),
                    };
                    if let Err(e) = &result {
                        link.note(e);
                        if reply.is_none() {
                            tracing::warn!(group = %settings.group, error = %e, "asynchronous commit failed");
                        }
                    }
                    if let Some(reply) = reply {
                        let _ = reply.send(result);
                    }
                }
                Some(Command::FetchOffsets { partitions, reply }) => {
                    let (member, epoch) = state.identity();
                    let result = match link.get(&settings).await {
                        Ok(c) => member_offsets::fetch(c, &settings.group, &member, epoch, &partitions).await,
                        Err(e) => Err(e),
                    };
                    if let Err(e) = &result {
                        link.note(e);
                    }
                    let _ = reply.send(result);
                }
                Some(Command::Leave { reply }) => {
                    leave(&settings, &state, &mut link).await;
                    let _ = reply.send(());
                    return;
                }
            },
            () = state.wake.notified() => next = Instant::now(),
            () = tokio::time::sleep_until(next) => {
                next = Instant::now() + heartbeat(&settings, &shared, &state, &mut link, &mut interval).await;
            }
        }
    }
}

/// One heartbeat; returns how long to wait for the next.
async fn heartbeat(
    settings: &Settings,
    shared: &Shared,
    state: &Membership,
    link: &mut Link,
    interval: &mut Duration,
) -> Duration {
    if shared.since_poll() > settings.max_poll_interval {
        if state.identity().1 > 0 {
            // The application stopped polling: give its partitions to the others now
            // rather than when the session times out; the next poll rejoins.
            tracing::warn!(group = %settings.group, interval = ?settings.max_poll_interval,
                "poll() was not called within max.poll.interval.ms; leaving the group");
            leave(settings, state, link).await;
        }
        return *interval;
    }
    let request = {
        let mut inner = state.lock();
        if inner.topics.is_empty() && inner.regex.is_none() {
            return *interval;
        }
        let request = request(settings, &inner);
        inner.sent_regex |= inner.regex.is_some();
        request
    };
    let conn = match link.get(settings).await {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(group = %settings.group, error = %e, "no group coordinator yet");
            return RETRY;
        }
    };
    let response = match conn.call(&request, HEARTBEAT_VERSION).await {
        Ok(r) => r,
        Err(e) => {
            link.note(&e);
            return RETRY;
        }
    };
    match ResponseError::try_from_code(response.error_code) {
        None => {}
        Some(ResponseError::FencedMemberEpoch | ResponseError::UnknownMemberId) => {
            tracing::info!(group = %settings.group, error_code = response.error_code,
                "the coordinator dropped this member; rejoining at epoch 0");
            state.lose();
            return Duration::ZERO;
        }
        Some(
            e @ (ResponseError::NotCoordinator
            | ResponseError::CoordinatorNotAvailable
            | ResponseError::CoordinatorLoadInProgress
            | ResponseError::UnreleasedInstanceId),
        ) => {
            link.note(&ClientError::Broker {
                context: "consumer group heartbeat".into(),
                error: e,
                message: None,
            });
            return RETRY;
        }
        Some(e) => {
            let message = response.error_message.as_ref().map(ToString::to_string);
            tracing::warn!(group = %settings.group, error = ?e, ?message, "consumer group heartbeat refused");
            state.lock().failure = Some((e, message));
            return (*interval).max(RETRY);
        }
    }
    let millis = u64::try_from(response.heartbeat_interval_ms).unwrap_or(0);
    if millis > 0 {
        *interval = Duration::from_millis(millis);
    }
    let mut inner = state.lock();
    inner.epoch = response.member_epoch;
    if let Some(assignment) = response.assignment {
        let partitions = assignment
            .topic_partitions
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)))
            .collect();
        inner.target = Some(Target {
            join: inner.joins,
            partitions,
        });
    }
    *interval
}

/// A full heartbeat (subscription, rebalance timeout and owned partitions every time):
/// the coordinator then always answers with the assignment, so a lost response costs
/// one interval, not the membership.
fn request(settings: &Settings, inner: &Inner) -> ConsumerGroupHeartbeatRequest {
    let mut owned: BTreeMap<Uuid, Vec<i32>> = BTreeMap::new();
    if inner.epoch > 0 {
        for (topic, partition) in &inner.owned {
            owned.entry(*topic).or_default().push(*partition);
        }
    }
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(&settings.group)))
        .with_member_id(text(&inner.member_id))
        .with_member_epoch(inner.epoch)
        .with_instance_id(settings.instance_id.as_deref().map(text))
        .with_rebalance_timeout_ms(
            i32::try_from(settings.rebalance_timeout.as_millis()).unwrap_or(i32::MAX),
        )
        .with_subscribed_topic_names(Some(
            inner.topics.iter().map(|t| TopicName(text(t))).collect(),
        ))
        .with_subscribed_topic_regex(match &inner.regex {
            Some(regex) => Some(text(regex)),
            None => inner.sent_regex.then(|| text("")),
        })
        .with_server_assignor(settings.assignor.as_deref().map(text))
        .with_rack_id(settings.rack.as_deref().map(text))
        .with_topic_partitions(Some(
            owned
                .into_iter()
                .map(|(topic_id, partitions)| {
                    TopicPartitions::default()
                        .with_topic_id(topic_id)
                        .with_partitions(partitions)
                })
                .collect(),
        ))
}

/// Leaves with epoch -1 (-2 for a static member), when a member of the group.
async fn leave(settings: &Settings, state: &Membership, link: &mut Link) {
    let (member_id, epoch) = state.identity();
    if epoch <= 0 {
        state.lose();
        return;
    }
    let leave_epoch = if settings.instance_id.is_some() {
        STATIC_LEAVE_EPOCH
    } else {
        LEAVE_EPOCH
    };
    let request = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(&settings.group)))
        .with_member_id(text(&member_id))
        .with_member_epoch(leave_epoch)
        .with_instance_id(settings.instance_id.as_deref().map(text));
    let outcome = match link.get(settings).await {
        Ok(c) => c.call(&request, HEARTBEAT_VERSION).await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(r) => {
            if let Err(e) = ClientError::check(r.error_code, None, || {
                format!("leave group {}", settings.group)
            }) {
                tracing::warn!(error = %e, "leaving the group failed");
            }
        }
        Err(e) => tracing::warn!(error = %e, "leaving the group failed"),
    }
    state.lose();
}

#[cfg(test)]
#[path = "kip848_tests.rs"]
mod tests;
