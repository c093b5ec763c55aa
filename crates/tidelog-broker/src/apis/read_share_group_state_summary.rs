//! ReadShareGroupStateSummary: the group coordinator on another node reads a share
//! partition's start offset and epochs (DescribeShareGroupOffsets), with no leader
//! fencing. Brokers only (CLUSTER_ACTION); a key whose `__share_group_state` partition is
//! not led here answers NOT_COORDINATOR.

use kafka_protocol::messages::read_share_group_state_summary_request::{
    PartitionData, ReadShareGroupStateSummaryRequest,
};
use kafka_protocol::messages::read_share_group_state_summary_response::{
    PartitionResult, ReadShareGroupStateSummaryResponse, ReadStateSummaryResult,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::share_state_each::{by_topic, partitions_of, Refusal};
use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

/// v1 answers the delivery-complete count (KIP-1226).
pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

fn refusal(p: &PartitionData, (code, message): Refusal) -> PartitionResult {
    PartitionResult::default()
        .with_partition(p.partition)
        .with_error_code(code)
        .with_error_message(message.map(Into::into))
}

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: ReadShareGroupStateSummaryRequest = req.decode()?;
    let refused = req
        .access(ctx)
        .require_cluster(AclOperation::ClusterAction)
        .err();
    let group = request.group_id.as_str().to_string();
    let mut answers = Vec::new();
    for (topic_id, p) in partitions_of(&request.topics, |t| (t.topic_id, &t.partitions[..])) {
        let answer = PartitionResult::default().with_partition(p.partition);
        let answer = match refused {
            Some(code) => refusal(p, (code, None)),
            None => match ctx
                .share_state
                .summary_here((group.clone(), topic_id, p.partition))
                .await
            {
                Ok(Some(s)) => answer
                    .with_state_epoch(s.state_epoch)
                    .with_leader_epoch(s.leader_epoch)
                    .with_start_offset(s.start_offset)
                    .with_delivery_complete_count(s.delivery_complete_count),
                Ok(None) => answer.with_leader_epoch(-1).with_start_offset(-1),
                Err(e) => refusal(p, (e.code(), Some(e.to_string()))),
            },
        };
        answers.push((topic_id, answer));
    }
    let results = by_topic(answers)
        .into_iter()
        .map(|(id, partitions)| {
            ReadStateSummaryResult::default()
                .with_topic_id(id)
                .with_partitions(partitions)
        })
        .collect();
    req.respond(&ReadShareGroupStateSummaryResponse::default().with_results(results))
}
