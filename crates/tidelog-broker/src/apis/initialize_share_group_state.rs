//! InitializeShareGroupState: the group coordinator on another node sets a share
//! partition's start offset at a new state epoch (AlterShareGroupOffsets). Brokers only
//! (CLUSTER_ACTION); a key whose `__share_group_state` partition is not led here answers
//! NOT_COORDINATOR, an older state epoch than the stored one FENCED_STATE_EPOCH.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::initialize_share_group_state_request::InitializeShareGroupStateRequest;
use kafka_protocol::messages::initialize_share_group_state_response::{
    InitializeShareGroupStateResponse, InitializeStateResult, PartitionResult,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: InitializeShareGroupStateRequest = req.decode()?;
    let refused = req
        .access(ctx)
        .require_cluster(AclOperation::ClusterAction)
        .err();
    let group = request.group_id.as_str().to_string();
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let answer = PartitionResult::default().with_partition(p.partition);
            let outcome = match refused {
                Some(code) => Err((code, None)),
                None if p.start_offset < 0 || p.state_epoch < 0 => Err((
                    ResponseError::InvalidRequest.code(),
                    Some("a start offset and a state epoch are never negative".to_string()),
                )),
                None => {
                    let key = (group.clone(), topic.topic_id, p.partition);
                    ctx.share_state
                        .initialize_here(key, p.state_epoch, p.start_offset)
                        .await
                        .map_err(|e| (e.code(), Some(e.to_string())))
                }
            };
            partitions.push(match outcome {
                Ok(()) => answer,
                Err((code, message)) => answer
                    .with_error_code(code)
                    .with_error_message(message.map(Into::into)),
            });
        }
        results.push(
            InitializeStateResult::default()
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions),
        );
    }
    req.respond(&InitializeShareGroupStateResponse::default().with_results(results))
}
