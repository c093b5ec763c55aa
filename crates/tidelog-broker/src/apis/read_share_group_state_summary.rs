//! ReadShareGroupStateSummary: the group coordinator on another node reads a share
//! partition's start offset and epochs (DescribeShareGroupOffsets), with no leader
//! fencing. Brokers only (CLUSTER_ACTION); a key whose `__share_group_state` partition is
//! not led here answers NOT_COORDINATOR.

use kafka_protocol::messages::read_share_group_state_summary_request::ReadShareGroupStateSummaryRequest;
use kafka_protocol::messages::read_share_group_state_summary_response::{
    PartitionResult, ReadShareGroupStateSummaryResponse, ReadStateSummaryResult,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: ReadShareGroupStateSummaryRequest = req.decode()?;
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
            let answer = match refused {
                Some(code) => answer.with_error_code(code),
                None => {
                    let key = (group.clone(), topic.topic_id, p.partition);
                    match ctx.share_state.summary_here(key).await {
                        Ok(Some(s)) => answer
                            .with_state_epoch(s.state_epoch)
                            .with_leader_epoch(s.leader_epoch)
                            .with_start_offset(s.start_offset),
                        Ok(None) => answer.with_leader_epoch(-1).with_start_offset(-1),
                        Err(e) => answer
                            .with_error_code(e.code())
                            .with_error_message(Some(e.to_string().into())),
                    }
                }
            };
            partitions.push(answer);
        }
        results.push(
            ReadStateSummaryResult::default()
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions),
        );
    }
    req.respond(&ReadShareGroupStateSummaryResponse::default().with_results(results))
}
