//! InitProducerId. Without a transactional id (idempotent producer): a fresh producer id
//! from the controller's never-reused blocks, epoch 0, every time, as Kafka's coordinator
//! answers, also when the producer names its current id and epoch (KIP-360's reset
//! after a lost or timed-out batch): a new id never meets the old one's sequence state
//! or its requests still in flight.
//!
//! With a transactional id the transaction coordinator answers: the id keeps its
//! producer id across sessions and each InitProducerId bumps the epoch, fencing the
//! previous producer and aborting its open transaction.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::ProducerId;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: InitProducerIdRequest = req.decode()?;
    let response = InitProducerIdResponse::default();
    let failed = |code: i16| {
        InitProducerIdResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    let access = req.access(ctx);
    if let Some(id) = request
        .transactional_id
        .as_ref()
        .filter(|t| !t.0.is_empty())
    {
        // WRITE on the transactional id.
        if let Some(code) =
            access.refused(AclOperation::Write, ResourceType::TransactionalId, &id.0)
        {
            return req.respond(&failed(code));
        }
        let current = (request.producer_id.0 >= 0 && request.producer_epoch >= 0)
            .then_some((request.producer_id.0, request.producer_epoch));
        // PRODUCER_FENCED exists on the wire from v4; older clients know INVALID_PRODUCER_EPOCH.
        let producer_fenced = req.version() >= 4;
        let outcome = match crate::txn::ensure_txn_topic(ctx).await {
            Ok(()) => ctx
                .txns
                .init_producer_id(id.0.as_str(), request.transaction_timeout_ms, current)
                .await
                .map_err(|e| e.code(producer_fenced)),
            Err(e) => Err(e.code()),
        };
        let answer = match outcome {
            Ok((producer_id, epoch)) => response
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch),
            Err(code) => failed(code),
        };
        return req.respond(&answer);
    }
    // An idempotent producer: IDEMPOTENT_WRITE on the cluster or WRITE on some topic
    // (KIP-679), else CLUSTER_AUTHORIZATION_FAILED.
    if !access.cluster(AclOperation::IdempotentWrite)
        && !access.on_any(AclOperation::Write, ResourceType::Topic)
    {
        return req.respond(&failed(ResponseError::ClusterAuthorizationFailed.code()));
    }
    let response = match ctx.metadata.allocate_producer_id(ctx.node_id()).await {
        Ok(id) => response
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => {
            tracing::error!(error = %e, "allocating a producer id failed");
            failed(crate::metadata::producer_id_error(&e))
        }
    };
    req.respond(&response)
}
