//! The JSON admin views served on the admin port, for the CLI and for people:
//! `/v1/cluster`, `/v1/topics` and `/v1/groups`. Field names are part of the admin
//! API (docs/operations.md shows them): add fields freely, never rename one.

use std::collections::HashMap;

use serde::Serialize;

use super::cluster::{partition_health, partition_stats, PartitionHealth, PartitionStats};
use super::groups::GroupLag;
use super::{GroupProbe, NodeView};

#[derive(Serialize)]
struct BrokerView {
    node_id: i32,
    host: String,
    port: u16,
    rack: Option<String>,
    fenced: bool,
}

#[derive(Serialize)]
struct ClusterView {
    cluster_id: String,
    node_id: i32,
    metadata_offset: Option<u64>,
    brokers: Vec<BrokerView>,
    topics: usize,
    #[serde(flatten)]
    health: PartitionHealth,
}

/// `/v1/cluster`: who is in the cluster and how healthy its partitions are.
pub(crate) fn cluster(node: &NodeView) -> serde_json::Value {
    let image = node.metadata.image();
    let brokers = image
        .brokers()
        .map(|b| {
            let endpoint = b.listeners.first();
            BrokerView {
                node_id: b.broker_id,
                host: endpoint.map(|e| e.host.clone()).unwrap_or_default(),
                port: endpoint.map_or(0, |e| e.port),
                rack: b.rack.clone(),
                fenced: b.fenced,
            }
        })
        .collect();
    to_json(&ClusterView {
        cluster_id: image.cluster_id().to_string(),
        node_id: node.node_id,
        metadata_offset: image.last_offset(),
        brokers,
        topics: image.topic_count(),
        health: partition_health(node),
    })
}

#[derive(Serialize)]
struct TopicPartitionView {
    partition: i32,
    leader: i32,
    leader_epoch: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
    /// The local log's figures when this node hosts a replica.
    #[serde(flatten)]
    log: Option<LocalLog>,
}

#[derive(Serialize)]
struct LocalLog {
    log_start_offset: i64,
    log_end_offset: i64,
    high_watermark: i64,
    size_bytes: u64,
    segments: usize,
}

#[derive(Serialize)]
struct TopicView {
    name: String,
    topic_id: String,
    internal: bool,
    partitions: Vec<TopicPartitionView>,
}

/// `/v1/topics`: every topic with its partitions' placement and, where hosted here,
/// their offsets and size.
pub(crate) fn topics(node: &NodeView) -> serde_json::Value {
    let image = node.metadata.image();
    let stats: HashMap<(String, i32), PartitionStats> = partition_stats(node)
        .into_iter()
        .map(|s| ((s.topic.clone(), s.partition), s))
        .collect();
    let local = |topic: &str, partition: i32| -> Option<LocalLog> {
        stats
            .get(&(topic.to_string(), partition))
            .map(|s| LocalLog {
                log_start_offset: s.log_start_offset,
                log_end_offset: s.log_end_offset,
                high_watermark: s.high_watermark,
                size_bytes: s.size_bytes,
                segments: s.segments,
            })
    };
    let mut topics: Vec<TopicView> = image
        .topics()
        .map(|t| TopicView {
            name: t.name.clone(),
            topic_id: t.topic_id.to_string(),
            internal: t.is_internal(),
            partitions: t
                .partitions
                .iter()
                .map(|(index, p)| TopicPartitionView {
                    partition: *index,
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    replicas: p.replicas.clone(),
                    isr: p.isr.clone(),
                    log: local(&t.name, *index),
                })
                .collect(),
        })
        .collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    serde_json::json!({ "topics": to_json(&topics) })
}

#[derive(Serialize)]
struct GroupsView {
    groups: Vec<GroupLag>,
}

/// `/v1/groups`: every group this node coordinates, with per-partition lag.
pub(crate) fn groups(node: &NodeView, probe: &GroupProbe) -> serde_json::Value {
    to_json(&GroupsView {
        groups: probe.snapshot(node),
    })
}

fn to_json<T: Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }))
}
