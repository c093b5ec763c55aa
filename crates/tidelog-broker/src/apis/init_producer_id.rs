//! InitProducerId for the idempotent producer: a producer id from the controller's
//! never-reused blocks, epoch 0; a producer that re-initialises with its id gets the
//! epoch bumped (a fresh id once the epoch would overflow).
//!
//! Transactional ids need the transaction coordinator, which does not exist yet; they
//! are refused with a clear error rather than handed a non-transactional id.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::ProducerId;
use kafka_protocol::protocol::VersionRange;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: InitProducerIdRequest = req.decode()?;
    let response = InitProducerIdResponse::default();
    if request.transactional_id.is_some() {
        let refused = response
            .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        return req.respond(&refused);
    }
    let bump = request.producer_id.0 >= 0
        && request.producer_epoch >= 0
        && request.producer_epoch < i16::MAX - 1;
    let response = if bump {
        response
            .with_producer_id(request.producer_id)
            .with_producer_epoch(request.producer_epoch + 1)
    } else {
        match ctx
            .metadata
            .change(&ctx.replicas, &ctx.config, |c| c.allocate_producer_id())
        {
            Ok(id) => response
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(0),
            Err(e) => {
                tracing::error!(error = %e, "allocating a producer id failed");
                response
                    .with_error_code(ResponseError::KafkaStorageError.code())
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
            }
        }
    };
    req.respond(&response)
}
