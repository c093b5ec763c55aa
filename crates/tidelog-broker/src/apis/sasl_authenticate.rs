//! SaslAuthenticate outside a SASL exchange (see `sasl_handshake`): Kafka answers
//! ILLEGAL_SASL_STATE with this message.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::sasl_authenticate_request::SaslAuthenticateRequest;
use kafka_protocol::messages::sasl_authenticate_response::SaslAuthenticateResponse;
use kafka_protocol::protocol::{StrBytes, VersionRange};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

pub(crate) async fn handle(_ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let _request: SaslAuthenticateRequest = req.decode()?;
    req.respond(
        &SaslAuthenticateResponse::default()
            .with_error_code(ResponseError::IllegalSaslState.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "SaslAuthenticate request received after successful authentication",
            ))),
    )
}
