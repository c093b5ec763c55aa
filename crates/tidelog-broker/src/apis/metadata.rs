//! Metadata: brokers, the controller, and each topic's partitions, leaders and replicas.
//! Unknown topics are created here when `auto.create.topics.enable` and the client allow it.
//! A topic another request is creating at the same moment is answered
//! LEADER_NOT_AVAILABLE (retriable: the client asks again), never TOPIC_ALREADY_EXISTS.
//!
//! From v8, authorized operations are answered when asked for (topics: v8+; the
//! cluster: v8-v10, the versions that carry the flag). With an authorizer, listing all
//! topics hides those the principal may not DESCRIBE; a topic asked by name without
//! DESCRIBE, or one to auto-create without CREATE (cluster or topic), answers
//! TOPIC_AUTHORIZATION_FAILED.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::metadata_response::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_controller::{CreateTopic, MetadataImage, TopicImage};
use tidelog_protocol::ProtocolError;

use super::authorized_operations::{self, if_requested};
use super::Request;
use crate::auth::Access;
use crate::context::Ctx;
use crate::net::Reply;
use crate::settings;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 13 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: MetadataRequest = req.decode()?;
    let version = req.version();
    // v0 had no flag: it always auto-created.
    let allow_create = (version < 4 || request.allow_auto_topic_creation)
        && ctx.config.get(settings::AUTO_CREATE_TOPICS_ENABLE);
    let access = req.access(ctx);
    let describable = |t: &&TopicImage| access.topic(AclOperation::Describe, &t.name);
    let mut topics = Vec::new();
    match request.topics {
        // v0 used an empty list to mean "all topics". Listing all hides the topics the
        // principal may not DESCRIBE.
        wanted if wanted.as_ref().is_none_or(|w| w.is_empty() && version == 0) => {
            let image = ctx.metadata.image();
            topics.extend(
                image
                    .topics()
                    .filter(describable)
                    .map(|t| topic_entry(&image, t, version)),
            );
        }
        None => {}
        Some(wanted) => {
            for t in wanted {
                topics.push(
                    lookup_topic(
                        ctx,
                        &access,
                        t.name.as_ref().map(|n| n.0.as_str()),
                        t.topic_id,
                        allow_create,
                        version,
                    )
                    .await,
                );
            }
        }
    }
    let topic_operations = version >= 8 && request.include_topic_authorized_operations;
    if topic_operations {
        // Kafka fills it in for every topic it answers by name, known or not (not for
        // an unknown topic id).
        let refused = ResponseError::TopicAuthorizationFailed.code();
        for t in topics.iter_mut().filter(|t| t.error_code != refused) {
            if let Some(name) = &t.name {
                t.topic_authorized_operations = access.operations(ResourceType::Topic, name);
            }
        }
    }
    let cluster_operations =
        (8..=10).contains(&version) && request.include_cluster_authorized_operations;
    let image = ctx.metadata.image();
    let response = MetadataResponse::default()
        .with_cluster_authorized_operations(if_requested(
            cluster_operations,
            authorized_operations::cluster(&access),
        ))
        .with_brokers(brokers(&image, &req.session.listener))
        .with_cluster_id(
            (version >= 2).then(|| StrBytes::from_string(image.cluster_id().to_string())),
        )
        .with_controller_id(BrokerId(if version >= 1 {
            ctx.metadata.controller_id(ctx.node_id())
        } else {
            -1
        }))
        .with_topics(topics);
    req.respond(&response)
}

async fn lookup_topic(
    ctx: &Ctx,
    access: &Access,
    name: Option<&str>,
    id: uuid::Uuid,
    allow_create: bool,
    version: i16,
) -> MetadataResponseTopic {
    let image = ctx.metadata.image();
    let found = match name {
        Some(n) => image.topic(n),
        None => image.topic_by_id(&id),
    };
    let refused = |name: &str| {
        MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
            .with_error_code(ResponseError::TopicAuthorizationFailed.code())
    };
    if let Some(topic) = found {
        if !access.topic(AclOperation::Describe, &topic.name) {
            if name.is_none() {
                // Asked by id: Kafka does not tell an undescribable id from an unknown one.
                return MetadataResponseTopic::default()
                    .with_topic_id(id)
                    .with_error_code(ResponseError::UnknownTopicId.code());
            }
            return refused(&topic.name);
        }
        return topic_entry(&image, topic, version);
    }
    let Some(name) = name else {
        return MetadataResponseTopic::default()
            .with_topic_id(id)
            .with_error_code(ResponseError::UnknownTopicId.code());
    };
    let unknown = |code: i16| {
        MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
            .with_error_code(code)
    };
    // An internal topic is never auto-created for a client: its coordinator creates it
    // on first use, with the settings it needs (the controller refuses clients anyway).
    if !access.topic(AclOperation::Describe, name) {
        return refused(name);
    }
    if !allow_create || tidelog_controller::ops::is_protected(name) {
        return unknown(ResponseError::UnknownTopicOrPartition.code());
    }
    // Auto-creation needs CREATE on the cluster or on the topic.
    if !access.cluster(AclOperation::Create) && !access.topic(AclOperation::Create, name) {
        return refused(name);
    }
    // default.replication.factor capped by the live brokers (as for the internal
    // topics), so a cluster with a broker down still auto-creates.
    let live = i64::try_from(image.live_broker_ids().len())
        .unwrap_or(1)
        .max(1);
    let wanted = ctx.config.get(settings::DEFAULT_REPLICATION_FACTOR);
    let replication = i16::try_from(wanted.clamp(1, live)).unwrap_or(1);
    let request = CreateTopic {
        name: name.to_string(),
        num_partitions: -1,
        replication_factor: replication,
        assignments: Vec::new(),
        configs: Vec::new(),
    };
    match ctx.metadata.create_topic(request, false).await {
        Ok(created) => {
            tracing::info!(
                topic = name,
                partitions = created.partitions.len(),
                "auto-created topic"
            );
            topic_entry(&ctx.metadata.image(), &created, version)
        }
        Err(e) => {
            // Another request created it in between: answer with what exists.
            let image = ctx.metadata.image();
            match image.topic(name) {
                Some(t) => topic_entry(&image, t, version),
                None => unknown(auto_create_error(e.error_code())),
            }
        }
    }
}

/// The live brokers as reached through `listener` (the client's own listener; a
/// broker without one of that name is left out, as in Kafka).
pub(crate) fn brokers(image: &MetadataImage, listener: &str) -> Vec<MetadataResponseBroker> {
    image
        .brokers()
        .filter(|b| !b.fenced)
        .filter_map(|b| {
            let endpoint = b.listeners.iter().find(|l| l.name == listener)?;
            Some(
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(b.broker_id))
                    .with_host(StrBytes::from_string(endpoint.host.clone()))
                    .with_port(i32::from(endpoint.port))
                    .with_rack(b.rack.clone().map(StrBytes::from_string)),
            )
        })
        .collect()
}

/// A quorum that cannot write right now, or a topic another request is creating (the
/// controller has it, this node's image not yet), is to a client a topic whose leader
/// is not available yet (retriable), not a failure of the request.
fn auto_create_error(code: i16) -> i16 {
    const NOT_CONTROLLER: i16 = 41;
    if code == ResponseError::RequestTimedOut.code()
        || code == NOT_CONTROLLER
        || code == ResponseError::TopicAlreadyExists.code()
    {
        ResponseError::LeaderNotAvailable.code()
    } else {
        code
    }
}

/// One topic's entry: each partition's leader, epoch, replicas, ISR and the replicas
/// on brokers that are fenced or unknown (offline).
fn topic_entry(image: &MetadataImage, topic: &TopicImage, version: i16) -> MetadataResponseTopic {
    let partitions = topic
        .partitions
        .iter()
        .map(|(index, p)| {
            let error = if p.leader < 0 {
                ResponseError::LeaderNotAvailable.code()
            } else {
                0
            };
            MetadataResponsePartition::default()
                .with_error_code(error)
                .with_partition_index(*index)
                .with_leader_id(BrokerId(p.leader))
                .with_leader_epoch(if version >= 7 { p.leader_epoch } else { -1 })
                .with_replica_nodes(p.replicas.iter().map(|r| BrokerId(*r)).collect())
                .with_isr_nodes(p.isr.iter().map(|r| BrokerId(*r)).collect())
                .with_offline_replicas(
                    p.replicas
                        .iter()
                        .filter(|r| image.broker(**r).is_none_or(|b| b.fenced))
                        .map(|r| BrokerId(*r))
                        .collect(),
                )
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_topic_id(if version >= 10 {
            topic.topic_id
        } else {
            uuid::Uuid::nil()
        })
        .with_is_internal(topic.is_internal())
        .with_partitions(partitions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_creation_race_is_retriable() {
        let leader_not_available = ResponseError::LeaderNotAvailable.code();
        let exists = ResponseError::TopicAlreadyExists.code();
        assert_eq!(auto_create_error(exists), leader_not_available);
        assert_eq!(
            auto_create_error(ResponseError::RequestTimedOut.code()),
            leader_not_available
        );
        let invalid = ResponseError::InvalidTopicException.code();
        assert_eq!(auto_create_error(invalid), invalid);
    }
}
