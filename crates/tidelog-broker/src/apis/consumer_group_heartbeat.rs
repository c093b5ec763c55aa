//! ConsumerGroupHeartbeat (KIP-848): a consumer-protocol member joins, heartbeats,
//! reconciles and leaves through this one API; the coordinator answers with its member
//! epoch and, when it changed or was asked for, its assignment.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_request::ConsumerGroupHeartbeatRequest;
use kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment, ConsumerGroupHeartbeatResponse, TopicPartitions,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::auth::Access;
use crate::context::Ctx;
use crate::group::consumer::heartbeat::HeartbeatRequest;
use crate::group::consumer::TopicFilter;
use crate::group::str_bytes;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: ConsumerGroupHeartbeatRequest = req.decode()?;
    let group = request.group_id.0.to_string();
    let access = req.access(ctx);
    if let Some(code) = access.refused(AclOperation::Read, ResourceType::Group, &group) {
        return req.respond(&ConsumerGroupHeartbeatResponse::default().with_error_code(code));
    }
    // KAFKA-18813: a member names only topics it may describe, and its regex resolves
    // to those alone, so membership never reveals a topic's id or partitions.
    if let Some(code) = undescribable_topics(&access, request.subscribed_topic_names.as_deref()) {
        return req.respond(&ConsumerGroupHeartbeatResponse::default().with_error_code(code));
    }
    let describable = describable_topics(access);
    let owned = request.topic_partitions.as_ref().map(|topics| {
        let mut owned = BTreeMap::new();
        for t in topics {
            let partitions: &mut std::collections::BTreeSet<i32> =
                owned.entry(t.topic_id).or_default();
            partitions.extend(t.partitions.iter().copied());
        }
        owned
    });
    let heartbeat = HeartbeatRequest {
        group_id: group,
        // v0 lets a joining member leave its id to the coordinator (v1+: the client's).
        member_id: if request.member_id.is_empty()
            && req.version() == 0
            && request.member_epoch == 0
        {
            uuid::Uuid::new_v4().to_string()
        } else {
            request.member_id.to_string()
        },
        member_epoch: request.member_epoch,
        instance_id: request.instance_id.as_ref().map(|s| s.to_string()),
        rack_id: request.rack_id.as_ref().map(|s| s.to_string()),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topic_names: request
            .subscribed_topic_names
            .as_ref()
            .map(|names| names.iter().map(|n| n.0.to_string()).collect()),
        subscribed_topic_regex: request
            .subscribed_topic_regex
            .as_ref()
            .map(|s| s.to_string()),
        server_assignor: request.server_assignor.as_ref().map(|s| s.to_string()),
        owned,
        client_id: req.client_id(),
        client_host: format!("/{}", req.peer.ip()),
        classic: None,
    };
    let response = match ctx.groups.consumer_heartbeat(heartbeat, describable).await {
        Ok(r) => r,
        Err(e) => {
            return req
                .respond(&ConsumerGroupHeartbeatResponse::default().with_error_code(e.code()))
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
        &ConsumerGroupHeartbeatResponse::default()
            .with_error_code(response.error)
            .with_error_message(response.message.as_deref().map(str_bytes))
            .with_member_id(ok.then(|| str_bytes(&response.member_id)))
            .with_member_epoch(response.member_epoch)
            .with_heartbeat_interval_ms(response.heartbeat_interval_ms)
            .with_assignment(assignment),
    )
}

/// TOPIC_AUTHORIZATION_FAILED when the principal may not describe one of the topics a
/// group member subscribes to by name (KafkaApis' check before the coordinator).
pub(crate) fn undescribable_topics(access: &Access, names: Option<&[TopicName]>) -> Option<i16> {
    names?
        .iter()
        .any(|name| !access.topic(AclOperation::Describe, name))
        .then(|| ResponseError::TopicAuthorizationFailed.code())
}

/// The topics the principal may describe, as the group coordinator asks it.
fn describable_topics(access: Access) -> TopicFilter {
    if access.enabled() {
        TopicFilter::new(move |topic| access.topic(AclOperation::Describe, topic))
    } else {
        TopicFilter::default()
    }
}
