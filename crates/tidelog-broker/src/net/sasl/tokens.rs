//! The mechanism's tokens: bare after a v0 handshake, in SaslAuthenticate requests
//! after a v1 one.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::sasl_authenticate_request::SaslAuthenticateRequest;
use kafka_protocol::messages::sasl_authenticate_response::SaslAuthenticateResponse;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, StrBytes};
use tidelog_protocol::header::decode_request_header;
use tidelog_sasl::SaslError;

use super::{encode, failed, Exchange, Outcome, SaslSession};
use crate::sasl::{MechanismServer, SaslMechanism, Step};

impl Exchange<'_> {
    /// A token after a v0 handshake; answered as a size-prefixed token.
    pub(super) async fn raw_token(
        &self,
        token: &[u8],
        mechanism: SaslMechanism,
        server: &mut MechanismServer,
    ) -> Result<Option<SaslSession>, Outcome> {
        let image = self.ctx.metadata.image();
        let step = server
            .step(token, self.listener, &image)
            .await
            .map_err(|e| failed(Some(mechanism), None, &e.to_string()))?;
        let (reply, session) = match step {
            Step::Challenge(challenge) => (challenge, None),
            Step::Done(done) => {
                let (session, _) = self.session(mechanism, &done, false);
                (done.final_token, Some(session))
            }
        };
        let mut framed = Vec::with_capacity(4 + reply.len());
        framed.extend_from_slice(&u32::try_from(reply.len()).unwrap_or(0).to_be_bytes());
        framed.extend_from_slice(&reply);
        self.send(Bytes::from(framed)).await?;
        Ok(session)
    }

    /// A SaslAuthenticate request (anything else fails the exchange).
    pub(super) async fn authenticate_request(
        &self,
        frame: Bytes,
        mechanism: SaslMechanism,
        server: &mut MechanismServer,
        previous: Option<&SaslSession>,
    ) -> Result<Option<SaslSession>, Outcome> {
        let mut body = frame;
        let header = decode_request_header(&mut body)
            .map_err(|_| failed(Some(mechanism), None, "undecodable request header"))?;
        if header.api_key != ApiKey::SaslAuthenticate {
            return Err(failed(
                Some(mechanism),
                None,
                &format!(
                    "unexpected Kafka request of type {:?} during SASL authentication",
                    header.api_key
                ),
            ));
        }
        let version = header.api_version;
        if !(0..=2).contains(&version) {
            return Err(failed(
                Some(mechanism),
                None,
                "unsupported SaslAuthenticate version",
            ));
        }
        let request = SaslAuthenticateRequest::decode(&mut body, version)
            .map_err(|_| failed(Some(mechanism), None, "undecodable SaslAuthenticate"))?;
        let image = self.ctx.metadata.image();
        let refuse = |message: String, why: &str| {
            let response = SaslAuthenticateResponse::default()
                .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                .with_error_message(Some(StrBytes::from_string(message)));
            failed(Some(mechanism), encode(&header, &response), why)
        };
        let text = if previous.is_some() {
            "re-authentication"
        } else {
            "authentication"
        };
        let step = server
            .step(&request.auth_bytes, self.listener, &image)
            .await
            .map_err(|e: SaslError| {
                // A mechanism's own refusal (OAUTHBEARER's JSON status) is told as it
                // is; anything else as Kafka words an invalid credential.
                let message = match &e {
                    SaslError::Refused { answer, .. } => answer.clone(),
                    _ => format!(
                        "Authentication failed during {text} due to invalid credentials with SASL mechanism {}",
                        mechanism.name()
                    ),
                };
                refuse(message, &e.to_string())
            })?;
        let response = SaslAuthenticateResponse::default().with_error_message(None);
        match step {
            Step::Challenge(challenge) => {
                let response = response.with_auth_bytes(Bytes::from(challenge));
                self.send(encode(&header, &response).ok_or(Outcome::Gone)?)
                    .await?;
                Ok(None)
            }
            Step::Done(done) => {
                let (session, lifetime_ms) = self.session(mechanism, &done, version > 0);
                if let Some(previous) = previous {
                    if previous.principal != session.principal {
                        let message = format!(
                            "Cannot change principals during re-authentication from {}: {}",
                            previous.principal.replacen(':', ".", 1),
                            session.principal.replacen(':', ".", 1)
                        );
                        return Err(refuse(message, "principal changed at re-authentication"));
                    }
                }
                let response = response
                    .with_auth_bytes(Bytes::from(done.final_token))
                    .with_session_lifetime_ms(lifetime_ms);
                self.send(encode(&header, &response).ok_or(Outcome::Gone)?)
                    .await?;
                Ok(Some(session))
            }
        }
    }
}
