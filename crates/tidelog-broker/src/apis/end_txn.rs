//! EndTxn: commit or abort the producer's open transaction. The decision is recorded
//! first, then the markers are written; once the decision is recorded the answer is
//! success, and markers that could not be written yet are retried in the background.
//! v5 (a new epoch per transaction) is not offered.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::end_txn_request::EndTxnRequest;
use kafka_protocol::messages::end_txn_response::EndTxnResponse;
use kafka_protocol::protocol::VersionRange;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: EndTxnRequest = req.decode()?;
    let fenced = if req.version() >= 2 {
        ResponseError::ProducerFenced
    } else {
        ResponseError::InvalidProducerEpoch
    };
    let code = ctx
        .txns
        .end_txn(
            ctx,
            request.transactional_id.0.as_str(),
            (request.producer_id.0, request.producer_epoch),
            request.committed,
            fenced.code(),
        )
        .err()
        .unwrap_or(0);
    req.respond(&EndTxnResponse::default().with_error_code(code))
}
