//! DeleteShareGroupOffsets (KIP-932): deletes the share-partition state of whole topics
//! for an empty share group, so the group starts those topics again from
//! `share.auto.offset.reset`. A group with members is NON_EMPTY_GROUP; a group of another
//! kind, or none, GROUP_ID_NOT_FOUND; a topic the group has no state for
//! UNKNOWN_TOPIC_OR_PARTITION.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequest;
use kafka_protocol::messages::delete_share_group_offsets_response::{
    DeleteShareGroupOffsetsResponse, DeleteShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::group::str_bytes;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DeleteShareGroupOffsetsRequest = req.decode()?;
    let group = request.group_id.0.to_string();
    let access = req.access(ctx);
    let whole = |code: i16, message: Option<String>| {
        DeleteShareGroupOffsetsResponse::default()
            .with_error_code(code)
            .with_error_message(message.map(|m| str_bytes(&m)))
    };
    if group.is_empty() {
        return req.respond(&whole(ResponseError::InvalidGroupId.code(), None));
    }
    if let Some(code) = access.refused(AclOperation::Delete, ResourceType::Group, &group) {
        return req.respond(&whole(code, None));
    }
    let initialized = match ctx.groups.deletable_share_topics(group.clone()).await {
        Err(e) => return req.respond(&whole(e.code(), None)),
        Ok(Err(refusal)) => {
            return req.respond(&whole(refusal.error.code(), Some(refusal.message)))
        }
        Ok(Ok(topics)) => topics,
    };
    let image = ctx.metadata.image();
    let mut deleted = Vec::new();
    let mut responses = Vec::with_capacity(request.topics.len());
    for t in &request.topics {
        let name = t.topic_name.0.to_string();
        let id = image.topic(&name).map(|t| t.topic_id);
        let outcome = match (
            access.refused(AclOperation::Read, ResourceType::Topic, &name),
            id,
        ) {
            (Some(code), _) => Some((code, "Topic authorization failed.".to_string())),
            (None, Some(id)) => match initialized.get(&id) {
                None => Some((
                    ResponseError::UnknownTopicOrPartition.code(),
                    format!("The share group {group} has no state for topic {name}."),
                )),
                Some((_, partitions)) => {
                    let mut failure = None;
                    for p in partitions {
                        if let Err(e) = ctx.share_state.delete((group.clone(), id, *p)).await {
                            failure = Some((e.code(), e.to_string()));
                            break;
                        }
                    }
                    if failure.is_none() {
                        deleted.push(id);
                    }
                    failure
                }
            },
            (None, None) => Some((
                ResponseError::UnknownTopicOrPartition.code(),
                "This server does not host this topic.".to_string(),
            )),
        };
        let answer = DeleteShareGroupOffsetsResponseTopic::default()
            .with_topic_name(TopicName(str_bytes(&name)))
            .with_topic_id(id.unwrap_or_default());
        responses.push(match outcome {
            None => answer,
            Some((code, message)) => answer
                .with_error_code(code)
                .with_error_message(Some(str_bytes(&message))),
        });
    }
    if !deleted.is_empty() {
        if let Err(e) = ctx.groups.forget_share_topics(group, deleted).await {
            return req.respond(&whole(e.code(), None));
        }
    }
    req.respond(&DeleteShareGroupOffsetsResponse::default().with_responses(responses))
}
