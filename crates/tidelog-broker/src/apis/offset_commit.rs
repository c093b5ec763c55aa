//! OffsetCommit: members commit within their generation; anyone may commit for a
//! group without members (generation -1, empty member id). From v10 topics are named by
//! id (KIP-848): offsets are kept by topic name, so an id is resolved through the
//! metadata image, and one this node does not know answers UNKNOWN_TOPIC_ID.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::per_partition::answer_each;
use super::Request;
use crate::context::Ctx;
use crate::group::CommitRequest;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 2, max: 10 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: OffsetCommitRequest = req.decode()?;
    let by_id = req.version() >= 10;
    let image = ctx.metadata.image();
    let name_of = |t: &OffsetCommitRequestTopic| -> Option<String> {
        if by_id {
            image
                .topic_by_id(&t.topic_id)
                .map(|found| found.name.clone())
        } else {
            Some(t.name.0.to_string())
        }
    };
    // READ on the group (else every partition answers GROUP_AUTHORIZATION_FAILED) and
    // on each topic (else its partitions answer TOPIC_AUTHORIZATION_FAILED); refused
    // offsets are not committed.
    let access = req.access(ctx);
    let group_refused = access.refused(
        AclOperation::Read,
        ResourceType::Group,
        request.group_id.0.as_str(),
    );
    let topic_refused = |name: &str| access.refused(AclOperation::Read, ResourceType::Topic, name);
    let offsets = request
        .topics
        .iter()
        .filter_map(|t| name_of(t).map(|name| (name, t)))
        .filter(|(name, _)| topic_refused(name).is_none())
        .flat_map(|(name, t)| {
            t.partitions.iter().map(move |p| {
                (
                    name.clone(),
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.committed_metadata.as_ref().map(|m| m.to_string()),
                )
            })
        })
        .collect();
    let commit = CommitRequest {
        group_id: request.group_id.0.to_string(),
        generation: request.generation_id_or_member_epoch,
        member_id: request.member_id.to_string(),
        instance_id: request.group_instance_id.as_ref().map(|s| s.to_string()),
        offsets,
    };
    let mut codes = match group_refused {
        Some(_) => Vec::new().into_iter(),
        None => ctx.groups.commit(commit).await.into_iter(),
    };
    let topics = answer_each(
        request.topics,
        |t| &t.partitions,
        |t, p| {
            // Only the resolved topics' offsets were committed, in request order.
            let code = match (group_refused, name_of(t)) {
                (Some(code), _) => code,
                (None, None) => ResponseError::UnknownTopicId.code(),
                (None, Some(name)) => match topic_refused(&name) {
                    Some(code) => code,
                    None => codes.next().unwrap_or(0),
                },
            };
            OffsetCommitResponsePartition::default()
                .with_partition_index(p.partition_index)
                .with_error_code(code)
        },
        |t, partitions| {
            let topic = if by_id {
                OffsetCommitResponseTopic::default().with_topic_id(t.topic_id)
            } else {
                OffsetCommitResponseTopic::default().with_name(t.name)
            };
            topic.with_partitions(partitions)
        },
    );
    req.respond(&OffsetCommitResponse::default().with_topics(topics))
}
