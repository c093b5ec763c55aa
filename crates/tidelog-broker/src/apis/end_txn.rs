//! EndTxn: commit or abort the producer's open transaction. The decision is recorded
//! first, then the markers are written; the answer waits (bounded) for them, and once
//! the decision is recorded it is success whatever the markers do (they are retried).
//! v5 (a new epoch per transaction) is not offered.

use kafka_protocol::messages::end_txn_request::EndTxnRequest;
use kafka_protocol::messages::end_txn_response::EndTxnResponse;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: EndTxnRequest = req.decode()?;
    let producer_fenced = req.version() >= 2;
    // WRITE on the transactional id.
    if let Some(code) = req.access(ctx).refused(
        AclOperation::Write,
        ResourceType::TransactionalId,
        request.transactional_id.0.as_str(),
    ) {
        return req.respond(&EndTxnResponse::default().with_error_code(code));
    }
    let code = ctx
        .txns
        .end_txn(
            request.transactional_id.0.as_str(),
            (request.producer_id.0, request.producer_epoch),
            request.committed,
        )
        .await
        .err()
        .map_or(0, |e| e.code(producer_fenced));
    req.respond(&EndTxnResponse::default().with_error_code(code))
}
