//! The client's side of a whole SASL exchange, mechanism by mechanism, as tokens: the
//! broker's inter-broker connections and the client library carry them over
//! SaslAuthenticate, each with its own I/O.

use crate::scram::{ScramClient, ScramMechanism};
use crate::SaslError;

/// A mechanism by its Kafka name: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
    OAuthBearer,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// By name, case-insensitively (JAAS config prefixes are lower case).
    pub fn from_name(name: &str) -> Option<Mechanism> {
        if name.trim().eq_ignore_ascii_case("PLAIN") {
            return Some(Mechanism::Plain);
        }
        if name.trim().eq_ignore_ascii_case("OAUTHBEARER") {
            return Some(Mechanism::OAuthBearer);
        }
        ScramMechanism::from_name(name).map(Mechanism::Scram)
    }
}

/// One login in progress. [`ClientLogin::start`] gives the first token; each server
/// answer goes to [`ClientLogin::answer`], which gives the next token to send or
/// `None` once the exchange is complete (for SCRAM: once the server proved it knows
/// the credential).
pub struct ClientLogin {
    state: State,
}

enum State {
    /// PLAIN: the one message is sent; the server's (empty) answer ends it.
    PlainSent,
    /// OAUTHBEARER: the token is sent; an empty answer ends it, an error challenge
    /// is acknowledged (the server then fails the exchange).
    BearerSent,
    ScramFirstSent(ScramClient),
    ScramFinalSent(ScramClient),
    Done,
}

impl ClientLogin {
    /// For OAUTHBEARER, `password` is the bearer token and `username` is not sent.
    pub fn start(mechanism: Mechanism, username: &str, password: &str) -> (ClientLogin, Vec<u8>) {
        match mechanism {
            Mechanism::OAuthBearer => (
                ClientLogin {
                    state: State::BearerSent,
                },
                crate::oauthbearer::client_first(password),
            ),
            Mechanism::Plain => (
                ClientLogin {
                    state: State::PlainSent,
                },
                crate::plain::client_message(username, password),
            ),
            Mechanism::Scram(m) => {
                let client = ScramClient::new(m, username, password);
                let first = client.client_first();
                (
                    ClientLogin {
                        state: State::ScramFirstSent(client),
                    },
                    first,
                )
            }
        }
    }

    pub fn answer(&mut self, server: &[u8]) -> Result<Option<Vec<u8>>, SaslError> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::PlainSent => Ok(None),
            State::BearerSent if server.is_empty() => Ok(None),
            State::BearerSent => Ok(Some(crate::oauthbearer::ERROR_ACKNOWLEDGEMENT.to_vec())),
            State::ScramFirstSent(mut client) => {
                let last = client.client_final(server)?;
                self.state = State::ScramFinalSent(client);
                Ok(Some(last))
            }
            State::ScramFinalSent(client) => client.verify_server_final(server).map(|()| None),
            State::Done => Err(SaslError::UnexpectedMessage("done")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scram::{random_bytes, ScramCredential, ScramServer, ServerStep};

    #[test]
    fn names_round_trip() {
        for m in [
            Mechanism::Plain,
            Mechanism::Scram(ScramMechanism::Sha256),
            Mechanism::Scram(ScramMechanism::Sha512),
            Mechanism::OAuthBearer,
        ] {
            assert_eq!(Mechanism::from_name(&m.name().to_lowercase()), Some(m));
        }
        assert_eq!(Mechanism::from_name("GSSAPI"), None);
    }

    #[test]
    fn plain_is_one_message() {
        let (mut login, first) = ClientLogin::start(Mechanism::Plain, "alice", "pw");
        assert_eq!(first, b"\0alice\0pw");
        assert_eq!(login.answer(b""), Ok(None));
        assert!(login.answer(b"").is_err());
    }

    #[test]
    fn scram_ends_once_the_server_signature_checks() {
        let m = ScramMechanism::Sha512;
        let stored = ScramCredential::from_password(m, "pw", random_bytes(16), 4096);
        let mut server = ScramServer::new(m);
        let (mut login, first) = ClientLogin::start(Mechanism::Scram(m), "alice", "pw");
        let Ok(ServerStep::Continue(server_first)) = server.step(&first, |_| Some(stored.clone()))
        else {
            panic!("the server refused the first message");
        };
        let Ok(Some(last)) = login.answer(&server_first) else {
            panic!("no client-final message");
        };
        let Ok(ServerStep::Done { message, .. }) = server.step(&last, |_| None) else {
            panic!("the server refused the proof");
        };
        assert_eq!(login.answer(&message), Ok(None));
        assert!(login.answer(&message).is_err(), "nothing follows the end");
        let (mut forged, first) = ClientLogin::start(Mechanism::Scram(m), "alice", "pw");
        let mut server = ScramServer::new(m);
        let Ok(ServerStep::Continue(server_first)) = server.step(&first, |_| Some(stored.clone()))
        else {
            panic!("the server refused the first message");
        };
        assert!(matches!(forged.answer(&server_first), Ok(Some(_))));
        assert_eq!(
            forged.answer(b"v=Zm9yZ2Vk"),
            Err(SaslError::BadServerSignature)
        );
    }
}
