//! OffsetDelete: drops committed offsets of partitions a group no longer consumes.

use kafka_protocol::messages::offset_delete_request::OffsetDeleteRequest;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponse, OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::per_partition::answer_each;
use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: OffsetDeleteRequest = req.decode()?;
    // DELETE on the group (else the whole request answers GROUP_AUTHORIZATION_FAILED),
    // READ on each topic (else its partitions answer TOPIC_AUTHORIZATION_FAILED).
    let access = req.access(ctx);
    if let Some(code) = access.refused(
        AclOperation::Delete,
        ResourceType::Group,
        request.group_id.0.as_str(),
    ) {
        return req.respond(&OffsetDeleteResponse::default().with_error_code(code));
    }
    let topic_refused = |name: &str| access.refused(AclOperation::Read, ResourceType::Topic, name);
    let wanted: Vec<(String, i32)> = request
        .topics
        .iter()
        .filter(|t| topic_refused(&t.name.0).is_none())
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.to_string(), p.partition_index))
        })
        .collect();
    let (error, codes) = ctx
        .groups
        .delete_offsets(request.group_id.0.to_string(), wanted.clone())
        .await;
    let response = OffsetDeleteResponse::default().with_error_code(error);
    if error != 0 {
        return req.respond(&response);
    }
    let mut codes = codes.into_iter();
    let topics = answer_each(
        request.topics,
        |t| &t.partitions,
        |t, p| {
            let code = match topic_refused(&t.name.0) {
                Some(code) => code,
                None => codes.next().unwrap_or(0),
            };
            OffsetDeleteResponsePartition::default()
                .with_partition_index(p.partition_index)
                .with_error_code(code)
        },
        |t, partitions| {
            OffsetDeleteResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        },
    );
    req.respond(&response.with_topics(topics))
}
