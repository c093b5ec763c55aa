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

use super::share_state_each::{by_topic, partitions_of};
use super::Request;
use crate::context::Ctx;
use crate::net::Reply;
use crate::share::state::remote::snapshot_of_write;

/// v1 carries the delivery-complete count (KIP-1226).
pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: WriteShareGroupStateRequest = req.decode()?;
    let refused = req
        .access(ctx)
        .require_cluster(AclOperation::ClusterAction)
        .err();
    let group = request.group_id.as_str().to_string();
    let mut answers = Vec::new();
    for (topic_id, p) in partitions_of(&request.topics, |t| (t.topic_id, &t.partitions[..])) {
        let result = PartitionResult::default().with_partition(p.partition);
        let answer = match (refused, snapshot_of_write(p)) {
            (Some(code), _) => result.with_error_code(code),
            (None, Err(why)) => result
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_error_message(Some(why.into())),
            (None, Ok(snapshot)) => {
                let key = (group.clone(), topic_id, p.partition);
                match ctx.share_state.write_here(key, snapshot).await {
                    Ok(()) => result,
                    Err(e) => result
                        .with_error_code(e.code())
                        .with_error_message(Some(e.to_string().into())),
                }
            }
        };
        answers.push((topic_id, answer));
    }
    let results = by_topic(answers)
        .into_iter()
        .map(|(id, partitions)| {
            WriteStateResult::default()
                .with_topic_id(id)
                .with_partitions(partitions)
        })
        .collect();
    req.respond(&WriteShareGroupStateResponse::default().with_results(results))
}
