//! SASL authentication of a connection (SASL_PLAINTEXT): SaslHandshake v1, then
//! SaslAuthenticate with PLAIN's one message or SCRAM's two round trips, checking
//! the server's final signature.

use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;
use tidelog_sasl::login::ClientLogin;

use crate::connection::Connection;
use crate::error::{ClientError, Result};

/// A mechanism this client authenticates with.
pub use tidelog_sasl::login::Mechanism as SaslMechanism;

/// Who a connection authenticates as. `Debug` leaves the password out.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslCredentials {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for SaslCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslCredentials")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Authenticates a freshly negotiated connection.
    pub(crate) async fn authenticate(&mut self, credentials: &SaslCredentials) -> Result<()> {
        let mechanism = credentials.mechanism;
        let handshake = SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_static_str(mechanism.name()));
        let response = self.send(&handshake).await?;
        ClientError::check(response.error_code, None, || {
            let offered: Vec<&str> = response.mechanisms.iter().map(|m| m.as_str()).collect();
            format!(
                "SASL handshake with {} for {} (the listener offers {})",
                self.addr(),
                mechanism.name(),
                offered.join(", ")
            )
        })?;
        let (mut login, mut token) =
            ClientLogin::start(mechanism, &credentials.username, &credentials.password);
        loop {
            let answer = self.sasl_step(token).await?;
            match login.answer(&answer) {
                Ok(Some(next)) => token = next,
                Ok(None) => break,
                Err(e) => return Err(ClientError::Protocol(format!("{}: {e}", mechanism.name()))),
            }
        }
        Ok(())
    }

    async fn sasl_step(&mut self, token: Vec<u8>) -> Result<Bytes> {
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
        let response = self.send(&request).await?;
        let message = response.error_message.as_ref().map(StrBytes::as_str);
        ClientError::check(response.error_code, message, || {
            format!("SASL authentication with {}", self.addr())
        })?;
        Ok(response.auth_bytes)
    }
}
