//! One connection's server side of the chosen mechanism.

use tidelog_controller::MetadataImage;
use tidelog_sasl::oauthbearer::{self, ERROR_ACKNOWLEDGEMENT};
use tidelog_sasl::scram::{ScramCredential, ScramServer, ServerStep};
use tidelog_sasl::{plain, SaslError};

use super::{SaslListener, SaslMechanism};

/// A successful end: who the client is and the last token to send it.
pub(crate) struct Authenticated {
    pub(crate) user: String,
    pub(crate) final_token: Vec<u8>,
    /// When the credential itself ends (OAUTHBEARER: the token's `exp`), in Unix
    /// milliseconds: the session ends then at the latest, as in Kafka.
    pub(crate) credential_expires_at_ms: Option<i64>,
}

pub(crate) enum Step {
    /// Send this token and wait for the client's next one.
    Challenge(Vec<u8>),
    Done(Authenticated),
}

pub(crate) enum MechanismServer {
    Plain,
    /// Boxed: the SCRAM state is a few hundred bytes, PLAIN's none.
    Scram(Box<ScramServer>),
    /// `refused`: why the token was refused, once the error challenge is sent; the
    /// client's acknowledgement then ends the exchange as a failure.
    OAuthBearer {
        refused: Option<String>,
    },
}

impl MechanismServer {
    pub(crate) fn new(mechanism: SaslMechanism) -> MechanismServer {
        match mechanism {
            SaslMechanism::Plain => MechanismServer::Plain,
            SaslMechanism::Scram(m) => MechanismServer::Scram(Box::new(ScramServer::new(m))),
            SaslMechanism::OAuthBearer => MechanismServer::OAuthBearer { refused: None },
        }
    }

    /// Takes the client's next token. `image`: where SCRAM credentials are read.
    pub(crate) async fn step(
        &mut self,
        token: &[u8],
        listener: &SaslListener,
        image: &MetadataImage,
    ) -> Result<Step, SaslError> {
        match self {
            MechanismServer::Plain => {
                let user = plain::authenticate(token, |u| listener.plain_password(u))?;
                Ok(Step::Done(Authenticated {
                    user: user.to_string(),
                    final_token: Vec::new(),
                    credential_expires_at_ms: None,
                }))
            }
            MechanismServer::Scram(server) => {
                let mechanism = server.mechanism();
                let lookup = |user: &str| {
                    image
                        .scram_credential(user, mechanism.type_id())
                        .map(|c| ScramCredential {
                            salt: c.salt.clone(),
                            stored_key: c.stored_key.clone(),
                            server_key: c.server_key.clone(),
                            iterations: u32::try_from(c.iterations).unwrap_or(0),
                        })
                };
                match server.step(token, lookup)? {
                    ServerStep::Continue(challenge) => Ok(Step::Challenge(challenge)),
                    ServerStep::Done { user, message } => Ok(Step::Done(Authenticated {
                        user,
                        final_token: message,
                        credential_expires_at_ms: None,
                    })),
                }
            }
            MechanismServer::OAuthBearer { refused } => bearer_step(refused, token, listener).await,
        }
    }
}

/// OAUTHBEARER as Kafka's OAuthBearerSaslServer runs it: a refused token is answered
/// with the JSON error challenge; the client's `0x01` then fails the exchange with
/// that JSON as the error message. (Anything else after the challenge is taken as a
/// new first message, as Kafka does.)
async fn bearer_step(
    refused: &mut Option<String>,
    token: &[u8],
    listener: &SaslListener,
) -> Result<Step, SaslError> {
    if let Some(why) = refused.take() {
        if token == ERROR_ACKNOWLEDGEMENT {
            return Err(SaslError::Refused {
                answer: String::from_utf8_lossy(&oauthbearer::invalid_token_challenge())
                    .into_owned(),
                why,
            });
        }
    }
    let first = oauthbearer::parse_client_first(token)?;
    let Some(validator) = &listener.oauth else {
        return Err(SaslError::Unsupported("OAUTHBEARER is not configured"));
    };
    let valid = match validator.validate(first.token).await {
        Ok(valid) => valid,
        Err(why) => {
            *refused = Some(why);
            return Ok(Step::Challenge(oauthbearer::invalid_token_challenge()));
        }
    };
    if !first.authzid.is_empty() && first.authzid != valid.subject {
        return Err(SaslError::Refused {
            answer: format!(
                "Authentication failed: Client requested an authorization id ({}) that is different from the token's principal name ({})",
                first.authzid, valid.subject
            ),
            why: "the authorization id is not the token's subject".to_string(),
        });
    }
    Ok(Step::Done(Authenticated {
        user: valid.subject,
        final_token: Vec::new(),
        credential_expires_at_ms: Some(valid.expires_at_ms),
    }))
}
