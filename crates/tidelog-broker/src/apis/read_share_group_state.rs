//! ReadShareGroupState: a share partition's leader on another node reads the state
//! this node's share coordinator keeps for it (KIP-932). Brokers only (CLUSTER_ACTION);
//! a key whose `__share_group_state` partition is not led here answers NOT_COORDINATOR.

use kafka_protocol::messages::read_share_group_state_request::ReadShareGroupStateRequest;
use kafka_protocol::messages::read_share_group_state_response::{
    PartitionResult, ReadShareGroupStateResponse, ReadStateResult,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::share_state_each::{by_topic, partitions_of};
use super::Request;
use crate::context::Ctx;
use crate::net::Reply;
use crate::share::state::remote::read_result;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: ReadShareGroupStateRequest = req.decode()?;
    let refused = req
        .access(ctx)
        .require_cluster(AclOperation::ClusterAction)
        .err();
    let group = request.group_id.as_str().to_string();
    let mut answers = Vec::new();
    for (topic_id, p) in partitions_of(&request.topics, |t| (t.topic_id, &t.partitions[..])) {
        let answer = match refused {
            Some(code) => PartitionResult::default()
                .with_partition(p.partition)
                .with_error_code(code),
            None => {
                let key = (group.clone(), topic_id, p.partition);
                match ctx.share_state.read_here(key, p.leader_epoch).await {
                    Ok(stored) => read_result(p.partition, stored.as_ref()),
                    Err(e) => PartitionResult::default()
                        .with_partition(p.partition)
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
            ReadStateResult::default()
                .with_topic_id(id)
                .with_partitions(partitions)
        })
        .collect();
    req.respond(&ReadShareGroupStateResponse::default().with_results(results))
}
