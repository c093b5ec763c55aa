//! DeleteShareGroupState: the group coordinator on another node deletes a share
//! partition's state (DeleteShareGroupOffsets). Brokers only (CLUSTER_ACTION); a key
//! whose `__share_group_state` partition is not led here answers NOT_COORDINATOR.

use kafka_protocol::messages::delete_share_group_state_request::DeleteShareGroupStateRequest;
use kafka_protocol::messages::delete_share_group_state_response::{
    DeleteShareGroupStateResponse, DeleteStateResult, PartitionResult,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DeleteShareGroupStateRequest = req.decode()?;
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
                None => {
                    let key = (group.clone(), topic.topic_id, p.partition);
                    ctx.share_state
                        .delete_here(key)
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
            DeleteStateResult::default()
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions),
        );
    }
    req.respond(&DeleteShareGroupStateResponse::default().with_results(results))
}
