//! OffsetForLeaderEpoch: for each (partition, leader epoch) the largest epoch not above
//! it in the leader's epoch cache and the offset where that epoch ended (the log end
//! for the current epoch; for an epoch older than every one cached, the start of the
//! first, as Kafka answers). Consumers use it to detect log truncation after a leader
//! change (KIP-320); a request with a replica id must come from a registered broker.
//! Answered by the leader only, after the current-leader-epoch checks.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderEpochRequest;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderEpochResponse, OffsetForLeaderTopicResult,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::per_partition::{answer_each, led_partition};
use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 2, max: 4 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: OffsetForLeaderEpochRequest = req.decode()?;
    // The replica id is on the wire from v3; -2 marks a debugging client, -1 a consumer.
    let replica_id = if req.version() >= 3 {
        request.replica_id.0
    } else {
        -1
    };
    let refused = replica_id >= 0 && ctx.metadata.image().broker(replica_id).is_none();
    // A follower needs CLUSTER_ACTION, a consumer DESCRIBE on each topic.
    let access = req.access(ctx);
    let follower_denied = replica_id >= 0 && !access.cluster(AclOperation::ClusterAction);
    let topics = answer_each(
        request.topics,
        |topic| &topic.partitions,
        |topic, p| {
            let base = EpochEndOffset::default()
                .with_partition(p.partition)
                .with_leader_epoch(-1)
                .with_end_offset(-1);
            let found = if refused {
                Err(ResponseError::ClusterAuthorizationFailed.code())
            } else if follower_denied
                || (replica_id < 0 && !access.topic(AclOperation::Describe, &topic.topic.0))
            {
                Err(ResponseError::TopicAuthorizationFailed.code())
            } else {
                lookup(
                    ctx,
                    &topic.topic.0,
                    p.partition,
                    p.current_leader_epoch,
                    p.leader_epoch,
                )
            };
            match found {
                Ok((epoch, end)) => base.with_leader_epoch(epoch).with_end_offset(end),
                Err(code) => base.with_error_code(code),
            }
        },
        |topic, partitions| {
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic)
                .with_partitions(partitions)
        },
    );
    req.respond(&OffsetForLeaderEpochResponse::default().with_topics(topics))
}

fn lookup(
    ctx: &Ctx,
    topic: &str,
    partition: i32,
    current_leader_epoch: i32,
    epoch: i32,
) -> Result<(i32, i64), i16> {
    led_partition(ctx, topic, partition, current_leader_epoch)?
        .end_offset_for_epoch(epoch)
        .map_err(|e| e.code())
}
