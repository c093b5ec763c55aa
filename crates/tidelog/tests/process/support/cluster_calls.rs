//! Raw Kafka-protocol calls the cluster process tests make, and polling with a bound.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::OffsetCommitResponse;
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequest, OffsetFetchRequestTopic};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
use kafka_protocol::messages::{ApiKey, GroupId, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::Conn;

pub async fn metadata(addr: std::net::SocketAddr) -> MetadataResponse {
    let mut conn = Conn::connect(addr).await;
    conn.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(None),
    )
    .await
}

/// ListOffsets v7 Latest of partition 0 of `topic`: (error code, offset).
pub async fn latest_offset(addr: std::net::SocketAddr, topic: &str) -> (i16, i64) {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, ListOffsetsResponse};
    let mut conn = Conn::connect(addr).await;
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_current_leader_epoch(-1)
                .with_timestamp(-1)])]);
    let resp: ListOffsetsResponse = conn.call(ApiKey::ListOffsets, 7, &req).await;
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.offset)
}

pub async fn create(
    addr: std::net::SocketAddr,
    name: &str,
    partitions: i32,
    replication: i16,
) -> (i16, Option<String>) {
    let mut conn = Conn::connect(addr).await;
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_string())))
            .with_num_partitions(partitions)
            .with_replication_factor(replication)]);
    let resp: CreateTopicsResponse = conn.call(ApiKey::CreateTopics, 7, &req).await;
    let topic = &resp.topics[0];
    (
        topic.error_code,
        topic.error_message.as_ref().map(|m| m.to_string()),
    )
}

/// The group's coordinator as FindCoordinator (v4) answers it: (node id, port).
pub async fn find_coordinator(addr: std::net::SocketAddr, group: &str) -> Option<(i32, i32)> {
    let mut conn = Conn::connect(addr).await;
    let req = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![StrBytes::from_string(group.to_string())]);
    let resp: FindCoordinatorResponse = conn.call(ApiKey::FindCoordinator, 4, &req).await;
    let c = resp.coordinators.first()?;
    (c.error_code == 0).then_some((c.node_id.0, c.port))
}

/// Commits `offset` for rf3[0] (a simple commit, no group membership); the error code.
pub async fn commit_offset(addr: std::net::SocketAddr, group: &str, offset: i64) -> i16 {
    let mut conn = Conn::connect(addr).await;
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("rf3")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    let resp: OffsetCommitResponse = conn.call(ApiKey::OffsetCommit, 8, &req).await;
    resp.topics[0].partitions[0].error_code
}

pub async fn fetch_offset(addr: std::net::SocketAddr, group: &str) -> (i16, i64) {
    let mut conn = Conn::connect(addr).await;
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("rf3")))
            .with_partition_indexes(vec![0])]));
    let resp: OffsetFetchResponse = conn.call(ApiKey::OffsetFetch, 7, &req).await;
    if resp.error_code != 0 {
        return (resp.error_code, -1);
    }
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.committed_offset)
}

/// Java's `String.hashCode`, which places a group on a `__consumer_offsets` partition.
pub fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// Polls `probe` until it returns `Some`, failing after `timeout`.
pub async fn eventually<T, F: Future<Output = Option<T>>>(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn broker_ids(m: &MetadataResponse) -> BTreeSet<i32> {
    m.brokers.iter().map(|b| b.node_id.0).collect()
}

/// Each partition of `topic` as (leader, replicas), if the topic is listed.
pub fn partitions(m: &MetadataResponse, topic: &str) -> Option<Vec<(i32, Vec<i32>)>> {
    let t = m
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))?;
    let mut out: Vec<(i32, i32, Vec<i32>)> = t
        .partitions
        .iter()
        .map(|p| {
            (
                p.partition_index,
                p.leader_id.0,
                p.replica_nodes.iter().map(|r| r.0).collect(),
            )
        })
        .collect();
    out.sort();
    Some(out.into_iter().map(|(_, l, r)| (l, r)).collect())
}
