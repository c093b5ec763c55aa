//! TxnOffsetCommit: consumer offsets sent inside a transaction. They are kept with the
//! transaction (in `__transaction_state`) and become the group's committed offsets only
//! when the transaction commits; an abort drops them. On a cluster, a group coordinator
//! that is not the transaction's keeps them until the transaction's marker decides
//! (`txn::foreign`), and a node that does not coordinate the group refuses them with
//! NOT_COORDINATOR. Unknown partitions are refused one by one.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequest;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponse, TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;
use crate::txn::{Committer, PendingOffset};

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: TxnOffsetCommitRequest = req.decode()?;
    let image = ctx.metadata.image();
    let known = |topic: &str, p: i32| {
        image
            .topic(topic)
            .is_some_and(|t| t.partitions.contains_key(&p))
    };
    let mut offsets = Vec::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            if known(topic.name.0.as_str(), p.partition_index) {
                offsets.push((
                    topic.name.0.to_string(),
                    p.partition_index,
                    PendingOffset {
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                    },
                ));
            }
        }
    }
    let fenced = if req.version() >= 3 {
        ResponseError::ProducerFenced
    } else {
        ResponseError::InvalidProducerEpoch
    };
    let committer = Committer {
        generation: request.generation_id,
        member_id: request.member_id.to_string(),
        instance_id: request.group_instance_id.as_ref().map(|s| s.to_string()),
    };
    let code = ctx
        .txns
        .txn_offset_commit(
            ctx,
            request.transactional_id.0.as_str(),
            (request.producer_id.0, request.producer_epoch),
            request.group_id.0.as_str(),
            committer,
            &offsets,
            fenced.code(),
        )
        .err()
        .unwrap_or(0);
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let error = if known(topic.name.0.as_str(), p.partition_index) {
                        code
                    } else {
                        ResponseError::UnknownTopicOrPartition.code()
                    };
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(error)
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    req.respond(&TxnOffsetCommitResponse::default().with_topics(topics))
}
