//! Heartbeat: keeps a member's session alive and tells it when to rejoin.

use kafka_protocol::messages::heartbeat_request::HeartbeatRequest;
use kafka_protocol::messages::heartbeat_response::HeartbeatResponse;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: HeartbeatRequest = req.decode()?;
    let group = request.group_id.0.as_str();
    if let Some(code) = req
        .access(ctx)
        .refused(AclOperation::Read, ResourceType::Group, group)
    {
        return req.respond(&HeartbeatResponse::default().with_error_code(code));
    }
    let error = ctx
        .groups
        .heartbeat(
            request.group_id.0.to_string(),
            request.member_id.to_string(),
            request.group_instance_id.as_ref().map(|s| s.to_string()),
            request.generation_id,
        )
        .await
        .unwrap_or_else(|e| e.code());
    req.respond(&HeartbeatResponse::default().with_error_code(error))
}
