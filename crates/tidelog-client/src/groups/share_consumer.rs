//! A minimal share-group consumer (KIP-932): it joins with ShareGroupHeartbeat, fetches
//! its assigned partitions from their leaders with ShareFetch in a share session, and
//! accepts everything it was handed by piggy-backing ACCEPT acknowledgements on the next
//! fetch. It does not decode records: it reports how many it acquired, how many of those
//! were redeliveries, and how many the leaders confirmed as accepted. Enough for a
//! benchmark and a smoke test, not a full application consumer.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use kafka_protocol::messages::share_acknowledge_request::{
    self as ack, AcknowledgePartition, AcknowledgeTopic, ShareAcknowledgeRequest,
};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic, ForgottenTopic, ShareFetchRequest,
};
use kafka_protocol::messages::share_group_heartbeat_request::ShareGroupHeartbeatRequest;
use kafka_protocol::messages::{GroupId, TopicName};
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::raw::RawConnection;
use super::text;
use crate::client::Client;
use crate::error::{ClientError, Result};

const HEARTBEAT_VERSION: i16 = 1;
const SHARE_FETCH_VERSION: i16 = 1;
const SHARE_ACKNOWLEDGE_VERSION: i16 = 1;
/// The acknowledge type that marks records delivered for good.
const ACCEPT: i8 = 1;
/// Member epoch that leaves the group; share session epoch that closes the session.
const LEAVE: i32 = -1;

/// What a share consumer subscribes to and how much one fetch may bring.
#[derive(Debug, Clone)]
pub struct ShareConsumerConfig {
    pub group: String,
    pub topics: Vec<String>,
    /// Upper bound on records acquired by one ShareFetch.
    pub max_records: i32,
    /// Upper bound on the bytes of one ShareFetch response.
    pub max_bytes: i32,
    /// How long a leader may hold a ShareFetch waiting for records.
    pub max_wait: Duration,
}

/// What one [`ShareConsumer::poll`] saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SharePoll {
    /// Records acquired by this consumer.
    pub acquired: u64,
    /// Of those, records whose delivery count was above 1 (handed out before).
    pub redelivered: u64,
    /// Records of the previous poll that the leaders confirmed as accepted.
    pub accepted: u64,
}

type PartitionKey = (Uuid, i32);

/// A share session with one leader: its epoch and the acknowledgements it still owes.
struct LeaderSession {
    conn: RawConnection,
    /// 0 opens the session; each later request carries the next epoch.
    epoch: i32,
    partitions: Vec<PartitionKey>,
    /// Acquired records to ACCEPT with the next request, by partition.
    pending: BTreeMap<PartitionKey, Vec<(i64, i64)>>,
    /// Partitions the assignment dropped that the open session still holds.
    forgotten: Vec<PartitionKey>,
}

pub struct ShareConsumer {
    client: Client,
    config: ShareConsumerConfig,
    member_id: String,
    member_epoch: i32,
    coordinator: RawConnection,
    heartbeat_interval: Duration,
    next_heartbeat: Instant,
    /// The assignment last received; fetched by leader.
    sessions: BTreeMap<i32, LeaderSession>,
    topic_names: HashMap<Uuid, String>,
}

/// Merges acquired ranges into ACCEPT batches: sorted, adjacent or overlapping ranges
/// become one `(first, last, [ACCEPT])` batch, so a fetch of a whole batch acknowledges
/// in one entry.
pub fn accept_batches(ranges: &[(i64, i64)]) -> Vec<(i64, i64, Vec<i8>)> {
    let mut sorted: Vec<(i64, i64)> = ranges.iter().copied().filter(|(f, l)| f <= l).collect();
    sorted.sort_unstable();
    let mut merged: Vec<(i64, i64)> = Vec::with_capacity(sorted.len());
    for (first, last) in sorted {
        match merged.last_mut() {
            Some((_, end)) if first <= end.saturating_add(1) => *end = (*end).max(last),
            _ => merged.push((first, last)),
        }
    }
    merged
        .into_iter()
        .map(|(first, last)| (first, last, vec![ACCEPT]))
        .collect()
}

fn record_count(ranges: &[(i64, i64)]) -> u64 {
    ranges
        .iter()
        .map(|(f, l)| u64::try_from(l - f + 1).unwrap_or(0))
        .sum()
}

impl ShareConsumer {
    /// Joins `config.group` (member epoch 0) and opens no session yet: the first
    /// [`ShareConsumer::poll`] does.
    pub async fn join(mut client: Client, config: ShareConsumerConfig) -> Result<ShareConsumer> {
        let mut topic_names = HashMap::new();
        for name in &config.topics {
            let topic = client.topic(name, false).await?;
            topic_names.insert(topic.topic_id, topic.name.clone());
        }
        let coordinator = client.coordinator(&config.group).await?;
        let mut consumer = ShareConsumer {
            client,
            config,
            member_id: Uuid::new_v4().to_string(),
            member_epoch: 0,
            coordinator,
            heartbeat_interval: Duration::from_secs(5),
            next_heartbeat: Instant::now(),
            sessions: BTreeMap::new(),
            topic_names,
        };
        consumer.heartbeat().await?;
        Ok(consumer)
    }

    /// Partitions currently assigned, across leaders.
    pub fn assigned_partitions(&self) -> usize {
        self.sessions.values().map(|s| s.partitions.len()).sum()
    }

    async fn heartbeat(&mut self) -> Result<()> {
        let joining = self.member_epoch == 0;
        let subscribed = joining.then(|| {
            self.config
                .topics
                .iter()
                .map(|t| TopicName(text(t)))
                .collect()
        });
        let request = ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(text(&self.config.group)))
            .with_member_id(text(&self.member_id))
            .with_member_epoch(self.member_epoch)
            .with_subscribed_topic_names(subscribed);
        let response = self
            .coordinator
            .call_retrying(&request, HEARTBEAT_VERSION, |r| r.error_code)
            .await?;
        match ResponseError::try_from_code(response.error_code) {
            // Fenced or forgotten: join again as a new member at the next heartbeat.
            Some(ResponseError::FencedMemberEpoch | ResponseError::UnknownMemberId) => {
                self.member_epoch = 0;
                self.next_heartbeat = Instant::now();
                return Ok(());
            }
            _ => ClientError::check(
                response.error_code,
                response.error_message.as_deref(),
                || format!("share group heartbeat to {}", self.config.group),
            )?,
        }
        self.member_epoch = response.member_epoch;
        let interval = u64::try_from(response.heartbeat_interval_ms.max(100)).unwrap_or(100);
        self.heartbeat_interval = Duration::from_millis(interval);
        self.next_heartbeat = Instant::now() + self.heartbeat_interval;
        if let Some(assignment) = response.assignment {
            let mut assigned = Vec::new();
            for t in assignment.topic_partitions {
                assigned.extend(t.partitions.iter().map(|p| (t.topic_id, *p)));
            }
            self.assign(assigned).await?;
        }
        Ok(())
    }

    /// Spreads the assigned partitions over sessions with their leaders, keeping the
    /// sessions (and their owed acknowledgements) of leaders that still lead some.
    async fn assign(&mut self, assigned: Vec<PartitionKey>) -> Result<()> {
        let mut by_leader: BTreeMap<i32, Vec<PartitionKey>> = BTreeMap::new();
        for (topic_id, partition) in assigned {
            let Some(name) = self.topic_names.get(&topic_id).cloned() else {
                continue;
            };
            let leader = self.client.leader_of(&name, partition).await?;
            by_leader
                .entry(leader)
                .or_default()
                .push((topic_id, partition));
        }
        for session in self.sessions.values_mut() {
            let dropped: Vec<PartitionKey> = session
                .partitions
                .drain(..)
                .filter(|k| !by_leader.values().flatten().any(|a| a == k))
                .collect();
            if session.epoch > 0 {
                session.forgotten.extend(dropped);
            }
        }
        for (leader, partitions) in by_leader {
            if !self.sessions.contains_key(&leader) {
                let broker = self
                    .client
                    .cached_metadata()
                    .brokers
                    .get(&leader)
                    .ok_or_else(|| {
                        ClientError::Protocol(format!("no address for node {leader}"))
                    })?;
                let addr = format!("{}:{}", broker.host, broker.port);
                let conn = RawConnection::connect(&addr, &self.client).await?;
                self.sessions.insert(
                    leader,
                    LeaderSession {
                        conn,
                        epoch: 0,
                        partitions: Vec::new(),
                        pending: BTreeMap::new(),
                        forgotten: Vec::new(),
                    },
                );
            }
            if let Some(session) = self.sessions.get_mut(&leader) {
                session.partitions = partitions;
            }
        }
        Ok(())
    }

    /// Heartbeats when due, then one ShareFetch to each leader, accepting what the
    /// previous poll acquired.
    pub async fn poll(&mut self) -> Result<SharePoll> {
        if Instant::now() >= self.next_heartbeat {
            self.heartbeat().await?;
        }
        let mut seen = SharePoll::default();
        if self.sessions.values().all(|s| s.partitions.is_empty()) {
            // Nothing assigned yet: wait for the group rather than spin.
            tokio::time::sleep(self.config.max_wait.min(self.heartbeat_interval)).await;
            return Ok(seen);
        }
        for session in self.sessions.values_mut() {
            let got = share_fetch(&self.config, &self.member_id, session).await?;
            seen.acquired += got.acquired;
            seen.redelivered += got.redelivered;
            seen.accepted += got.accepted;
        }
        Ok(seen)
    }

    /// Accepts what the last poll acquired, closes every share session (epoch -1) and
    /// leaves the group (member epoch -1); returns the records confirmed accepted.
    pub async fn close(mut self) -> Result<u64> {
        let mut accepted = 0;
        for session in self.sessions.values_mut() {
            if session.epoch == 0 {
                continue;
            }
            accepted += close_session(&self.config.group, &self.member_id, session).await?;
        }
        let leave = ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(text(&self.config.group)))
            .with_member_id(text(&self.member_id))
            .with_member_epoch(LEAVE);
        let response = self.coordinator.call(&leave, HEARTBEAT_VERSION).await?;
        ClientError::check(
            response.error_code,
            response.error_message.as_deref(),
            || format!("leaving share group {}", self.config.group),
        )?;
        Ok(accepted)
    }
}

/// One ShareFetch to a leader: acknowledges the session's pending records, acquires
/// new ones and queues them for the next request.
async fn share_fetch(
    config: &ShareConsumerConfig,
    member_id: &str,
    session: &mut LeaderSession,
) -> Result<SharePoll> {
    // Partitions dropped from the assignment still get the acknowledgements they are owed.
    let mut keys: Vec<PartitionKey> = session.partitions.clone();
    for key in session.pending.keys() {
        if !keys.contains(key) {
            keys.push(*key);
        }
    }
    let owed: BTreeMap<PartitionKey, u64> = session
        .pending
        .iter()
        .map(|(k, ranges)| (*k, record_count(ranges)))
        .collect();
    let mut topics: BTreeMap<Uuid, Vec<FetchPartition>> = BTreeMap::new();
    for key in &keys {
        let batches = accept_batches(session.pending.get(key).map_or(&[][..], Vec::as_slice))
            .into_iter()
            .map(|(first, last, types)| {
                AcknowledgementBatch::default()
                    .with_first_offset(first)
                    .with_last_offset(last)
                    .with_acknowledge_types(types)
            })
            .collect();
        topics.entry(key.0).or_default().push(
            FetchPartition::default()
                .with_partition_index(key.1)
                .with_partition_max_bytes(config.max_bytes)
                .with_acknowledgement_batches(batches),
        );
    }
    // A partition still owed acknowledgements is forgotten by a later fetch, after them.
    let forget: Vec<PartitionKey> = session
        .forgotten
        .iter()
        .filter(|k| !keys.contains(k))
        .copied()
        .collect();
    let mut forgotten_topics: BTreeMap<Uuid, Vec<i32>> = BTreeMap::new();
    for (topic_id, partition) in &forget {
        forgotten_topics
            .entry(*topic_id)
            .or_default()
            .push(*partition);
    }
    let max_wait_ms = i32::try_from(config.max_wait.as_millis()).unwrap_or(i32::MAX);
    let request = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(text(&config.group))))
        .with_member_id(Some(text(member_id)))
        .with_share_session_epoch(session.epoch)
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(config.max_bytes)
        .with_max_records(config.max_records)
        .with_batch_size(config.max_records)
        .with_topics(
            topics
                .into_iter()
                .map(|(topic_id, partitions)| {
                    FetchTopic::default()
                        .with_topic_id(topic_id)
                        .with_partitions(partitions)
                })
                .collect(),
        )
        .with_forgotten_topics_data(
            forgotten_topics
                .into_iter()
                .map(|(topic_id, partitions)| {
                    ForgottenTopic::default()
                        .with_topic_id(topic_id)
                        .with_partitions(partitions)
                })
                .collect(),
        );
    let response = session
        .conn
        .call_for(
            &request,
            SHARE_FETCH_VERSION,
            config.max_wait + Duration::from_secs(30),
        )
        .await?;
    session.pending.clear();
    if response.error_code != 0 {
        // The session is gone (e.g. the leader restarted): the next fetch opens a new
        // one; the unacknowledged records come back after their acquisition lock.
        session.epoch = 0;
        session.forgotten.clear();
        return ClientError::check(
            response.error_code,
            response.error_message.as_deref(),
            || "share fetch".to_string(),
        )
        .map(|()| SharePoll::default());
    }
    session.epoch = session.epoch.checked_add(1).unwrap_or(1);
    session.forgotten.retain(|k| !forget.contains(k));
    let mut seen = SharePoll::default();
    for topic in response.responses {
        for p in topic.partitions {
            let key = (topic.topic_id, p.partition_index);
            if p.acknowledge_error_code == 0 {
                seen.accepted += owed.get(&key).copied().unwrap_or(0);
            }
            if p.error_code != 0 {
                continue;
            }
            for r in p.acquired_records {
                let count = record_count(&[(r.first_offset, r.last_offset)]);
                seen.acquired += count;
                if r.delivery_count > 1 {
                    seen.redelivered += count;
                }
                session
                    .pending
                    .entry(key)
                    .or_default()
                    .push((r.first_offset, r.last_offset));
            }
        }
    }
    Ok(seen)
}

/// ShareAcknowledge with epoch -1: accepts what is owed and closes the session.
async fn close_session(group: &str, member_id: &str, session: &mut LeaderSession) -> Result<u64> {
    let owed: BTreeMap<PartitionKey, u64> = session
        .pending
        .iter()
        .map(|(k, ranges)| (*k, record_count(ranges)))
        .collect();
    let mut topics: BTreeMap<Uuid, Vec<AcknowledgePartition>> = BTreeMap::new();
    for (key, ranges) in &session.pending {
        let batches = accept_batches(ranges)
            .into_iter()
            .map(|(first, last, types)| {
                ack::AcknowledgementBatch::default()
                    .with_first_offset(first)
                    .with_last_offset(last)
                    .with_acknowledge_types(types)
            })
            .collect();
        topics.entry(key.0).or_default().push(
            AcknowledgePartition::default()
                .with_partition_index(key.1)
                .with_acknowledgement_batches(batches),
        );
    }
    let request = ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(text(group))))
        .with_member_id(Some(text(member_id)))
        .with_share_session_epoch(LEAVE)
        .with_topics(
            topics
                .into_iter()
                .map(|(topic_id, partitions)| {
                    AcknowledgeTopic::default()
                        .with_topic_id(topic_id)
                        .with_partitions(partitions)
                })
                .collect(),
        );
    let response = session
        .conn
        .call(&request, SHARE_ACKNOWLEDGE_VERSION)
        .await?;
    session.pending.clear();
    session.forgotten.clear();
    session.epoch = 0;
    ClientError::check(
        response.error_code,
        response.error_message.as_deref(),
        || "closing share session".to_string(),
    )?;
    let mut accepted = 0;
    for topic in response.responses {
        for p in topic.partitions {
            if p.error_code == 0 {
                accepted += owed
                    .get(&(topic.topic_id, p.partition_index))
                    .copied()
                    .unwrap_or(0);
            }
        }
    }
    Ok(accepted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_and_overlapping_ranges_merge_into_one_batch() {
        let batches = accept_batches(&[(10, 19), (0, 4), (5, 9), (30, 30), (18, 25)]);
        assert_eq!(batches, vec![(0, 25, vec![ACCEPT]), (30, 30, vec![ACCEPT])]);
    }

    #[test]
    fn gaps_and_empty_ranges_stay_apart() {
        assert_eq!(accept_batches(&[]), Vec::new());
        assert_eq!(accept_batches(&[(5, 4)]), Vec::new());
        assert_eq!(
            accept_batches(&[(0, 0), (2, 2)]),
            vec![(0, 0, vec![ACCEPT]), (2, 2, vec![ACCEPT])]
        );
        assert_eq!(record_count(&[(0, 0), (2, 5)]), 5);
    }
}
