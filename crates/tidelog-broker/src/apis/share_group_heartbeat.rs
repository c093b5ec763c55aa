//! ShareGroupHeartbeat (KIP-932): a share-group member joins, heartbeats and leaves
//! through this one API; the coordinator answers with its member epoch and, when it
//! changed, its assignment (partitions it may fetch from, shared with other members).

use kafka_protocol::messages::share_group_heartbeat_request::ShareGroupHeartbeatRequest;
use kafka_protocol::messages::share_group_heartbeat_response::{
    Assignment, ShareGroupHeartbeatResponse, TopicPartitions,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::group::share::ShareHeartbeat;
use crate::group::str_bytes;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 1, max: 1 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: ShareGroupHeartbeatRequest = req.decode()?;
    let group = request.group_id.0.to_string();
    let access = req.access(ctx);
    if let Some(code) = access.refused(AclOperation::Read, ResourceType::Group, &group) {
        return req.respond(&ShareGroupHeartbeatResponse::default().with_error_code(code));
    }
    let names = request.subscribed_topic_names.as_deref();
    if let Some(code) = super::consumer_group_heartbeat::undescribable_topics(&access, names) {
        return req.respond(&ShareGroupHeartbeatResponse::default().with_error_code(code));
    }
    let heartbeat = ShareHeartbeat {
        group_id: group,
        member_id: request.member_id.to_string(),
        member_epoch: request.member_epoch,
        rack_id: request.rack_id.as_ref().map(|s| s.to_string()),
        subscribed_topic_names: request
            .subscribed_topic_names
            .as_ref()
            .map(|names| names.iter().map(|n| n.0.to_string()).collect()),
        client_id: req.client_id(),
        client_host: format!("/{}", req.peer.ip()),
    };
    let response = match ctx.groups.share_heartbeat(heartbeat).await {
        Ok(r) => r,
        Err(e) => {
            return req.respond(&ShareGroupHeartbeatResponse::default().with_error_code(e.code()))
        }
    };
    let assignment = response.assignment.map(|a| {
        Assignment::default().with_topic_partitions(
            a.into_iter()
                .map(|(topic_id, partitions)| {
                    TopicPartitions::default()
                        .with_topic_id(topic_id)
                        .with_partitions(partitions.into_iter().collect())
                })
                .collect(),
        )
    });
    let ok = response.error == 0;
    req.respond(
        &ShareGroupHeartbeatResponse::default()
            .with_error_code(response.error)
            .with_error_message(response.message.as_deref().map(str_bytes))
            .with_member_id(ok.then(|| str_bytes(&response.member_id)))
            .with_member_epoch(response.member_epoch)
            .with_heartbeat_interval_ms(response.heartbeat_interval_ms)
            .with_assignment(assignment),
    )
}
