//! Consumer groups from the operator's side: list, describe, committed offsets, lag,
//! offset resets and deletion. Group requests go to the group's coordinator, found with
//! FindCoordinator.
//!
//! Lag is measured, not guessed: committed offsets and log ends sampled through a
//! window give the consumed rate and the trend d(lag)/dt between the commits observed
//! (see `groups/rates.rs`); the time lag is the age of the oldest unread record, the
//! drain time the lag divided by the consumed rate, and the retention headroom how long
//! until retention deletes the oldest record the group has not read.

mod lag;
mod member;
mod rates;
pub(crate) mod raw;
mod share;
mod share_consumer;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::consumer_group_describe_request::ConsumerGroupDescribeRequest;
use kafka_protocol::messages::consumer_group_describe_response;
use kafka_protocol::messages::delete_groups_request::DeleteGroupsRequest;
use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequest;
use kafka_protocol::messages::GroupId;
use kafka_protocol::protocol::StrBytes;

pub use lag::{LagWindow, PartitionLag};
pub use member::Membership;
pub use rates::{CommitRates, Sample};
pub(crate) use raw::RawConnection;
pub use share::{ShareGroupDescription, ShareGroupMember, SharePartitionOffset};
pub use share_consumer::{accept_batches, ShareConsumer, ShareConsumerConfig, SharePoll};

use crate::client::Client;
use crate::cluster::retrying;
use crate::error::{ClientError, Result};

/// One line of `list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: String,
    /// "consumer" for consumer groups; empty for groups that only store offsets.
    pub protocol_type: String,
    pub state: String,
    /// "classic", or "consumer" for a KIP-848 group (ListGroups v5).
    pub group_type: String,
}

/// A member and the partitions it was assigned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub assignment: Vec<(String, Vec<i32>)>,
    /// A KIP-848 member's epoch and target assignment (`None` in a classic group).
    pub consumer: Option<ConsumerMemberState>,
}

/// What a consumer-protocol (KIP-848) member has beyond a classic one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerMemberState {
    pub member_epoch: i32,
    pub target: Vec<(String, Vec<i32>)>,
}

/// The epochs of a consumer-protocol (KIP-848) group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupEpochs {
    pub group_epoch: i32,
    pub assignment_epoch: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub group_id: String,
    pub state: String,
    pub protocol_type: String,
    /// The assignor chosen for the current generation.
    pub protocol: String,
    pub members: Vec<GroupMember>,
    /// Set for a consumer-protocol (KIP-848) group, whose protocol is its assignor.
    pub consumer: Option<ConsumerGroupEpochs>,
}

impl Client {
    /// Every group in the cluster, asked of each broker.
    async fn list_groups_once(&mut self) -> Result<Vec<GroupListing>> {
        let addresses: Vec<String> = self
            .refresh_metadata(Some(&[]), false)
            .await?
            .brokers
            .values()
            .map(|b| b.address())
            .collect();
        let mut out = Vec::new();
        for addr in addresses {
            let mut conn = RawConnection::connect(&addr, self).await?;
            let response = conn
                .call_retrying(&ListGroupsRequest::default(), 5, |r| r.error_code)
                .await?;
            ClientError::check(response.error_code, None, || "list groups".to_string())?;
            out.extend(response.groups.into_iter().map(|g| GroupListing {
                group_id: g.group_id.0.to_string(),
                protocol_type: g.protocol_type.to_string(),
                state: g.group_state.to_string(),
                group_type: g.group_type.to_string(),
            }));
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(out)
    }

    pub(crate) async fn coordinator(&mut self, group: &str) -> Result<RawConnection> {
        let request = FindCoordinatorRequest::default()
            .with_key(text(group))
            .with_key_type(0);
        let mut attempts = 0;
        loop {
            let response = self.send_any(&request).await?;
            match ClientError::check(response.error_code, None, || {
                format!("find coordinator of group {group}")
            }) {
                Err(e) if retriable(&e) && attempts < 20 => {
                    attempts += 1;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(e),
                Ok(()) => {
                    let addr = format!("{}:{}", response.host.as_str(), response.port);
                    return RawConnection::connect(&addr, self).await;
                }
            }
        }
    }

    /// State, protocol and members (with their assignments) of a group.
    async fn describe_group_once(&mut self, group: &str) -> Result<GroupDescription> {
        let mut conn = self.coordinator(group).await?;
        let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(text(group))]);
        let response = conn
            .call_retrying(&request, 5, |r| {
                r.groups.first().map_or(0, |g| g.error_code)
            })
            .await?;
        let g = response
            .groups
            .into_iter()
            .next()
            .ok_or_else(|| ClientError::Protocol("describe groups response is empty".into()))?;
        ClientError::check(g.error_code, None, || format!("describe group {group}"))?;
        let classic = GroupDescription {
            group_id: group.to_string(),
            state: g.group_state.to_string(),
            protocol_type: g.protocol_type.to_string(),
            protocol: g.protocol_data.to_string(),
            members: g
                .members
                .into_iter()
                .map(|m| GroupMember {
                    member_id: m.member_id.to_string(),
                    instance_id: m.group_instance_id.map(|s| s.to_string()),
                    client_id: m.client_id.to_string(),
                    client_host: m.client_host.to_string(),
                    assignment: parse_assignment(&m.member_assignment),
                    consumer: None,
                })
                .collect(),
            consumer: None,
        };
        // DescribeGroups knows only classic groups: one it calls Dead may be a
        // consumer-protocol group.
        if classic.state == "Dead" && classic.members.is_empty() {
            if let Some(d) = describe_consumer_group(&mut conn, group).await? {
                return Ok(d);
            }
        }
        Ok(classic)
    }

    /// Every committed offset of a group: (topic, partition) -> next offset to read.
    async fn committed_offsets_once(
        &mut self,
        group: &str,
    ) -> Result<BTreeMap<(String, i32), i64>> {
        let mut conn = self.coordinator(group).await?;
        let request = OffsetFetchRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(None);
        let response = conn.call_retrying(&request, 7, |r| r.error_code).await?;
        ClientError::check(response.error_code, None, || {
            format!("offsets of group {group}")
        })?;
        let mut out = BTreeMap::new();
        for t in response.topics {
            for p in t.partitions {
                ClientError::check(p.error_code, None, || {
                    format!("offset of {}-{}", t.name.0.as_str(), p.partition_index)
                })?;
                if p.committed_offset >= 0 {
                    out.insert(
                        (t.name.0.to_string(), p.partition_index),
                        p.committed_offset,
                    );
                }
            }
        }
        Ok(out)
    }

    /// Commits offsets for a group without members (generation -1), as an operator's
    /// reset does. The coordinator refuses it while the group has members.
    async fn commit_offsets_once(
        &mut self,
        group: &str,
        offsets: &[(String, i32, i64)],
    ) -> Result<()> {
        let offsets: Vec<_> = offsets
            .iter()
            .map(|(topic, partition, offset)| ((topic.clone(), *partition), *offset))
            .collect();
        let mut conn = self.coordinator(group).await?;
        crate::consumer::coordinator::commit(&mut conn, group, "", -1, &offsets).await
    }

    /// Deletes a group without members, with its committed offsets.
    async fn delete_group_once(&mut self, group: &str) -> Result<()> {
        let mut conn = self.coordinator(group).await?;
        let request = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(text(group))]);
        let response = conn.call(&request, 2).await?;
        let code = response.results.first().map_or(0, |r| r.error_code);
        ClientError::check(code, None, || format!("delete group {group}"))
    }
}

/// The group calls, each retried while it fails with a retriable error
/// ([`ClientError::is_retriable`]) within the client's API timeout.
impl Client {
    /// Every group in the cluster, asked of each broker.
    pub async fn list_groups(&mut self) -> Result<Vec<GroupListing>> {
        retrying!(self, self.list_groups_once().await)
    }

    /// State, protocol and members (with their assignments) of a group.
    pub async fn describe_group(&mut self, group: &str) -> Result<GroupDescription> {
        retrying!(self, self.describe_group_once(group).await)
    }

    /// Every committed offset of a group: (topic, partition) -> next offset to read.
    pub async fn committed_offsets(&mut self, group: &str) -> Result<BTreeMap<(String, i32), i64>> {
        retrying!(self, self.committed_offsets_once(group).await)
    }

    /// Commits offsets for a group without members (generation -1), as an operator's
    /// reset does. The coordinator refuses it while the group has members.
    pub async fn commit_offsets(
        &mut self,
        group: &str,
        offsets: &[(String, i32, i64)],
    ) -> Result<()> {
        retrying!(self, self.commit_offsets_once(group, offsets).await)
    }

    /// Deletes a group without members, with its committed offsets.
    pub async fn delete_group(&mut self, group: &str) -> Result<()> {
        retrying!(self, self.delete_group_once(group).await)
    }
}

fn retriable(e: &ClientError) -> bool {
    e.response_error().is_some_and(|r| {
        matches!(
            r,
            kafka_protocol::ResponseError::CoordinatorLoadInProgress
                | kafka_protocol::ResponseError::CoordinatorNotAvailable
                | kafka_protocol::ResponseError::NotCoordinator
        )
    })
}

pub(crate) fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Parses a consumer-protocol assignment: `i16 version, i32 topic count, per topic
/// (string topic, i32 count, i32 partitions...)`, user data after. Anything
/// malformed yields what was parsed so far.
pub fn parse_assignment(bytes: &Bytes) -> Vec<(String, Vec<i32>)> {
    let mut r = Cursor(bytes);
    let mut out = Vec::new();
    let (Some(_version), Some(topics)) = (r.i16(), r.i32()) else {
        return out;
    };
    for _ in 0..topics.max(0) {
        let Some(topic) = r.string() else { break };
        let Some(count) = r.i32() else { break };
        let mut partitions = Vec::new();
        for _ in 0..count.max(0) {
            match r.i32() {
                Some(p) => partitions.push(p),
                None => break,
            }
        }
        out.push((topic, partitions));
    }
    out
}

pub(crate) struct Cursor<'a>(pub(crate) &'a [u8]);

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    pub(crate) fn i16(&mut self) -> Option<i16> {
        self.take(2).map(|b| i16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn i32(&mut self) -> Option<i32> {
        self.take(4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn string(&mut self) -> Option<String> {
        let len = usize::try_from(self.i16()?).ok()?;
        self.take(len)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }
}

/// ConsumerGroupDescribe of `group`: `None` when it is no consumer-protocol group (or
/// the broker does not know the API).
async fn describe_consumer_group(
    conn: &mut RawConnection,
    group: &str,
) -> Result<Option<GroupDescription>> {
    let request =
        ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(group))]);
    let Ok(response) = conn
        .call_retrying(&request, 0, |r| {
            r.groups.first().map_or(0, |g| g.error_code)
        })
        .await
    else {
        return Ok(None);
    };
    let Some(g) = response.groups.into_iter().next() else {
        return Ok(None);
    };
    if g.error_code == kafka_protocol::ResponseError::GroupIdNotFound.code() {
        return Ok(None);
    }
    ClientError::check(g.error_code, None, || {
        format!("describe consumer group {group}")
    })?;
    let named = |a: &consumer_group_describe_response::Assignment| -> Vec<(String, Vec<i32>)> {
        a.topic_partitions
            .iter()
            .map(|t| (t.topic_name.0.to_string(), t.partitions.clone()))
            .collect()
    };
    Ok(Some(GroupDescription {
        group_id: group.to_string(),
        state: g.group_state.to_string(),
        protocol_type: "consumer".to_string(),
        protocol: g.assignor_name.to_string(),
        members: g
            .members
            .iter()
            .map(|m| GroupMember {
                member_id: m.member_id.to_string(),
                instance_id: m.instance_id.as_ref().map(|s| s.to_string()),
                client_id: m.client_id.to_string(),
                client_host: m.client_host.to_string(),
                assignment: named(&m.assignment),
                consumer: Some(ConsumerMemberState {
                    member_epoch: m.member_epoch,
                    target: named(&m.target_assignment),
                }),
            })
            .collect(),
        consumer: Some(ConsumerGroupEpochs {
            group_epoch: g.group_epoch,
            assignment_epoch: g.assignment_epoch,
        }),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignment_parses_topics_and_partitions() {
        let mut b = vec![0, 1, 0, 0, 0, 2];
        for (topic, parts) in [("a", vec![0i32, 2]), ("bb", vec![1])] {
            b.extend((topic.len() as i16).to_be_bytes());
            b.extend(topic.as_bytes());
            b.extend((parts.len() as i32).to_be_bytes());
            for p in parts {
                b.extend(p.to_be_bytes());
            }
        }
        b.extend([255, 255, 255, 255]); // null user data
        let parsed = parse_assignment(&Bytes::from(b));
        assert_eq!(
            parsed,
            vec![("a".to_string(), vec![0, 2]), ("bb".to_string(), vec![1])]
        );
        // Truncated: keeps what was whole, no panic.
        assert_eq!(
            parse_assignment(&Bytes::from_static(&[0, 1, 0, 0, 0, 9, 0])),
            vec![]
        );
        assert_eq!(parse_assignment(&Bytes::new()), vec![]);
    }
}
