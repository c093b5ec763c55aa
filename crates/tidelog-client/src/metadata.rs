//! The client's view of the cluster, built from Metadata responses.

use std::collections::BTreeMap;

use kafka_protocol::messages::MetadataResponse;
use kafka_protocol::ResponseError;
use uuid::Uuid;

/// One broker as Metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerMetadata {
    /// Node id.
    pub node_id: i32,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: i32,
    /// Rack, when configured.
    pub rack: Option<String>,
}

impl BrokerMetadata {
    /// `host:port`, bracketing IPv6 literals.
    pub fn address(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// One partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadata {
    /// Partition index.
    pub partition: i32,
    /// Leader node id, -1 when there is none.
    pub leader: i32,
    /// Leader epoch, -1 when unknown.
    pub leader_epoch: i32,
    /// All replicas, preferred leader first.
    pub replicas: Vec<i32>,
    /// In-sync replicas.
    pub isr: Vec<i32>,
    /// Replicas that are offline.
    pub offline: Vec<i32>,
    /// Per-partition error (e.g. LEADER_NOT_AVAILABLE), if any.
    pub error: Option<ResponseError>,
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    /// Topic name.
    pub name: String,
    /// Topic id (nil when the broker predates topic ids).
    pub topic_id: Uuid,
    /// Internal topics (`__consumer_offsets`, ...).
    pub is_internal: bool,
    /// Partitions sorted by index.
    pub partitions: Vec<PartitionMetadata>,
}

impl TopicMetadata {
    /// The partition with index `partition`.
    pub fn partition(&self, partition: i32) -> Option<&PartitionMetadata> {
        self.partitions.iter().find(|p| p.partition == partition)
    }

    /// Number of partitions, as the partitioner needs it.
    pub fn partition_count(&self) -> i32 {
        i32::try_from(self.partitions.len()).unwrap_or(i32::MAX)
    }
}

/// Brokers, controller and the topics learnt so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterMetadata {
    /// Cluster id, when the broker reports one.
    pub cluster_id: Option<String>,
    /// Node id of the controller (where admin requests go), -1 when unknown.
    pub controller_id: i32,
    /// Brokers by node id.
    pub brokers: BTreeMap<i32, BrokerMetadata>,
    /// Topics by name.
    pub topics: BTreeMap<String, TopicMetadata>,
}

/// A topic-level error from a Metadata response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TopicError {
    pub(crate) name: String,
    pub(crate) error: ResponseError,
}

impl ClusterMetadata {
    /// Folds a response in. With `all_topics` the topic list is replaced, otherwise only the
    /// returned topics are updated. Topics the broker reported with an error are dropped
    /// from the cache and returned.
    pub(crate) fn apply(
        &mut self,
        response: MetadataResponse,
        all_topics: bool,
    ) -> Vec<TopicError> {
        self.cluster_id = response.cluster_id.map(|s| s.as_str().to_owned());
        self.controller_id = response.controller_id.0;
        self.brokers = response
            .brokers
            .into_iter()
            .map(|b| {
                let broker = BrokerMetadata {
                    node_id: b.node_id.0,
                    host: b.host.as_str().to_owned(),
                    port: b.port,
                    rack: b.rack.map(|r| r.as_str().to_owned()),
                };
                (broker.node_id, broker)
            })
            .collect();
        if all_topics {
            self.topics.clear();
        }
        let mut errors = Vec::new();
        for t in response.topics {
            let Some(name) = t.name.map(|n| n.0.as_str().to_owned()) else {
                continue;
            };
            if let Some(error) = ResponseError::try_from_code(t.error_code) {
                self.topics.remove(&name);
                errors.push(TopicError { name, error });
                continue;
            }
            let mut partitions: Vec<PartitionMetadata> = t
                .partitions
                .into_iter()
                .map(|p| PartitionMetadata {
                    partition: p.partition_index,
                    leader: p.leader_id.0,
                    leader_epoch: p.leader_epoch,
                    replicas: p.replica_nodes.into_iter().map(|b| b.0).collect(),
                    isr: p.isr_nodes.into_iter().map(|b| b.0).collect(),
                    offline: p.offline_replicas.into_iter().map(|b| b.0).collect(),
                    error: ResponseError::try_from_code(p.error_code),
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            self.topics.insert(
                name.clone(),
                TopicMetadata {
                    name,
                    topic_id: t.topic_id,
                    is_internal: t.is_internal,
                    partitions,
                },
            );
        }
        errors
    }
}
