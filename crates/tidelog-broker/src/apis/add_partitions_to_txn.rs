//! AddPartitionsToTxn. v0–3 are the producer's form: the partitions join the producer's
//! open transaction, which opens it. Unknown partitions fail the whole request: they get
//! UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, as Kafka answers.
//!
//! v4+ is the brokers' form (KIP-890): several transactions per request, each either
//! verified (`verify_only`: a partition not in the open transaction answers
//! TRANSACTION_ABORTABLE, a stale epoch PRODUCER_FENCED, a decision being written
//! CONCURRENT_TRANSACTIONS, as Kafka's coordinator answers) or added, and CLUSTER_ACTION
//! required (else the top-level CLUSTER_AUTHORIZATION_FAILED). An add at v5 is a TV2
//! client's (its partition added by its Produce v12+).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResponse, AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: AddPartitionsToTxnRequest = req.decode()?;
    if req.version() >= 4 {
        let response = batched(ctx, &req, request).await;
        return req.respond(&response);
    }
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
                false,
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

/// The brokers' form (v4+): each transaction answered on its own.
async fn batched(
    ctx: &Ctx,
    req: &Request,
    request: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    if let Err(code) = req.access(ctx).require_cluster(AclOperation::ClusterAction) {
        return AddPartitionsToTxnResponse::default().with_error_code(code);
    }
    let tv2 = req.version() >= 5;
    let mut results = Vec::with_capacity(request.transactions.len());
    for txn in request.transactions {
        results.push(one_transaction(ctx, txn, tv2).await);
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}

async fn one_transaction(
    ctx: &Ctx,
    txn: AddPartitionsToTxnTransaction,
    tv2: bool,
) -> AddPartitionsToTxnResult {
    let id = txn.transactional_id.0.to_string();
    let producer = (txn.producer_id.0, txn.producer_epoch);
    let image = ctx.metadata.image();
    let known = |name: &str, p: i32| {
        image
            .topic(name)
            .is_some_and(|t| t.partitions.contains_key(&p))
    };
    let pairs: Vec<(String, i32)> = txn
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.0.to_string(), *p)))
        .collect();
    let any_unknown = pairs.iter().any(|(t, p)| !known(t, *p));
    // One code per partition, in `pairs` order.
    let codes: Vec<i16> = if any_unknown {
        pairs
            .iter()
            .map(|(t, p)| {
                if known(t, *p) {
                    ResponseError::OperationNotAttempted.code()
                } else {
                    ResponseError::UnknownTopicOrPartition.code()
                }
            })
            .collect()
    } else if !ctx.txns.coordinates(&id) {
        vec![ResponseError::NotCoordinator.code(); pairs.len()]
    } else if txn.verify_only {
        // A partition not in the transaction: TRANSACTION_ABORTABLE, as Kafka's
        // coordinator answers (the asking broker turns it into what its client knows).
        match ctx.txns.verify_only(&id, producer, pairs.clone()).await {
            Ok(found) => found
                .into_iter()
                .map(|in_txn| {
                    if in_txn {
                        0
                    } else {
                        ResponseError::TransactionAbortable.code()
                    }
                })
                .collect(),
            Err(e) => vec![e.code(true); pairs.len()],
        }
    } else {
        let code = ctx
            .txns
            .add_partitions(&id, producer, pairs.clone(), tv2)
            .await
            .err()
            .map_or(0, |e| e.code(true));
        vec![code; pairs.len()]
    };
    let mut codes = codes.into_iter();
    let topic_results = txn
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(*p)
                        .with_partition_error_code(
                            codes
                                .next()
                                .unwrap_or(ResponseError::UnknownServerError.code()),
                        )
                })
                .collect();
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(partitions)
        })
        .collect();
    AddPartitionsToTxnResult::default()
        .with_transactional_id(txn.transactional_id)
        .with_topic_results(topic_results)
}
