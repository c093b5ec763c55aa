//! Share groups (KIP-932) from the operator's side: a group's members and epochs
//! (ShareGroupDescribe), and its share partitions' start offsets, read, reset and
//! deleted (DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets).
//! All go to the group's coordinator; offsets change only while the group is empty.

use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_request::{
    DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::describe_share_group_offsets_request::{
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsRequestGroup,
};
use kafka_protocol::messages::share_group_describe_request::ShareGroupDescribeRequest;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, GroupId, TopicName};

use super::text;
use crate::client::Client;
use crate::cluster::retrying;
use crate::error::{ClientError, Result};

/// A share group's state, epochs and members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGroupDescription {
    pub group_id: String,
    /// Kafka's share-group states: Empty, Stable, Dead.
    pub state: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: Vec<ShareGroupMember>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGroupMember {
    pub member_id: String,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed: Vec<String>,
    /// (topic, partitions): every member of a share group may be assigned the same
    /// partitions; the partition's leader shares the records out.
    pub assignment: Vec<(String, Vec<i32>)>,
}

/// One share partition of a group: where its in-flight window starts (`None`: no
/// state yet) and the leader epoch that last wrote its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharePartitionOffset {
    pub topic: String,
    pub partition: i32,
    pub start_offset: Option<i64>,
    pub leader_epoch: Option<i32>,
    /// The broker's lag of the share partition (DescribeShareGroupOffsets v1,
    /// KIP-1226): records up to the high watermark not yet delivered for good. `None`
    /// when the broker does not know it or does not speak v1.
    pub lag: Option<i64>,
}

/// The first DescribeShareGroupOffsets version with the lag (KIP-1226).
const OFFSETS_LAG_VERSION: i16 = 1;

impl Client {
    async fn describe_share_group_once(&mut self, group: &str) -> Result<ShareGroupDescription> {
        let mut conn = self.coordinator(group).await?;
        let request =
            ShareGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(group))]);
        let response = conn
            .call_retrying(&request, 1, |r| {
                r.groups.first().map_or(0, |g| g.error_code)
            })
            .await?;
        let g = response.groups.into_iter().next().ok_or_else(|| {
            ClientError::Protocol("share group describe response is empty".into())
        })?;
        ClientError::check(g.error_code, g.error_message.as_deref(), || {
            format!("describe share group {group}")
        })?;
        Ok(ShareGroupDescription {
            group_id: group.to_string(),
            state: g.group_state.to_string(),
            group_epoch: g.group_epoch,
            assignment_epoch: g.assignment_epoch,
            members: g
                .members
                .into_iter()
                .map(|m| ShareGroupMember {
                    member_id: m.member_id.to_string(),
                    member_epoch: m.member_epoch,
                    client_id: m.client_id.to_string(),
                    client_host: m.client_host.to_string(),
                    subscribed: m
                        .subscribed_topic_names
                        .iter()
                        .map(|t| t.0.to_string())
                        .collect(),
                    assignment: m
                        .assignment
                        .topic_partitions
                        .into_iter()
                        .map(|t| (t.topic_name.0.to_string(), t.partitions))
                        .collect(),
                })
                .collect(),
        })
    }

    async fn share_group_offsets_once(&mut self, group: &str) -> Result<Vec<SharePartitionOffset>> {
        let mut conn = self.coordinator(group).await?;
        // The raw connection has no version table: ask the coordinator whether it
        // answers the lag (v1), else use v0 (Kafka 4.0-4.1, older tidelog).
        let version = match conn
            .call(&ApiVersionsRequest::default(), 0)
            .await?
            .api_keys
            .iter()
            .find(|k| k.api_key == ApiKey::DescribeShareGroupOffsets as i16)
        {
            Some(k) if k.max_version >= OFFSETS_LAG_VERSION => OFFSETS_LAG_VERSION,
            _ => 0,
        };
        let request = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
            DescribeShareGroupOffsetsRequestGroup::default()
                .with_group_id(GroupId(text(group)))
                .with_topics(None),
        ]);
        let response = conn
            .call_retrying(&request, version, |r| {
                r.groups.first().map_or(0, |g| g.error_code)
            })
            .await?;
        let g =
            response.groups.into_iter().next().ok_or_else(|| {
                ClientError::Protocol("share group offsets response is empty".into())
            })?;
        ClientError::check(g.error_code, g.error_message.as_deref(), || {
            format!("offsets of share group {group}")
        })?;
        let mut out = Vec::new();
        for t in g.topics {
            let topic = t.topic_name.0.to_string();
            for p in t.partitions {
                ClientError::check(p.error_code, p.error_message.as_deref(), || {
                    format!("share offset of {topic}-{}", p.partition_index)
                })?;
                out.push(SharePartitionOffset {
                    topic: topic.clone(),
                    partition: p.partition_index,
                    start_offset: (p.start_offset >= 0).then_some(p.start_offset),
                    leader_epoch: (p.leader_epoch >= 0).then_some(p.leader_epoch),
                    lag: (p.lag >= 0).then_some(p.lag),
                });
            }
        }
        out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(out)
    }

    async fn alter_share_group_offsets_once(
        &mut self,
        group: &str,
        topic: &str,
        offsets: &[(i32, i64)],
    ) -> Result<()> {
        let mut conn = self.coordinator(group).await?;
        let request = AlterShareGroupOffsetsRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(vec![AlterShareGroupOffsetsRequestTopic::default()
                .with_topic_name(TopicName(text(topic)))
                .with_partitions(
                    offsets
                        .iter()
                        .map(|(p, start)| {
                            AlterShareGroupOffsetsRequestPartition::default()
                                .with_partition_index(*p)
                                .with_start_offset(*start)
                        })
                        .collect(),
                )]);
        let response = conn.call_retrying(&request, 0, |r| r.error_code).await?;
        ClientError::check(
            response.error_code,
            response.error_message.as_deref(),
            || format!("reset share group {group}"),
        )?;
        for t in response.responses {
            for p in t.partitions {
                ClientError::check(p.error_code, p.error_message.as_deref(), || {
                    format!(
                        "reset {}-{} for share group {group}",
                        t.topic_name.0.as_str(),
                        p.partition_index
                    )
                })?;
            }
        }
        Ok(())
    }

    async fn delete_share_group_offsets_once(
        &mut self,
        group: &str,
        topics: &[String],
    ) -> Result<()> {
        let mut conn = self.coordinator(group).await?;
        let request = DeleteShareGroupOffsetsRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        DeleteShareGroupOffsetsRequestTopic::default()
                            .with_topic_name(TopicName(text(t)))
                    })
                    .collect(),
            );
        let response = conn.call_retrying(&request, 0, |r| r.error_code).await?;
        ClientError::check(
            response.error_code,
            response.error_message.as_deref(),
            || format!("delete offsets of share group {group}"),
        )?;
        for t in response.responses {
            ClientError::check(t.error_code, t.error_message.as_deref(), || {
                format!(
                    "delete {} offsets of share group {group}",
                    t.topic_name.0.as_str()
                )
            })?;
        }
        Ok(())
    }
}

/// The share-group calls, each retried while it fails with a retriable error within
/// the client's API timeout.
impl Client {
    /// A share group's state, epochs and members (GROUP_ID_NOT_FOUND: none, or a group
    /// of another kind).
    pub async fn describe_share_group(&mut self, group: &str) -> Result<ShareGroupDescription> {
        retrying!(self, self.describe_share_group_once(group).await)
    }

    /// Every share partition the group has state for, with its start offset.
    pub async fn share_group_offsets(&mut self, group: &str) -> Result<Vec<SharePartitionOffset>> {
        retrying!(self, self.share_group_offsets_once(group).await)
    }

    /// Sets the start offsets of `topic`'s share partitions `offsets` (partition, start)
    /// for an empty share group.
    pub async fn alter_share_group_offsets(
        &mut self,
        group: &str,
        topic: &str,
        offsets: &[(i32, i64)],
    ) -> Result<()> {
        retrying!(
            self,
            self.alter_share_group_offsets_once(group, topic, offsets)
                .await
        )
    }

    /// Deletes an empty share group's state for whole topics: it starts them again from
    /// `share.auto.offset.reset`.
    pub async fn delete_share_group_offsets(
        &mut self,
        group: &str,
        topics: &[String],
    ) -> Result<()> {
        retrying!(
            self,
            self.delete_share_group_offsets_once(group, topics).await
        )
    }
}
