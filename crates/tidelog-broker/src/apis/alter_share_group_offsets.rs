//! AlterShareGroupOffsets (KIP-932): sets the start offset of share partitions of an
//! empty share group. The group coordinator moves the group epoch on and records the
//! partitions; the share coordinator then stores each start offset at that epoch as
//! the state epoch, which fences whatever a leader still holds from before (the leader
//! starts the share partition again from the new state). A group with members is
//! NON_EMPTY_GROUP; a group of another kind, or none, GROUP_ID_NOT_FOUND.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_share_group_offsets_request::AlterShareGroupOffsetsRequest;
use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponse, AlterShareGroupOffsetsResponsePartition as PartitionAnswer,
    AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::group::share_records::ShareTopics;
use crate::group::str_bytes;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

fn failed(error: ResponseError, message: &str) -> Option<(i16, String)> {
    Some((error.code(), message.to_string()))
}

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: AlterShareGroupOffsetsRequest = req.decode()?;
    let group = request.group_id.0.to_string();
    let access = req.access(ctx);
    let whole = |code: i16, message: Option<String>| {
        AlterShareGroupOffsetsResponse::default()
            .with_error_code(code)
            .with_error_message(message.map(|m| str_bytes(&m)))
    };
    if group.is_empty() {
        return req.respond(&whole(ResponseError::InvalidGroupId.code(), None));
    }
    if let Some(code) = access.refused(AclOperation::Read, ResourceType::Group, &group) {
        return req.respond(&whole(code, None));
    }
    let image = ctx.metadata.image();
    // Per requested partition: its refusal, or None when it is to be set.
    let mut checked = Vec::with_capacity(request.topics.len());
    let mut to_set = ShareTopics::new();
    for t in &request.topics {
        let name = t.topic_name.0.to_string();
        let refused = access.refused(AclOperation::Read, ResourceType::Topic, &name);
        let topic = image.topic(&name);
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let outcome = match (refused, topic) {
                (Some(code), _) => Some((code, "Topic authorization failed.".to_string())),
                (None, Some(topic)) if topic.partitions.contains_key(&p.partition_index) => {
                    if p.start_offset < 0 {
                        failed(
                            ResponseError::InvalidRequest,
                            "The start offset is negative.",
                        )
                    } else {
                        to_set
                            .entry(topic.topic_id)
                            .or_insert_with(|| (name.clone(), BTreeSet::new()))
                            .1
                            .insert(p.partition_index);
                        None
                    }
                }
                _ => failed(
                    ResponseError::UnknownTopicOrPartition,
                    "This server does not host this topic-partition.",
                ),
            };
            partitions.push((p.partition_index, p.start_offset, outcome));
        }
        checked.push((name, topic.map(|t| t.topic_id), partitions));
    }
    if let Err(e) = ctx.share_state.ensure_topic(ctx).await {
        return req.respond(&whole(e.code(), Some(e.to_string())));
    }
    let state_epoch = match ctx.groups.alter_share_offsets(group.clone(), to_set).await {
        Err(e) => return req.respond(&whole(e.code(), None)),
        Ok(Err(refusal)) => {
            return req.respond(&whole(refusal.error.code(), Some(refusal.message)))
        }
        Ok(Ok(epoch)) => epoch,
    };
    let mut responses = Vec::with_capacity(checked.len());
    for (name, id, partitions) in checked {
        let mut answers = Vec::with_capacity(partitions.len());
        for (index, start_offset, outcome) in partitions {
            let outcome = match (outcome, id) {
                (Some(refused), _) => Some(refused),
                (None, Some(id)) => ctx
                    .share_state
                    .initialize((group.clone(), id, index), state_epoch, start_offset)
                    .await
                    .err()
                    .map(|e| (e.code(), e.to_string())),
                (None, None) => failed(ResponseError::UnknownTopicOrPartition, "No such topic."),
            };
            let answer = PartitionAnswer::default().with_partition_index(index);
            answers.push(match outcome {
                None => answer,
                Some((code, message)) => answer
                    .with_error_code(code)
                    .with_error_message(Some(str_bytes(&message))),
            });
        }
        responses.push(
            AlterShareGroupOffsetsResponseTopic::default()
                .with_topic_name(kafka_protocol::messages::TopicName(str_bytes(&name)))
                .with_topic_id(id.unwrap_or_default())
                .with_partitions(answers),
        );
    }
    req.respond(&AlterShareGroupOffsetsResponse::default().with_responses(responses))
}
