//! DescribeProducers: the producers a partition's leader remembers (idempotence and
//! transaction state), with their open transaction's first offset.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_producers_request::DescribeProducersRequest;
use kafka_protocol::messages::describe_producers_response::{
    DescribeProducersResponse, PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::ProducerId;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DescribeProducersRequest = req.decode()?;
    // READ on each topic, else TOPIC_AUTHORIZATION_FAILED.
    let access = req.access(ctx);
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partition_indexes
                .iter()
                .map(|index| {
                    if access.topic(AclOperation::Read, &topic.name.0) {
                        describe(ctx, topic.name.0.as_str(), *index)
                    } else {
                        PartitionResponse::default()
                            .with_partition_index(*index)
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    }
                })
                .collect();
            TopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    req.respond(&DescribeProducersResponse::default().with_topics(topics))
}

fn describe(ctx: &Ctx, topic: &str, index: i32) -> PartitionResponse {
    let answer = PartitionResponse::default().with_partition_index(index);
    let Some(p) = ctx.replicas.get(topic, index) else {
        return answer.with_error_code(ResponseError::UnknownTopicOrPartition.code());
    };
    let producers = p.with_log(|log| {
        Ok(log
            .producer_state()
            .iter()
            .map(|(id, entry)| {
                let last = entry.batches.back();
                ProducerState::default()
                    .with_producer_id(ProducerId(id))
                    .with_producer_epoch(i32::from(entry.epoch))
                    .with_last_sequence(last.map_or(-1, |b| b.last_seq))
                    .with_last_timestamp(last.map_or(-1, |b| b.timestamp))
                    .with_coordinator_epoch(-1)
                    .with_current_txn_start_offset(entry.current_txn_first_offset.unwrap_or(-1))
            })
            .collect::<Vec<_>>())
    });
    match producers {
        Ok(active) => answer.with_active_producers(active),
        Err(e) => answer.with_error_code(e.code()),
    }
}
