//! The server's side of a SCRAM exchange: client-first in, server-first out,
//! client-final in, server-final out.

use subtle::ConstantTimeEq;

use super::{
    attributes, b64, decode_saslname, fresh_nonce, unb64, xor, ScramCredential, ScramMechanism,
};
use crate::SaslError;

/// The longest client message read (a user name and a nonce; Kafka's own messages
/// are well under this).
const MAX_MESSAGE_BYTES: usize = 4096;

/// What the server answers a client message with.
#[derive(Debug, PartialEq, Eq)]
pub enum ServerStep {
    /// Send this and wait for the client's next message.
    Continue(Vec<u8>),
    /// Authenticated as `user`: send `message` (the server signature) and stop.
    Done { user: String, message: Vec<u8> },
}

enum State {
    Initial,
    /// Server-first sent; what the proof is checked against.
    SentFirst {
        user: String,
        credential: ScramCredential,
        gs2_header: String,
        client_first_bare: String,
        server_first: String,
        nonce: String,
    },
    Finished,
}

pub struct ScramServer {
    mechanism: ScramMechanism,
    server_nonce: String,
    state: State,
}

impl ScramServer {
    pub fn new(mechanism: ScramMechanism) -> ScramServer {
        ScramServer::with_nonce(mechanism, fresh_nonce())
    }

    /// A server whose nonce part is fixed (the RFC's test vectors).
    pub fn with_nonce(mechanism: ScramMechanism, server_nonce: String) -> ScramServer {
        ScramServer {
            mechanism,
            server_nonce,
            state: State::Initial,
        }
    }

    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// Takes the client's next message. `lookup` answers a user's credential for this
    /// mechanism. Any error ends the exchange.
    pub fn step(
        &mut self,
        message: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<ServerStep, SaslError> {
        if message.len() > MAX_MESSAGE_BYTES {
            self.state = State::Finished;
            return Err(SaslError::Malformed("message too long"));
        }
        let text = std::str::from_utf8(message).map_err(|_| SaslError::Malformed("not UTF-8"))?;
        match std::mem::replace(&mut self.state, State::Finished) {
            State::Initial => self.client_first(text, lookup),
            State::SentFirst {
                user,
                credential,
                gs2_header,
                client_first_bare,
                server_first,
                nonce,
            } => {
                let expected = Expected {
                    credential: &credential,
                    gs2_header: &gs2_header,
                    client_first_bare: &client_first_bare,
                    server_first: &server_first,
                    nonce: &nonce,
                };
                let message = self.client_final(text, &expected)?;
                Ok(ServerStep::Done { user, message })
            }
            State::Finished => Err(SaslError::UnexpectedMessage("finished")),
        }
    }

    fn client_first(
        &mut self,
        text: &str,
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<ServerStep, SaslError> {
        // gs2-header: no channel binding ("n"), an optional authzid, then the bare part.
        let (flag, rest) = text
            .split_once(',')
            .ok_or(SaslError::Malformed("no gs2 header"))?;
        match flag {
            "n" => {}
            "y" | "p" => return Err(SaslError::Unsupported("channel binding")),
            _ => return Err(SaslError::Malformed("bad gs2 flag")),
        }
        let (authzid, bare) = rest
            .split_once(',')
            .ok_or(SaslError::Malformed("no gs2 header"))?;
        let authzid = match authzid {
            "" => None,
            a => Some(decode_saslname(
                a.strip_prefix("a=")
                    .ok_or(SaslError::Malformed("bad authzid"))?,
            )?),
        };
        let gs2_header = text[..text.len() - bare.len()].to_string();
        let mut parts = bare.splitn(3, ',');
        let user = parts
            .next()
            .and_then(|p| p.strip_prefix("n="))
            .ok_or(SaslError::Malformed("no user name"))?;
        let client_nonce = parts
            .next()
            .and_then(|p| p.strip_prefix("r="))
            .filter(|n| !n.is_empty())
            .ok_or(SaslError::Malformed("no nonce"))?;
        // Kafka's extensions (`key=value` after the nonce): only `tokenauth`, for
        // delegation tokens, means anything, and tidelog has no delegation tokens.
        if let Some(extensions) = parts.next() {
            for ext in extensions.split(',') {
                let (key, value) = ext
                    .split_once('=')
                    .ok_or(SaslError::Malformed("bad extension"))?;
                if key == "tokenauth" && value.eq_ignore_ascii_case("true") {
                    return Err(SaslError::Unsupported("delegation tokens (tokenauth)"));
                }
            }
        }
        let user = decode_saslname(user)?;
        if user.is_empty() {
            return Err(SaslError::Malformed("empty user name"));
        }
        if authzid.as_deref().is_some_and(|a| a != user) {
            return Err(SaslError::Unsupported(
                "an authorization id different from the user",
            ));
        }
        let credential = lookup(&user).ok_or(SaslError::InvalidCredentials)?;
        let nonce = format!("{client_nonce}{}", self.server_nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            b64(&credential.salt),
            credential.iterations
        );
        let reply = server_first.clone().into_bytes();
        self.state = State::SentFirst {
            user,
            credential,
            gs2_header,
            client_first_bare: bare.to_string(),
            server_first,
            nonce,
        };
        Ok(ServerStep::Continue(reply))
    }

    fn client_final(&self, text: &str, expected: &Expected<'_>) -> Result<Vec<u8>, SaslError> {
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or(SaslError::Malformed("no proof"))?;
        let attrs = attributes(without_proof)?;
        let (Some(('c', binding)), Some(('r', nonce))) = (attrs.first(), attrs.get(1)) else {
            return Err(SaslError::Malformed("expected c= and r="));
        };
        if unb64(binding)? != expected.gs2_header.as_bytes() {
            return Err(SaslError::Malformed("channel binding does not match"));
        }
        if *nonce != expected.nonce {
            return Err(SaslError::Malformed("nonce does not match"));
        }
        let proof = unb64(proof)?;
        let mechanism = self.mechanism;
        let auth_message = format!(
            "{},{},{without_proof}",
            expected.client_first_bare, expected.server_first
        );
        let credential = expected.credential;
        let signature = mechanism.mac(&credential.stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return Err(SaslError::InvalidCredentials);
        }
        let client_key = xor(&proof, &signature);
        let computed = mechanism.hash(&client_key);
        if !bool::from(computed.ct_eq(&credential.stored_key)) {
            return Err(SaslError::InvalidCredentials);
        }
        let server_signature = mechanism.mac(&credential.server_key, auth_message.as_bytes());
        Ok(format!("v={}", b64(&server_signature)).into_bytes())
    }
}

struct Expected<'a> {
    credential: &'a ScramCredential,
    gs2_header: &'a str,
    client_first_bare: &'a str,
    server_first: &'a str,
    nonce: &'a str,
}
