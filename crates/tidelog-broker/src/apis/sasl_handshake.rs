//! SaslHandshake outside a SASL exchange: on a listener without SASL, or on an
//! authenticated connection whose client cannot re-authenticate (it used
//! SaslAuthenticate v0). Kafka answers ILLEGAL_SASL_STATE there. On a SASL listener
//! the exchange itself (`net::sasl`) answers it before anything reaches this table.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::sasl_handshake_request::SaslHandshakeRequest;
use kafka_protocol::messages::sasl_handshake_response::SaslHandshakeResponse;
use kafka_protocol::protocol::VersionRange;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

pub(crate) async fn handle(_ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let _request: SaslHandshakeRequest = req.decode()?;
    req.respond(
        &SaslHandshakeResponse::default().with_error_code(ResponseError::IllegalSaslState.code()),
    )
}
