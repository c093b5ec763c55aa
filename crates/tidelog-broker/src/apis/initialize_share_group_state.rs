//! InitializeShareGroupState: the group coordinator on another node sets a share
//! partition's start offset at a new state epoch (AlterShareGroupOffsets). Brokers only
//! (CLUSTER_ACTION); a key whose `__share_group_state` partition is not led here answers
//! NOT_COORDINATOR, an older state epoch than the stored one FENCED_STATE_EPOCH.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::initialize_share_group_state_request::{
    InitializeShareGroupStateRequest, PartitionData,
};
use kafka_protocol::messages::initialize_share_group_state_response::{
    InitializeShareGroupStateResponse, InitializeStateResult, PartitionResult,
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
    let request: InitializeShareGroupStateRequest = req.decode()?;
    let refused = req
        .access(ctx)
        .require_cluster(AclOperation::ClusterAction)
        .err();
    let group = request.group_id.as_str().to_string();
    let mut answers = Vec::new();
    for (topic_id, p) in partitions_of(&request.topics, |t| (t.topic_id, &t.partitions[..])) {
        let outcome = match refused {
            Some(code) => Err((code, None)),
            None if p.start_offset < 0 || p.state_epoch < 0 => Err((
                ResponseError::InvalidRequest.code(),
                Some("a start offset and a state epoch are never negative".into()),
            )),
            None => {
                let key = (group.clone(), topic_id, p.partition);
                let set = ctx
                    .share_state
                    .initialize_here(key, p.state_epoch, p.start_offset)
                    .await;
                set.map_err(|e| (e.code(), Some(e.to_string())))
            }
        };
        answers.push((topic_id, result(p, outcome)));
    }
    let results = by_topic(answers)
        .into_iter()
        .map(|(id, partitions)| {
            InitializeStateResult::default()
                .with_topic_id(id)
                .with_partitions(partitions)
        })
        .collect();
    req.respond(&InitializeShareGroupStateResponse::default().with_results(results))
}
