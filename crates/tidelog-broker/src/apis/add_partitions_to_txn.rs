//! AddPartitionsToTxn (v0–3, the producer's form): the partitions join the producer's
//! open transaction, which opens it. Unknown partitions fail the whole request: they get
//! UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, as Kafka answers.
//! v4+ (brokers verifying on behalf of producers) is not offered.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnRequest;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResponse, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 3 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: AddPartitionsToTxnRequest = req.decode()?;
    let image = ctx.metadata.image();
    let mut wanted: Vec<(String, i32)> = Vec::new();
    let mut unknown: Vec<(String, i32)> = Vec::new();
    for topic in &request.v3_and_below_topics {
        let name = topic.name.0.to_string();
        let known = image.topic(&name);
        for p in &topic.partitions {
            let pair = (name.clone(), *p);
            if known.is_some_and(|t| t.partitions.contains_key(p)) {
                wanted.push(pair);
            } else {
                unknown.push(pair);
            }
        }
    }
    let producer_fenced = req.version() >= 2;
    // WRITE on the transactional id (else every partition answers
    // TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic (else its partitions
    // answer TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED).
    let access = req.access(ctx);
    let txn_refused = access.refused(
        AclOperation::Write,
        ResourceType::TransactionalId,
        request.v3_and_below_transactional_id.0.as_str(),
    );
    let topic_refused = |name: &str| access.refused(AclOperation::Write, ResourceType::Topic, name);
    let any_topic_refused = request
        .v3_and_below_topics
        .iter()
        .any(|t| topic_refused(&t.name.0).is_some());
    let code = if let Some(code) = txn_refused {
        code
    } else if any_topic_refused {
        ResponseError::OperationNotAttempted.code()
    } else if unknown.is_empty() {
        ctx.txns
            .add_partitions(
                request.v3_and_below_transactional_id.0.as_str(),
                (
                    request.v3_and_below_producer_id.0,
                    request.v3_and_below_producer_epoch,
                ),
                wanted,
            )
            .await
            .err()
            .map_or(0, |e| e.code(producer_fenced))
    } else {
        ResponseError::OperationNotAttempted.code()
    };
    let results = request
        .v3_and_below_topics
        .iter()
        .map(|topic| {
            let name = topic.name.0.to_string();
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let refused = txn_refused
                        .is_none()
                        .then(|| topic_refused(&name))
                        .flatten();
                    let error = if let Some(code) = refused {
                        code
                    } else if unknown.contains(&(name.clone(), *p)) {
                        ResponseError::UnknownTopicOrPartition.code()
                    } else {
                        code
                    };
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(*p)
                        .with_partition_error_code(error)
                })
                .collect();
            AddPartitionsToTxnTopicResult::default()
                .with_name(topic.name.clone())
                .with_results_by_partition(partitions)
        })
        .collect();
    req.respond(&AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results))
}
