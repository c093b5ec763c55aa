//! The client's side of a SCRAM exchange (the CLI's `--command-config`).

use subtle::ConstantTimeEq;

use super::{
    attributes, b64, encode_saslname, fresh_nonce, unb64, xor, ScramCredential, ScramMechanism,
};
use crate::SaslError;

/// Fewest iterations a client accepts from a server (a server asking for fewer would
/// make the proof cheap to brute-force), as Kafka's client does.
const MIN_ITERATIONS: u32 = ScramMechanism::MIN_ITERATIONS;

pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    client_first_bare: String,
    nonce: String,
    /// The server signature expected in server-final, once client-final is sent.
    expected_signature: Option<Vec<u8>>,
}

impl ScramClient {
    pub fn new(mechanism: ScramMechanism, user: &str, password: &str) -> ScramClient {
        ScramClient::with_nonce(mechanism, user, password, fresh_nonce())
    }

    /// A client with a fixed nonce (the RFC's test vectors).
    pub fn with_nonce(
        mechanism: ScramMechanism,
        user: &str,
        password: &str,
        nonce: String,
    ) -> ScramClient {
        ScramClient {
            mechanism,
            password: password.to_string(),
            client_first_bare: format!("n={},r={nonce}", encode_saslname(user)),
            nonce,
            expected_signature: None,
        }
    }

    /// The first message.
    pub fn client_first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// Answers server-first with client-final.
    pub fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, SaslError> {
        let server_first =
            std::str::from_utf8(server_first).map_err(|_| SaslError::Malformed("not UTF-8"))?;
        let attrs = attributes(server_first)?;
        let (Some(('r', nonce)), Some(('s', salt)), Some(('i', iterations))) =
            (attrs.first(), attrs.get(1), attrs.get(2))
        else {
            return Err(SaslError::Malformed("expected r=, s= and i="));
        };
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(SaslError::Malformed(
                "the server's nonce does not extend ours",
            ));
        }
        let iterations: u32 = iterations
            .parse()
            .map_err(|_| SaslError::Malformed("bad iteration count"))?;
        if iterations < MIN_ITERATIONS {
            return Err(SaslError::Unsupported("fewer iterations than SCRAM allows"));
        }
        let salt = unb64(salt)?;
        let mechanism = self.mechanism;
        let salted = mechanism.salted_password(self.password.as_bytes(), &salt, iterations);
        let credential =
            ScramCredential::from_salted_password(mechanism, &salted, salt, iterations);
        let without_proof = format!("c={},r={nonce}", b64(b"n,,"));
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let client_key = mechanism.mac(&salted, b"Client Key");
        let signature = mechanism.mac(&credential.stored_key, auth_message.as_bytes());
        let proof = xor(&client_key, &signature);
        self.expected_signature =
            Some(mechanism.mac(&credential.server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", b64(&proof)).into_bytes())
    }

    /// Checks server-final: the server proved it knows the credential.
    pub fn verify_server_final(&self, server_final: &[u8]) -> Result<(), SaslError> {
        let text =
            std::str::from_utf8(server_final).map_err(|_| SaslError::Malformed("not UTF-8"))?;
        if text.starts_with("e=") {
            return Err(SaslError::InvalidCredentials);
        }
        let signature = text
            .strip_prefix("v=")
            .ok_or(SaslError::Malformed("expected v="))?;
        let expected = self
            .expected_signature
            .as_ref()
            .ok_or(SaslError::UnexpectedMessage("before client-final"))?;
        if bool::from(unb64(signature)?.ct_eq(expected)) {
            Ok(())
        } else {
            Err(SaslError::BadServerSignature)
        }
    }
}
