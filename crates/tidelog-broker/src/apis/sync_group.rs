//! SyncGroup: the leader hands in the assignment; every member gets its share once it
//! is stored, so followers' replies are parked until then.

use kafka_protocol::messages::sync_group_request::SyncGroupRequest;
use kafka_protocol::messages::sync_group_response::SyncGroupResponse;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::join_group::{later, Responder};
use super::Request;
use crate::context::Ctx;
use crate::group::{str_bytes, SyncOutcome, SyncRequest, Waiting};
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: SyncGroupRequest = req.decode()?;
    let group = request.group_id.0.as_str();
    if let Some(code) = req
        .access(ctx)
        .refused(AclOperation::Read, ResourceType::Group, group)
    {
        return req.respond(&SyncGroupResponse::default().with_error_code(code));
    }
    let assignments = request
        .assignments
        .iter()
        .map(|a| (a.member_id.to_string(), a.assignment.clone()))
        .collect();
    let owned = |s: &Option<kafka_protocol::protocol::StrBytes>| s.as_ref().map(|s| s.to_string());
    let waiting = ctx
        .groups
        .sync(SyncRequest {
            group_id: request.group_id.0.to_string(),
            member_id: request.member_id.to_string(),
            instance_id: owned(&request.group_instance_id),
            generation: request.generation_id,
            protocol_type: owned(&request.protocol_type),
            protocol: owned(&request.protocol_name),
            assignments,
        })
        .await
        .unwrap_or_else(|e| {
            Waiting::Now(SyncOutcome {
                error: e.code(),
                ..SyncOutcome::default()
            })
        });
    let respond_to = Responder::of(&req);
    match waiting {
        Waiting::Now(outcome) => respond_to.send(&response(outcome)),
        Waiting::Later(rx, wait) => Ok(later(ctx, rx, wait, respond_to, response, |error| {
            SyncOutcome {
                error,
                ..SyncOutcome::default()
            }
        })),
    }
}

fn response(o: SyncOutcome) -> SyncGroupResponse {
    SyncGroupResponse::default()
        .with_error_code(o.error)
        .with_protocol_type(o.protocol_type.as_deref().map(str_bytes))
        .with_protocol_name(o.protocol.as_deref().map(str_bytes))
        .with_assignment(o.assignment)
}
