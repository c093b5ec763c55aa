//! DescribeShareGroupOffsets (KIP-932): per share partition of a share group, its start
//! offset and the leader epoch of its stored state, read from the share coordinator.
//! Topics left null mean every share partition the group has state for. A group of
//! another kind, or none, is GROUP_ID_NOT_FOUND; a partition without state answers start
//! offset -1, as in Kafka.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequest;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponse, DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition as PartitionAnswer,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;
use uuid::Uuid;

use super::Request;
use crate::auth::Access;
use crate::context::Ctx;
use crate::group::str_bytes;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DescribeShareGroupOffsetsRequest = req.decode()?;
    let access = req.access(ctx);
    let mut groups = Vec::with_capacity(request.groups.len());
    for g in request.groups {
        let wanted = g.topics.map(|topics| {
            topics
                .into_iter()
                .map(|t| (t.topic_name.0.to_string(), t.partitions))
                .collect()
        });
        groups.push(describe_group(ctx, &access, g.group_id.0.to_string(), wanted).await);
    }
    req.respond(&DescribeShareGroupOffsetsResponse::default().with_groups(groups))
}

fn partition_error(index: i32, error: i16, message: Option<String>) -> PartitionAnswer {
    PartitionAnswer::default()
        .with_partition_index(index)
        .with_start_offset(-1)
        .with_leader_epoch(-1)
        .with_error_code(error)
        .with_error_message(message.map(|m| str_bytes(&m)))
}

async fn describe_group(
    ctx: &Ctx,
    access: &Access,
    group: String,
    wanted: Option<Vec<(String, Vec<i32>)>>,
) -> DescribeShareGroupOffsetsResponseGroup {
    let answer = DescribeShareGroupOffsetsResponseGroup::default()
        .with_group_id(kafka_protocol::messages::GroupId(str_bytes(&group)));
    if let Some(code) = access.refused(AclOperation::Describe, ResourceType::Group, &group) {
        return answer.with_error_code(code);
    }
    let initialized = match ctx.groups.share_offsets_topics(group.clone()).await {
        Err(e) => return answer.with_error_code(e.code()),
        Ok(Err(refusal)) => {
            return answer
                .with_error_code(refusal.error.code())
                .with_error_message(Some(str_bytes(&refusal.message)))
        }
        Ok(Ok(topics)) => topics,
    };
    let image = ctx.metadata.image();
    // (name, id if the image has the topic, partitions asked for).
    let wanted: Vec<(String, Option<Uuid>, Vec<i32>)> = match wanted {
        Some(topics) => topics
            .into_iter()
            .map(|(name, partitions)| {
                let id = image.topic(&name).map(|t| t.topic_id);
                (name, id, partitions)
            })
            .collect(),
        // Every share partition with state, of topics that still exist.
        None => initialized
            .iter()
            .filter(|(id, _)| image.topic_by_id(id).is_some())
            .map(|(id, (name, partitions))| {
                let name = image
                    .topic_by_id(id)
                    .map_or(name.clone(), |t| t.name.clone());
                (name, Some(*id), partitions.iter().copied().collect())
            })
            .collect(),
    };
    let mut topics = Vec::with_capacity(wanted.len());
    for (name, id, partitions) in wanted {
        let refused = access.refused(AclOperation::Describe, ResourceType::Topic, &name);
        let exists = |p: i32| {
            id.and_then(|id| image.topic_by_id(&id))
                .is_some_and(|t| t.partitions.contains_key(&p))
        };
        let mut answers = Vec::with_capacity(partitions.len());
        for p in partitions {
            answers.push(match (refused, id) {
                (Some(code), _) => partition_error(p, code, None),
                (None, Some(id)) if exists(p) => {
                    match ctx.share_state.summary((group.clone(), id, p)).await {
                        Ok(Some(s)) => PartitionAnswer::default()
                            .with_partition_index(p)
                            .with_start_offset(s.start_offset)
                            .with_leader_epoch(s.leader_epoch),
                        Ok(None) => partition_error(p, 0, None),
                        Err(e) => partition_error(p, e.code(), Some(e.to_string())),
                    }
                }
                _ => partition_error(
                    p,
                    ResponseError::UnknownTopicOrPartition.code(),
                    Some("This server does not host this topic-partition.".into()),
                ),
            });
        }
        topics.push(
            DescribeShareGroupOffsetsResponseTopic::default()
                .with_topic_name(TopicName(str_bytes(&name)))
                .with_topic_id(id.unwrap_or_default())
                .with_partitions(answers),
        );
    }
    answer.with_topics(topics)
}
