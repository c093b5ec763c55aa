//! ShareAcknowledge (KIP-932): a share-group member acknowledges records it acquired
//! (ACCEPT, RELEASE, REJECT, or GAP for offsets that held no record) without fetching,
//! within its share session; epoch -1 acknowledges and closes the session. Version 2
//! (KIP-1222) adds RENEW, which keeps a record acquired under a new lock, and answers
//! the lock duration (`acquisition_lock_timeout_ms`) so the client knows how long.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_acknowledge_request::ShareAcknowledgeRequest;
use kafka_protocol::messages::share_acknowledge_response::{
    LeaderIdAndEpoch, PartitionData, ShareAcknowledgeResponse, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::group::str_bytes;
use crate::net::Reply;
use crate::share::fetch::{self, AckBatch};
use crate::share::session::SessionStep;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 1, max: 2 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: ShareAcknowledgeRequest = req.decode()?;
    let (Some(group), Some(member)) = (
        request.group_id.as_ref().map(|g| g.0.to_string()),
        request.member_id.as_ref().map(|m| m.to_string()),
    ) else {
        return req.respond(
            &ShareAcknowledgeResponse::default()
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_error_message(Some(str_bytes("GroupId and MemberId are required."))),
        );
    };
    let access = req.access(ctx);
    if let Some(code) = access.refused(AclOperation::Read, ResourceType::Group, &group) {
        return req.respond(&ShareAcknowledgeResponse::default().with_error_code(code));
    }
    let key = (group.clone(), member.clone());
    let step = match ctx.shares.sessions.acknowledge_step(
        &key,
        request.share_session_epoch,
        std::time::Instant::now(),
    ) {
        Ok(s) => s,
        Err(e) => {
            return req.respond(&ShareAcknowledgeResponse::default().with_error_code(e.code()))
        }
    };
    let renew_in_version = req.version() >= 2;
    let image = ctx.metadata.image();
    let mut topics = Vec::new();
    for t in &request.topics {
        let denied = image
            .topic_by_id(&t.topic_id)
            .is_some_and(|topic| !access.topic(AclOperation::Read, &topic.name));
        let mut partitions = Vec::new();
        for p in &t.partitions {
            let error = if denied {
                Some(ResponseError::TopicAuthorizationFailed)
            } else {
                let batches: Vec<AckBatch> = p
                    .acknowledgement_batches
                    .iter()
                    .map(|b| AckBatch::new(b.first_offset, b.last_offset, &b.acknowledge_types))
                    .collect();
                fetch::acknowledge(
                    ctx,
                    (&group, &member),
                    (t.topic_id, p.partition_index),
                    &batches,
                    renew_in_version,
                )
                .await
            };
            partitions.push(
                PartitionData::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(error.map_or(0, |e| e.code()))
                    .with_current_leader(
                        LeaderIdAndEpoch::default()
                            .with_leader_id(-1)
                            .with_leader_epoch(-1),
                    ),
            );
        }
        topics.push(
            ShareAcknowledgeTopicResponse::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    if let SessionStep::Closed(partitions) = step {
        ctx.shares.release(&group, &member, &partitions);
    }
    req.respond(
        &ShareAcknowledgeResponse::default()
            .with_acquisition_lock_timeout_ms(super::share_fetch::lock_timeout_ms(ctx, &group))
            .with_responses(topics),
    )
}
