//! LeaveGroup: one member (v0–2) or a batch, including static members by instance id
//! (v3+). A departure starts a rebalance for those who stay.

use kafka_protocol::messages::leave_group_request::LeaveGroupRequest;
use kafka_protocol::messages::leave_group_response::{LeaveGroupResponse, MemberResponse};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::group::str_bytes;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: LeaveGroupRequest = req.decode()?;
    let group = request.group_id.0.as_str();
    if let Some(code) = req
        .access(ctx)
        .refused(AclOperation::Read, ResourceType::Group, group)
    {
        return req.respond(&LeaveGroupResponse::default().with_error_code(code));
    }
    let batched = req.version() >= 3;
    let leaving: Vec<(String, Option<String>)> = if batched {
        request
            .members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|s| s.to_string()),
                )
            })
            .collect()
    } else {
        vec![(request.member_id.to_string(), None)]
    };
    let response = LeaveGroupResponse::default();
    let left = ctx
        .groups
        .leave(request.group_id.0.to_string(), leaving)
        .await;
    let response = match left {
        Err(e) => response.with_error_code(e.code()),
        Ok(results) if batched => response.with_members(
            results
                .into_iter()
                .map(|r| {
                    MemberResponse::default()
                        .with_member_id(str_bytes(&r.member_id))
                        .with_group_instance_id(r.instance_id.as_deref().map(str_bytes))
                        .with_error_code(r.error)
                })
                .collect(),
        ),
        Ok(results) => response.with_error_code(results.first().map_or(0, |r| r.error)),
    };
    req.respond(&response)
}
