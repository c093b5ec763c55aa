//! WriteShareGroupState: a share partition's leader on another node stores its state
//! with this node's share coordinator, answered once replicated (KIP-932). Brokers only
//! (CLUSTER_ACTION); a key not led here answers NOT_COORDINATOR, a leader older than
//! the state's FENCED_LEADER_EPOCH, a malformed state INVALID_REQUEST.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::write_share_group_state_request::WriteShareGroupStateRequest;
use kafka_protocol::messages::write_share_group_state_response::{
    PartitionResult, WriteShareGroupStateResponse, WriteStateResult,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;
use crate::share::state::remote::snapshot_of_write;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: WriteShareGroupStateRequest = req.decode()?;
    let refused = req
        .access(ctx)
        .require_cluster(AclOperation::ClusterAction)
        .err();
    let group = request.group_id.as_str().to_string();
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let result = PartitionResult::default().with_partition(p.partition);
            let answer = match (refused, snapshot_of_write(p)) {
                (Some(code), _) => result.with_error_code(code),
                (None, Err(why)) => result
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(why.into())),
                (None, Ok(snapshot)) => {
                    let key = (group.clone(), topic.topic_id, p.partition);
                    match ctx.share_state.write_here(key, snapshot).await {
                        Ok(()) => result,
                        Err(e) => result
                            .with_error_code(e.code())
                            .with_error_message(Some(e.to_string().into())),
                    }
                }
            };
            partitions.push(answer);
        }
        results.push(
            WriteStateResult::default()
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions),
        );
    }
    req.respond(&WriteShareGroupStateResponse::default().with_results(results))
}
