//! Membership of a classic consumer group (JoinGroup, SyncGroup, Heartbeat, LeaveGroup),
//! enough for a command-line consumer: it joins, is assigned partitions (computing
//! the range assignment itself when it is the leader), commits as a member, notices a
//! rebalance from its heartbeat, and leaves.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::heartbeat_request::HeartbeatRequest;
use kafka_protocol::messages::join_group_request::{JoinGroupRequest, JoinGroupRequestProtocol};
use kafka_protocol::messages::leave_group_request::{LeaveGroupRequest, MemberIdentity};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::{SyncGroupRequest, SyncGroupRequestAssignment};
use kafka_protocol::messages::{GroupId, TopicName};
use kafka_protocol::ResponseError;

use super::raw::RawConnection;
use super::{parse_assignment, text, Cursor};
use crate::client::Client;
use crate::error::{ClientError, Result};

const SESSION_TIMEOUT_MS: i32 = 10_000;
const REBALANCE_TIMEOUT_MS: i32 = 30_000;
/// A third of the session timeout, as Kafka's consumer heartbeats.
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(3);
const PROTOCOL: &str = "range";

/// This process's place in a group, for one generation.
pub struct Membership {
    conn: RawConnection,
    group: String,
    topic: String,
    member_id: String,
    generation: i32,
    /// Partitions of the topic assigned to this member.
    pub partitions: Vec<i32>,
    last_heartbeat: Instant,
}

impl Client {
    /// Joins `group` subscribed to `topic` and waits for this generation's assignment.
    pub async fn join_group(&mut self, group: &str, topic: &str) -> Result<Membership> {
        let conn = self.coordinator(group).await?;
        let mut m = Membership {
            conn,
            group: group.to_string(),
            topic: topic.to_string(),
            member_id: String::new(),
            generation: -1,
            partitions: Vec::new(),
            last_heartbeat: Instant::now(),
        };
        self.rejoin(&mut m).await?;
        Ok(m)
    }

    /// Joins again (after a rebalance was announced) and takes the new assignment.
    pub async fn rejoin(&mut self, m: &mut Membership) -> Result<()> {
        let subscription = encode_subscription(&m.topic);
        loop {
            let request = JoinGroupRequest::default()
                .with_group_id(GroupId(text(&m.group)))
                .with_session_timeout_ms(SESSION_TIMEOUT_MS)
                .with_rebalance_timeout_ms(REBALANCE_TIMEOUT_MS)
                .with_member_id(text(&m.member_id))
                .with_protocol_type(text("consumer"))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(text(PROTOCOL))
                    .with_metadata(subscription.clone())]);
            let joined = m.conn.call_retrying(&request, 5, |r| r.error_code).await?;
            let code = joined.error_code;
            if code == ResponseError::MemberIdRequired.code() {
                // Kafka hands out the member id first, then expects the join again.
                m.member_id = joined.member_id.to_string();
                continue;
            }
            if code == ResponseError::UnknownMemberId.code() {
                m.member_id.clear();
                continue;
            }
            ClientError::check(code, None, || format!("join group {}", m.group))?;
            m.member_id = joined.member_id.to_string();
            m.generation = joined.generation_id;
            let assignments = if joined.leader == joined.member_id {
                let mut subscriptions = Vec::new();
                for member in &joined.members {
                    subscriptions.push((
                        member.member_id.to_string(),
                        parse_subscription(&member.metadata),
                    ));
                }
                let mut counts = BTreeMap::new();
                for topic in subscriptions.iter().flat_map(|(_, ts)| ts) {
                    if !counts.contains_key(topic) {
                        let n = self.partition_count(topic, false).await.unwrap_or(0);
                        counts.insert(topic.clone(), n);
                    }
                }
                range_assign(&subscriptions, &counts)
                    .into_iter()
                    .map(|(member, assigned)| {
                        SyncGroupRequestAssignment::default()
                            .with_member_id(text(&member))
                            .with_assignment(encode_assignment(&assigned))
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let sync = SyncGroupRequest::default()
                .with_group_id(GroupId(text(&m.group)))
                .with_generation_id(m.generation)
                .with_member_id(text(&m.member_id))
                .with_protocol_type(Some(text("consumer")))
                .with_protocol_name(Some(text(PROTOCOL)))
                .with_assignments(assignments);
            let synced = m.conn.call_retrying(&sync, 5, |r| r.error_code).await?;
            if synced.error_code == ResponseError::RebalanceInProgress.code() {
                continue;
            }
            ClientError::check(synced.error_code, None, || {
                format!("sync group {}", m.group)
            })?;
            m.partitions = parse_assignment(&synced.assignment)
                .into_iter()
                .filter(|(t, _)| *t == m.topic)
                .flat_map(|(_, ps)| ps)
                .collect();
            m.partitions.sort_unstable();
            m.last_heartbeat = Instant::now();
            return Ok(());
        }
    }
}

impl Membership {
    /// Heartbeats when one is due; `Ok(true)` when the group is rebalancing and this
    /// member must commit and rejoin.
    pub async fn heartbeat_if_due(&mut self) -> Result<bool> {
        if self.last_heartbeat.elapsed() < HEARTBEAT_INTERVAL {
            return Ok(false);
        }
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_generation_id(self.generation)
            .with_member_id(text(&self.member_id));
        let response = self.conn.call(&request, 3).await?;
        self.last_heartbeat = Instant::now();
        let code = response.error_code;
        if code == ResponseError::RebalanceInProgress.code()
            || code == ResponseError::IllegalGeneration.code()
            || code == ResponseError::UnknownMemberId.code()
        {
            return Ok(true);
        }
        ClientError::check(code, None, || format!("heartbeat to group {}", self.group))?;
        Ok(false)
    }

    /// Commits `(partition, next offset)` of the topic as this member and generation.
    pub async fn commit(&mut self, offsets: &[(i32, i64)]) -> Result<()> {
        if offsets.is_empty() {
            return Ok(());
        }
        let partitions = offsets
            .iter()
            .map(|&(p, o)| {
                OffsetCommitRequestPartition::default()
                    .with_partition_index(p)
                    .with_committed_offset(o)
                    .with_committed_metadata(Some(text("")))
            })
            .collect();
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_generation_id_or_member_epoch(self.generation)
            .with_member_id(text(&self.member_id))
            .with_retention_time_ms(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(text(&self.topic)))
                .with_partitions(partitions)]);
        let response = self.conn.call(&request, 7).await?;
        for t in response.topics {
            for p in t.partitions {
                ClientError::check(p.error_code, None, || {
                    format!(
                        "commit {}-{} for group {}",
                        self.topic, p.partition_index, self.group
                    )
                })?;
            }
        }
        Ok(())
    }

    /// Leaves the group, so the others are rebalanced at once rather than after the
    /// session timeout.
    pub async fn leave(mut self) -> Result<()> {
        let request = LeaveGroupRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_members(vec![
                MemberIdentity::default().with_member_id(text(&self.member_id))
            ]);
        let response = self.conn.call(&request, 3).await?;
        ClientError::check(response.error_code, None, || {
            format!("leave group {}", self.group)
        })
    }
}

/// ConsumerProtocolSubscription v0: the topics, no user data.
fn encode_subscription(topic: &str) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b.put_i32(1);
    put_string(&mut b, topic);
    b.put_i32(-1);
    b.freeze()
}

/// The topics of any version of ConsumerProtocolSubscription (they come first).
fn parse_subscription(bytes: &Bytes) -> Vec<String> {
    let mut r = Cursor(bytes);
    let (Some(_version), Some(count)) = (r.i16(), r.i32()) else {
        return Vec::new();
    };
    (0..count.max(0)).map_while(|_| r.string()).collect()
}

/// ConsumerProtocolAssignment v0.
fn encode_assignment(assigned: &BTreeMap<String, Vec<i32>>) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b.put_i32(i32::try_from(assigned.len()).unwrap_or(0));
    for (topic, partitions) in assigned {
        put_string(&mut b, topic);
        b.put_i32(i32::try_from(partitions.len()).unwrap_or(0));
        for p in partitions {
            b.put_i32(*p);
        }
    }
    b.put_i32(-1);
    b.freeze()
}

fn put_string(b: &mut BytesMut, s: &str) {
    b.put_i16(i16::try_from(s.len()).unwrap_or(i16::MAX));
    b.put_slice(&s.as_bytes()[..s.len().min(i16::MAX as usize)]);
}

/// Kafka's range assignor: per topic, its subscribers sorted by member id each get a
/// consecutive run of partitions, the first ones one more when it does not divide.
fn range_assign(
    subscriptions: &[(String, Vec<String>)],
    partition_counts: &BTreeMap<String, i32>,
) -> BTreeMap<String, BTreeMap<String, Vec<i32>>> {
    let mut out: BTreeMap<String, BTreeMap<String, Vec<i32>>> = subscriptions
        .iter()
        .map(|(m, _)| (m.clone(), BTreeMap::new()))
        .collect();
    for (topic, &count) in partition_counts {
        let mut members: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, ts)| ts.contains(topic))
            .map(|(m, _)| m)
            .collect();
        members.sort();
        let n = i32::try_from(members.len()).unwrap_or(i32::MAX).max(1);
        let (each, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, member) in (0..).zip(members) {
            let take = each + i32::from(i < extra);
            let run: Vec<i32> = (next..next + take).collect();
            next += take;
            if let Some(assigned) = out.get_mut(member) {
                assigned.insert(topic.clone(), run);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_gives_the_first_members_the_remainder() {
        let subs = vec![
            ("b".to_string(), vec!["t".to_string()]),
            ("a".to_string(), vec!["t".to_string(), "u".to_string()]),
        ];
        let counts = BTreeMap::from([("t".to_string(), 5), ("u".to_string(), 2)]);
        let out = range_assign(&subs, &counts);
        assert_eq!(out["a"]["t"], vec![0, 1, 2]);
        assert_eq!(out["b"]["t"], vec![3, 4]);
        assert_eq!(out["a"]["u"], vec![0, 1]);
        assert!(!out["b"].contains_key("u"));
    }

    #[test]
    fn subscription_and_assignment_round_trip() {
        assert_eq!(
            parse_subscription(&encode_subscription("orders")),
            vec!["orders"]
        );
        let assigned = BTreeMap::from([("orders".to_string(), vec![0, 2])]);
        assert_eq!(
            parse_assignment(&encode_assignment(&assigned)),
            vec![("orders".to_string(), vec![0, 2])]
        );
    }
}
