//! DeleteGroups: removes empty groups and all their committed offsets (tombstones). An
//! empty share group's share-partition state goes first, through the share coordinator
//! (DeleteShareGroupState), as in Kafka: a group whose state could not be deleted stays.

use kafka_protocol::messages::delete_groups_request::DeleteGroupsRequest;
use kafka_protocol::messages::delete_groups_response::{
    DeletableGroupResult, DeleteGroupsResponse,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use kafka_protocol::error::ResponseError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DeleteGroupsRequest = req.decode()?;
    let mut results = Vec::with_capacity(request.groups_names.len());
    let access = req.access(ctx);
    for id in request.groups_names {
        // DELETE on the group, else GROUP_AUTHORIZATION_FAILED.
        let error = match access.refused(AclOperation::Delete, ResourceType::Group, &id.0) {
            Some(code) => code,
            None => match delete_share_state(ctx, id.0.as_str()).await {
                Some(code) => code,
                None => ctx.groups.delete_group(id.0.to_string()).await,
            },
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(id)
                .with_error_code(error),
        );
    }
    req.respond(&DeleteGroupsResponse::default().with_results(results))
}

/// For an empty share group, deletes the state of each of its share partitions; the
/// error that ends the deletion, if any (None also for a group of another kind).
async fn delete_share_state(ctx: &Ctx, group: &str) -> Option<i16> {
    let topics = match ctx.groups.deletable_share_topics(group.to_string()).await {
        Err(e) => return Some(e.code()),
        Ok(Err(refusal)) if refusal.error == ResponseError::GroupIdNotFound => return None,
        Ok(Err(refusal)) => return Some(refusal.error.code()),
        Ok(Ok(topics)) => topics,
    };
    for (id, (_, partitions)) in topics {
        for p in partitions {
            if let Err(e) = ctx.share_state.delete((group.to_string(), id, p)).await {
                tracing::warn!(group, topic_id = %id, partition = p, error = %e, "share state not deleted; the group stays");
                return Some(e.code());
            }
        }
    }
    None
}
