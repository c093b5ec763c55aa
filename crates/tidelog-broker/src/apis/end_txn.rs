//! EndTxn: commit or abort the producer's open transaction. The decision is recorded
//! first, then the markers are written; the answer waits (bounded) for them, and once
//! the decision is recorded it is success whatever the markers do (they are retried).
//!
//! v5 is transaction version 2 (KIP-890 part 2): the decision bumps the producer epoch
//! (a new producer id when the epoch is exhausted), the markers carry the new epoch, and
//! the answer names the producer id and epoch the client continues with; a retried v5
//! (the epoch one below) is recognised. v4 and below keep the epoch (TV1).

use kafka_protocol::messages::end_txn_request::EndTxnRequest;
use kafka_protocol::messages::end_txn_response::EndTxnResponse;
use kafka_protocol::messages::ProducerId;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: EndTxnRequest = req.decode()?;
    let producer_fenced = req.version() >= 2;
    let tv2 = req.version() >= 5;
    // WRITE on the transactional id.
    if let Some(code) = req.access(ctx).refused(
        AclOperation::Write,
        ResourceType::TransactionalId,
        request.transactional_id.0.as_str(),
    ) {
        return req.respond(&EndTxnResponse::default().with_error_code(code));
    }
    let ended = ctx
        .txns
        .end_txn(
            request.transactional_id.0.as_str(),
            (request.producer_id.0, request.producer_epoch),
            request.committed,
            tv2,
        )
        .await;
    // The producer fields exist on the wire from v5 (-1 when refused).
    let response = match ended {
        Ok((producer_id, epoch)) => EndTxnResponse::default()
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch),
        Err(e) => EndTxnResponse::default()
            .with_error_code(e.code(producer_fenced))
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    };
    req.respond(&response)
}
