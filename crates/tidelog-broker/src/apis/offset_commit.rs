//! OffsetCommit: members commit within their generation; anyone may commit for a
//! group without members (generation -1, empty member id).

use kafka_protocol::messages::offset_commit_request::OffsetCommitRequest;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_protocol::ProtocolError;

use super::per_partition::answer_each;
use super::Request;
use crate::context::Ctx;
use crate::group::CommitRequest;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 2, max: 9 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: OffsetCommitRequest = req.decode()?;
    let offsets = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.name.0.to_string(),
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.committed_metadata.as_ref().map(|m| m.to_string()),
                )
            })
        })
        .collect();
    let commit = CommitRequest {
        group_id: request.group_id.0.to_string(),
        generation: request.generation_id_or_member_epoch,
        member_id: request.member_id.to_string(),
        instance_id: request.group_instance_id.as_ref().map(|s| s.to_string()),
        offsets,
    };
    let mut codes = ctx.groups.commit(commit).await.into_iter();
    let topics = answer_each(
        request.topics,
        |t| &t.partitions,
        |_, p| {
            OffsetCommitResponsePartition::default()
                .with_partition_index(p.partition_index)
                .with_error_code(codes.next().unwrap_or(0))
        },
        |t, partitions| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        },
    );
    req.respond(&OffsetCommitResponse::default().with_topics(topics))
}
