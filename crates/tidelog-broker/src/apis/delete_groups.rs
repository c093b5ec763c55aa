//! DeleteGroups: removes empty groups and all their committed offsets (tombstones).

use kafka_protocol::messages::delete_groups_request::DeleteGroupsRequest;
use kafka_protocol::messages::delete_groups_response::{
    DeletableGroupResult, DeleteGroupsResponse,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

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
            None => ctx.groups.delete_group(id.0.to_string()).await,
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(id)
                .with_error_code(error),
        );
    }
    req.respond(&DeleteGroupsResponse::default().with_results(results))
}
