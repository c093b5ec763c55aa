//! The seed's three calls: produce, fetch, commit.

use bytes::Bytes;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{FindCoordinatorRequest, GroupId, OffsetCommitRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::client::Client;
use crate::connection::Connection;
use crate::error::{ClientError, Result};
use crate::fetch::FetchOptions;
use crate::producer::{Producer, ProducerConfig};
use crate::records::{ConsumedRecord, ProduceRecord};

/// The minimal interface of the design chapter: write a record, read from an offset, save
/// a consumer position. Each call is one round trip (no batching).
#[derive(Debug)]
pub struct SimpleLog {
    producer: Producer,
}

impl SimpleLog {
    /// Connects with default settings (acks=all).
    pub async fn connect(bootstrap: &str) -> Result<SimpleLog> {
        let client = Client::connect_to(bootstrap).await?;
        Ok(SimpleLog {
            producer: Producer::new(client, ProducerConfig::default()),
        })
    }

    /// Appends one record; returns where it landed.
    pub async fn produce(
        &mut self,
        topic: &str,
        key: Option<Bytes>,
        value: Bytes,
    ) -> Result<(i32, i64)> {
        self.producer
            .send(topic, None, ProduceRecord::new(key, Some(value)))
            .await?;
        let written = self.producer.flush().await?;
        written
            .first()
            .map(|m| (m.partition, m.offset))
            .ok_or_else(|| ClientError::Protocol("produce returned no result".into()))
    }

    /// Reads records from `offset` (waits up to 500 ms when there is nothing yet).
    pub async fn fetch(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<Vec<ConsumedRecord>> {
        let fetched = self
            .producer
            .client()
            .fetch(topic, partition, offset, &FetchOptions::default())
            .await?;
        Ok(fetched.records)
    }

    /// Saves `offset` as the group's position (simple commit: generation -1, no member).
    pub async fn commit(
        &mut self,
        group: &str,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<()> {
        let client = self.producer.client();
        let conn = coordinator(client, group).await?;
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(StrBytes::from_static_str(""))
            .with_retention_time_ms(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(partition)
                    .with_committed_offset(offset)
                    .with_committed_leader_epoch(-1)])]);
        let response = conn.send(&request).await?;
        for t in response.topics {
            for p in t.partitions {
                ClientError::check(p.error_code, None, || {
                    format!("commit offset {offset} of {topic}-{partition} for group {group}")
                })?;
            }
        }
        Ok(())
    }
}

/// The group's coordinator, found with FindCoordinator.
async fn coordinator<'a>(client: &'a mut Client, group: &str) -> Result<&'a mut Connection> {
    let request = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_string(group.to_owned()))
        .with_key_type(0);
    let response = client.send_any(&request).await?;
    ClientError::check(
        response.error_code,
        response.error_message.as_ref().map(StrBytes::as_str),
        || format!("find coordinator of group {group}"),
    )?;
    let node = response.node_id.0;
    if !client.cached_metadata().brokers.contains_key(&node) {
        client.refresh_metadata(Some(&[]), false).await?;
    }
    client.broker_connection(node).await
}
