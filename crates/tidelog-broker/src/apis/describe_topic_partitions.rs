//! DescribeTopicPartitions (KIP-966): topics and their partitions, paged by a cursor so
//! a client can walk a cluster of any size in bounded responses.
//!
//! As Kafka: topics are answered in name order, from the cursor's topic (its partitions
//! from the cursor's index) on; one response holds at most `response_partition_limit`
//! partitions, capped at [`MAX_PARTITIONS`] (Kafka's `max.request.partition.size.limit`
//! default) and at least 1. When the limit cuts a topic short, `next_cursor` names the
//! topic and the first partition not answered; when it is reached exactly at a topic
//! boundary, the cursor names the next topic at partition 0. An empty topic list means
//! every topic, and then unknown names cannot occur; a named topic that does not exist
//! answers UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an invalid name). A
//! cursor whose topic is not in the list, or whose partition is negative, makes the
//! request INVALID_REQUEST. Each topic carries its authorized operations (no
//! authorizer: all a topic supports). tidelog has no eligible leader replicas (KIP-966
//! ELR), so those lists are empty, as Kafka's with ELR disabled.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_request::DescribeTopicPartitionsRequest;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponse, DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_controller::{MetadataImage, TopicImage};
use tidelog_protocol::ProtocolError;
use uuid::Uuid;

use super::Request;
use crate::auth::Access;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

/// The most partitions one response describes (Kafka's default
/// `max.request.partition.size.limit`).
pub(crate) const MAX_PARTITIONS: i32 = 2000;

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DescribeTopicPartitionsRequest = req.decode()?;
    let image = ctx.metadata.image();
    let access = req.access(ctx);
    let response = describe(&image, &request, &access);
    req.respond(&response)
}

fn name_of(topic: &str) -> Option<TopicName> {
    Some(TopicName(StrBytes::from_string(topic.to_string())))
}

/// Topics without DESCRIBE are left out of a listing of all and answer
/// TOPIC_AUTHORIZATION_FAILED when named.
fn describe(
    image: &MetadataImage,
    request: &DescribeTopicPartitionsRequest,
    access: &Access,
) -> DescribeTopicPartitionsResponse {
    let all_topics = request.topics.is_empty();
    let cursor = request
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.0.to_string(), c.partition_index));
    let from = cursor.as_ref().map_or("", |(t, _)| t.as_str());
    let mut names: Vec<String> = if all_topics {
        image
            .topics()
            .map(|t| t.name.clone())
            .filter(|n| n.as_str() >= from)
            .filter(|n| access.topic(AclOperation::Describe, n))
            .collect()
    } else {
        request
            .topics
            .iter()
            .map(|t| t.name.0.to_string())
            .filter(|n| n.as_str() >= from)
            .collect()
    };
    names.sort();
    names.dedup();
    let bad_cursor = cursor.as_ref().is_some_and(|(topic, partition)| {
        *partition < 0 || (!all_topics && !names.contains(topic))
    });
    if bad_cursor {
        let topics = request
            .topics
            .iter()
            .map(|t| {
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_name(Some(t.name.clone()))
            })
            .collect();
        return DescribeTopicPartitionsResponse::default().with_topics(topics);
    }
    let limit = request.response_partition_limit.clamp(1, MAX_PARTITIONS);
    let mut remaining = usize::try_from(limit).unwrap_or(1);
    let mut response = DescribeTopicPartitionsResponse::default();
    for name in names {
        if remaining == 0 {
            response.next_cursor = Some(
                Cursor::default()
                    .with_topic_name(TopicName(StrBytes::from_string(name)))
                    .with_partition_index(0),
            );
            break;
        }
        if !access.topic(AclOperation::Describe, &name) {
            response.topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_name(name_of(&name))
                    .with_topic_id(Uuid::nil()),
            );
            continue;
        }
        let operations = access.operations(ResourceType::Topic, &name);
        let Some(topic) = image.topic(&name) else {
            if !all_topics {
                let code = match tidelog_controller::validate_topic_name(&name) {
                    Ok(()) => ResponseError::UnknownTopicOrPartition.code(),
                    Err(_) => ResponseError::InvalidTopicException.code(),
                };
                response.topics.push(
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_error_code(code)
                        .with_name(name_of(&name))
                        .with_topic_id(Uuid::nil())
                        .with_topic_authorized_operations(operations),
                );
            }
            continue;
        };
        let start = match &cursor {
            Some((t, p)) if *t == name => usize::try_from(*p).unwrap_or(0),
            _ => 0,
        };
        let count = topic.partitions.len();
        let end = count.min(start.saturating_add(remaining));
        let partitions: Vec<_> = (start..end)
            .filter_map(|i| i32::try_from(i).ok())
            .filter_map(|i| partition_entry(image, topic, i))
            .collect();
        remaining = remaining.saturating_sub(partitions.len());
        response.topics.push(
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(name_of(&name))
                .with_topic_id(topic.topic_id)
                .with_is_internal(topic.is_internal())
                .with_partitions(partitions)
                .with_topic_authorized_operations(operations),
        );
        if end < count {
            response.next_cursor = Some(
                Cursor::default()
                    .with_topic_name(TopicName(StrBytes::from_string(name)))
                    .with_partition_index(i32::try_from(end).unwrap_or(i32::MAX)),
            );
            break;
        }
    }
    response
}

fn partition_entry(
    image: &MetadataImage,
    topic: &TopicImage,
    index: i32,
) -> Option<DescribeTopicPartitionsResponsePartition> {
    // A partition without a leader says so by leader -1, without an error code (Kafka).
    let p = topic.partitions.get(&index)?;
    Some(
        DescribeTopicPartitionsResponsePartition::default()
            .with_partition_index(index)
            .with_leader_id(BrokerId(p.leader))
            .with_leader_epoch(p.leader_epoch)
            .with_replica_nodes(p.replicas.iter().map(|r| BrokerId(*r)).collect())
            .with_isr_nodes(p.isr.iter().map(|r| BrokerId(*r)).collect())
            .with_eligible_leader_replicas(Some(Vec::new()))
            .with_last_known_elr(Some(Vec::new()))
            .with_offline_replicas(
                image
                    .offline_replicas(p)
                    .into_iter()
                    .map(BrokerId)
                    .collect(),
            ),
    )
}
