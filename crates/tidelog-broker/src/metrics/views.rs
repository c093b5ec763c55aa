//! The JSON admin views served on the admin port, for the CLI and for people:
//! `/v1/cluster`, `/v1/topics`, `/v1/groups` and `/v1/transactions`, each showing
//! what the asker's [`Access`] may describe. Field names are part of the admin
//! API (docs/operations.md shows them): add fields freely, never rename one.

use std::collections::HashMap;

use serde::Serialize;

use super::cluster::{partition_health, partition_stats, PartitionHealth, PartitionStats};
use super::groups::GroupLag;
use super::{GroupProbe, Metrics, NodeView};
use crate::auth::Access;
use crate::txn::{TxnMeta, TxnState};
use tidelog_controller::acl::AclOperation;

#[derive(Serialize)]
struct BrokerView {
    node_id: i32,
    host: String,
    port: u16,
    rack: Option<String>,
    fenced: bool,
    /// Partitions whose leader it is, by the metadata image.
    partitions_led: usize,
    /// Record-batch bytes produced to it and fetched from it since it started: this
    /// node's counted now, another's as its last heartbeat to the controller leader
    /// reported them (every `broker.heartbeat.interval.ms`); null until one did.
    bytes_in_total: Option<u64>,
    bytes_out_total: Option<u64>,
    /// When the broker read those counters (its clock, Unix ms): two looks give its
    /// rates.
    traffic_sampled_at_ms: Option<i64>,
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

/// `/v1/cluster`: who is in the cluster (every principal sees the brokers, as in
/// Metadata) and how healthy the partitions of the topics `access` may describe are.
pub(crate) fn cluster(node: &NodeView, metrics: &Metrics, access: &Access) -> serde_json::Value {
    let mut traffic = metrics.topics.cluster_traffic();
    traffic.insert(node.node_id, metrics.topics.node_traffic());
    let image = node.metadata.image();
    let describable = |topic: &str| access.topic(AclOperation::Describe, topic);
    let mut led: HashMap<i32, usize> = HashMap::new();
    for t in image.topics() {
        for p in t.partitions.values() {
            *led.entry(p.leader).or_default() += 1;
        }
    }
    let brokers = image
        .brokers()
        .map(|b| {
            let endpoint = b.listeners.first();
            let counted = traffic.get(&b.broker_id);
            BrokerView {
                node_id: b.broker_id,
                host: endpoint.map(|e| e.host.clone()).unwrap_or_default(),
                port: endpoint.map_or(0, |e| e.port),
                rack: b.rack.clone(),
                fenced: b.fenced,
                partitions_led: led.get(&b.broker_id).copied().unwrap_or(0),
                bytes_in_total: counted.map(|t| t.bytes_in),
                bytes_out_total: counted.map(|t| t.bytes_out),
                traffic_sampled_at_ms: counted.map(|t| t.sampled_at_ms),
            }
        })
        .collect();
    to_json(&ClusterView {
        cluster_id: image.cluster_id().to_string(),
        node_id: node.node_id,
        metadata_offset: image.last_offset(),
        brokers,
        topics: image.topics().filter(|t| describable(&t.name)).count(),
        health: partition_health(node, &describable),
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
    /// The topic's explicit config overrides (defaults are the broker's); null when
    /// the asker may not DESCRIBE_CONFIGS it.
    configs: Option<std::collections::BTreeMap<String, String>>,
    partitions: Vec<TopicPartitionView>,
}

/// `/v1/topics`: every topic `access` may describe (as Metadata lists them) with its
/// partitions' placement and, where hosted here, their offsets and size; its config
/// overrides where it may also DESCRIBE_CONFIGS (as DescribeConfigs), else null.
pub(crate) fn topics(node: &NodeView, access: &Access) -> serde_json::Value {
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
        .filter(|t| access.topic(AclOperation::Describe, &t.name))
        .map(|t| TopicView {
            name: t.name.clone(),
            topic_id: t.topic_id.to_string(),
            internal: t.is_internal(),
            configs: access
                .topic(AclOperation::DescribeConfigs, &t.name)
                .then(|| t.configs.clone()),
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

/// `/v1/groups`: every group this node coordinates that `access` may describe (as
/// ListGroups lists them), with its members and, for the topics it may describe (as
/// OffsetFetch answers), per-partition lag.
pub(crate) fn groups(node: &NodeView, probe: &GroupProbe, access: &Access) -> serde_json::Value {
    let groups = probe
        .snapshot(node)
        .into_iter()
        .filter(|g| access.group(AclOperation::Describe, &g.group))
        .map(|mut g| {
            g.partitions
                .retain(|p| access.topic(AclOperation::Describe, &p.topic));
            g
        })
        .collect();
    to_json(&GroupsView { groups })
}

/// Open transactions listed at most (the oldest first).
const MAX_TRANSACTIONS: usize = 1000;

#[derive(Serialize)]
struct TransactionView {
    transactional_id: String,
    producer_id: i64,
    producer_epoch: i16,
    state: &'static str,
    timeout_ms: i32,
    started_ms: i64,
    age_seconds: f64,
    partitions: Vec<TransactionPartition>,
}

#[derive(Serialize)]
struct TransactionPartition {
    topic: String,
    partition: i32,
}

/// `/v1/transactions`: the transactions open on coordinators this node leads (begun and
/// not yet completed), the oldest first, with their age.
pub(crate) fn transactions(
    listed: Vec<(String, TxnMeta)>,
    now_ms: i64,
    access: &Access,
) -> serde_json::Value {
    let mut open: Vec<TransactionView> = listed
        .into_iter()
        .filter(|(id, _)| access.transactional_id(AclOperation::Describe, id))
        .filter(|(_, m)| {
            m.start_ms >= 0
                && matches!(
                    m.state,
                    TxnState::Ongoing
                        | TxnState::PrepareCommit
                        | TxnState::PrepareAbort
                        | TxnState::PrepareEpochFence
                )
        })
        .map(|(id, m)| TransactionView {
            transactional_id: id,
            producer_id: m.producer_id,
            producer_epoch: m.epoch,
            state: m.state.name(),
            timeout_ms: m.timeout_ms,
            started_ms: m.start_ms,
            age_seconds: now_ms.saturating_sub(m.start_ms).max(0) as f64 / 1000.0,
            partitions: m
                .partitions
                .into_iter()
                .filter(|(topic, _)| access.topic(AclOperation::Describe, topic))
                .map(|(topic, partition)| TransactionPartition { topic, partition })
                .collect(),
        })
        .collect();
    open.sort_by_key(|t| t.started_ms);
    let truncated = open.len() > MAX_TRANSACTIONS;
    open.truncate(MAX_TRANSACTIONS);
    serde_json::json!({ "truncated": truncated, "transactions": to_json(&open) })
}

pub(crate) fn to_json<T: Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }))
}
