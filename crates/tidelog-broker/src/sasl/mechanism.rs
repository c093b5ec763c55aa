//! One connection's server side of the chosen mechanism.

use tidelog_controller::MetadataImage;
use tidelog_sasl::scram::{ScramCredential, ScramServer, ServerStep};
use tidelog_sasl::{plain, SaslError};

use super::{SaslListener, SaslMechanism};

/// A successful end: who the client is and the last token to send it.
pub(crate) struct Authenticated {
    pub(crate) user: String,
    pub(crate) final_token: Vec<u8>,
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
}

impl MechanismServer {
    pub(crate) fn new(mechanism: SaslMechanism) -> MechanismServer {
        match mechanism {
            SaslMechanism::Plain => MechanismServer::Plain,
            SaslMechanism::Scram(m) => MechanismServer::Scram(Box::new(ScramServer::new(m))),
        }
    }

    /// Takes the client's next token. `image`: where SCRAM credentials are read.
    pub(crate) fn step(
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
                    })),
                }
            }
        }
    }
}
