//! DeleteShareGroupState: the group coordinator on another node deletes a share
//! partition's state (DeleteShareGroupOffsets, DeleteGroups). Brokers only
//! (CLUSTER_ACTION); a key whose `__share_group_state` partition is not led here answers
//! NOT_COORDINATOR.

use kafka_protocol::messages::delete_share_group_state_request::{
    DeleteShareGroupStateRequest, PartitionData,
};
use kafka_protocol::messages::delete_share_group_state_response::{
    DeleteShareGroupStateResponse, DeleteStateResult, PartitionResult,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::share_state_each::{by_topic, partitions_of, Refusal};
use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

fn result(p: &PartitionData, outcome: Result<(), Refusal>) -> PartitionResult {
    let answer = PartitionResult::default().with_partition(p.partition);
    match outcome {
        Ok(()) => answer,
        Err((code, message)) => answer
            .with_error_code(code)
            .with_error_message(message.map(Into::into)),
    }
}

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DeleteShareGroupStateRequest = req.decode()?;
    let refused = req
        .access(ctx)
        .require_cluster(AclOperation::ClusterAction)
        .err();
    let group = request.group_id.as_str().to_string();
    let mut answers = Vec::new();
    for (topic_id, p) in partitions_of(&request.topics, |t| (t.topic_id, &t.partitions[..])) {
        let outcome = match refused {
            Some(code) => Err((code, None)),
            None => {
                let key = (group.clone(), topic_id, p.partition);
                let deleted = ctx.share_state.delete_here(key).await;
                deleted.map_err(|e| (e.code(), Some(e.to_string())))
            }
        };
        answers.push((topic_id, result(p, outcome)));
    }
    let results = by_topic(answers)
        .into_iter()
        .map(|(id, partitions)| {
            DeleteStateResult::default()
                .with_topic_id(id)
                .with_partitions(partitions)
        })
        .collect();
    req.respond(&DeleteShareGroupStateResponse::default().with_results(results))
}
