//! What the group and transaction coordinators share about their compacted internal
//! topics (`__consumer_offsets`, `__transaction_state`): create the topic on first use,
//! place a key on a partition (`placement`), and say which node coordinates a key. The
//! coordinators themselves run on `crate::coordinator`.

mod placement;

use kafka_protocol::error::ResponseError;
use tidelog_controller::CreateTopic;

pub(crate) use placement::partition_for;

use crate::context::BrokerContext;

/// Why no coordinator can be named for a key; every case is COORDINATOR_NOT_AVAILABLE
/// on the wire (retriable: the client asks again).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CoordinatorUnavailable {
    #[error("{0} does not exist yet")]
    TopicMissing(String),
    #[error("partition {partition} of {topic} has no leader")]
    NoLeader { topic: String, partition: i32 },
    #[error("node {0} is not a live broker with a listener")]
    NodeUnreachable(i32),
    #[error("the controller refused to create {topic}: {reason}")]
    CreateRefused { topic: String, reason: String },
}

impl CoordinatorUnavailable {
    /// The Kafka error code for a client.
    pub(crate) fn code(&self) -> i16 {
        ResponseError::CoordinatorNotAvailable.code()
    }
}

/// Where a coordinator is: a node and its advertised address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Coordinates {
    pub(crate) node_id: i32,
    pub(crate) host: String,
    pub(crate) port: i32,
}

/// The coordinator of `key` in `topic` (group or transactional id): the leader of its
/// partition. Callers create the topic first; a topic still missing (its creation not
/// yet in this node's image) is retriable like a partition without a leader. The
/// address is the coordinator's endpoint on `listener`, the client's.
pub(crate) fn coordinator_for(
    ctx: &BrokerContext,
    topic: &str,
    key: &str,
    listener: &str,
) -> Result<Coordinates, CoordinatorUnavailable> {
    let image = ctx.metadata.image();
    let node_id = match image.topic(topic) {
        Some(t) => {
            let partition = partition_for(key, t.partition_count());
            match t.partitions.get(&partition) {
                Some(p) if p.leader >= 0 => p.leader,
                _ => {
                    return Err(CoordinatorUnavailable::NoLeader {
                        topic: topic.to_string(),
                        partition,
                    })
                }
            }
        }
        None => return Err(CoordinatorUnavailable::TopicMissing(topic.to_string())),
    };
    let endpoint = image
        .broker(node_id)
        .filter(|b| !b.fenced)
        .and_then(|b| b.listeners.iter().find(|l| l.name == listener))
        .ok_or(CoordinatorUnavailable::NodeUnreachable(node_id))?;
    Ok(Coordinates {
        node_id,
        host: endpoint.host.clone(),
        port: i32::from(endpoint.port),
    })
}

/// How an internal topic is created.
pub(crate) struct TopicSpec<'a> {
    pub(crate) name: &'a str,
    pub(crate) partitions: i32,
    /// Capped by the number of live brokers.
    pub(crate) replication: i64,
    pub(crate) segment_bytes: String,
    /// `compact` for the group and transaction coordinators' topics.
    pub(crate) cleanup_policy: &'static str,
    pub(crate) retention_ms: Option<&'static str>,
}

/// What `create_if_missing` found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Creation {
    /// The metadata image already had the topic.
    Existed,
    /// This call created it.
    Created,
    /// Someone else created it between the image lookup and the create.
    CreatedMeanwhile,
}

/// Creates the topic `spec` describes unless the metadata image has it
/// (replication `min(spec.replication, live brokers)`).
pub(crate) async fn create_if_missing(
    ctx: &BrokerContext,
    spec: TopicSpec<'_>,
) -> Result<Creation, CoordinatorUnavailable> {
    if ctx.metadata.image().topic(spec.name).is_some() {
        return Ok(Creation::Existed);
    }
    let name = spec.name;
    let partitions = spec.partitions.max(1);
    let live = ctx.metadata.image().live_broker_ids().len().max(1);
    let replication = i16::try_from(spec.replication.min(live as i64)).unwrap_or(1);
    let create = CreateTopic {
        name: name.to_string(),
        num_partitions: partitions,
        replication_factor: replication,
        assignments: Vec::new(),
        configs: [
            ("cleanup.policy", Some(spec.cleanup_policy.to_string())),
            ("segment.bytes", Some(spec.segment_bytes)),
            ("retention.ms", spec.retention_ms.map(str::to_string)),
        ]
        .into_iter()
        .filter(|(_, v)| v.is_some())
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
    };
    let outcome = ctx.metadata.create_internal_topic(create).await;
    match outcome {
        Ok(_) => {
            tracing::info!(partitions, replication, "created {name}");
            Ok(Creation::Created)
        }
        Err(e) if e.error_code() == ResponseError::TopicAlreadyExists.code() => {
            // Another request's create committed first; its image may not be published
            // here yet, and naming a coordinator before it is would send the client to
            // a node that cannot serve the key.
            ctx.metadata.wait_for_topic_named(name).await;
            Ok(Creation::CreatedMeanwhile)
        }
        Err(e) => {
            tracing::error!(error = %e, "creating {name} failed");
            Err(CoordinatorUnavailable::CreateRefused {
                topic: name.to_string(),
                reason: e.to_string(),
            })
        }
    }
}
