//! Connections this broker opens to other brokers' inter-broker listener (follower
//! fetches, transaction markers), secured as that listener's protocol requires: a TLS
//! handshake on SSL and SASL_SSL, then on SASL_PLAINTEXT and SASL_SSL the SASL
//! exchange of Kafka's clients (SaslHandshake v1, then SaslAuthenticate), before the
//! connection is handed to its user. The callers bound the whole connect in time.
//!
//! A server with `connections.max.reauth.ms` closes such a connection when its
//! session ends (these connections do not re-authenticate); the follower or marker
//! writer then reconnects and authenticates again.

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use rustls_pki_types::ServerName;
use tidelog_env::net::{BoxConnection, BoxFuture, Listener, Transport};
use tidelog_protocol::client::{decode_response, encode_request};
use tidelog_protocol::frame::read_frame;
use tidelog_sasl::login::ClientLogin;
use tokio::io::AsyncWriteExt;
use tokio_rustls::{TlsConnector, TlsStream};

use crate::tls::ClientTlsFiles;

use super::tls::TlsConnection;
use crate::sasl::SaslLogin;

/// Kafka's SaslAuthenticate answers are small (a SCRAM server message is ~100 bytes).
const MAX_SASL_RESPONSE_BYTES: usize = 64 * 1024;
const HANDSHAKE_VERSION: i16 = 1;
const AUTHENTICATE_VERSION: i16 = 2;
const CLIENT_ID: &str = "tidelog-inter-broker";

/// What the inter-broker listener asks of the brokers that connect to it.
#[derive(Clone, Default)]
pub(crate) struct OutboundSecurity {
    /// Rebuilt when the listener's key or trust store files change.
    pub(crate) tls: Option<Arc<ClientTlsFiles>>,
    pub(crate) sasl: Option<SaslLogin>,
}

impl OutboundSecurity {
    pub(crate) fn is_plaintext(&self) -> bool {
        self.tls.is_none() && self.sasl.is_none()
    }
}

/// `inner` with every connection it opens secured by `security`; listening is
/// `inner`'s own.
pub(crate) struct SecureTransport {
    inner: Arc<dyn Transport>,
    security: OutboundSecurity,
}

impl std::fmt::Debug for SecureTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecureTransport")
            .field("inner", &self.inner)
            .field("tls", &self.security.tls.is_some())
            .field("sasl", &self.security.sasl)
            .finish()
    }
}

impl SecureTransport {
    /// `inner` itself when the listener is PLAINTEXT.
    pub(crate) fn wrap(
        inner: Arc<dyn Transport>,
        security: OutboundSecurity,
    ) -> Arc<dyn Transport> {
        if security.is_plaintext() {
            return inner;
        }
        Arc::new(SecureTransport { inner, security })
    }

    async fn connect_secured(&self, addr: &str) -> io::Result<BoxConnection> {
        let mut stream = self.inner.connect(addr).await?;
        if let Some(client) = &self.security.tls {
            let connector = TlsConnector::from(client.get().await);
            let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let name = ServerName::try_from(host.to_string())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            let tls = connector.connect(name, stream).await?;
            stream = Box::new(TlsConnection(TlsStream::Client(tls)));
        }
        if let Some(login) = &self.security.sasl {
            authenticate(&mut stream, login).await.map_err(|e| {
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("SASL authentication to {addr} as {}: {e}", login.username),
                )
            })?;
        }
        Ok(stream)
    }
}

impl Transport for SecureTransport {
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<BoxConnection>> {
        Box::pin(self.connect_secured(addr))
    }

    fn reach<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<()>> {
        self.inner.reach(addr)
    }

    fn listen<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<Box<dyn Listener>>> {
        self.inner.listen(addr)
    }
}

#[derive(Debug, thiserror::Error)]
enum AuthError {
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
    #[error("{0}")]
    Protocol(String),
    #[error("refused: {0}")]
    Refused(String),
}

/// SaslHandshake v1, then SaslAuthenticate rounds: PLAIN's one message, SCRAM's two
/// (checking the server's signature).
async fn authenticate(stream: &mut BoxConnection, login: &SaslLogin) -> Result<(), AuthError> {
    let mut exchange = Exchange {
        stream,
        correlation: 0,
    };
    let handshake = SaslHandshakeRequest::default()
        .with_mechanism(StrBytes::from_static_str(login.mechanism.name()));
    let answer: SaslHandshakeResponse = exchange
        .call(ApiKey::SaslHandshake, HANDSHAKE_VERSION, &handshake)
        .await?;
    if answer.error_code != 0 {
        let offered: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
        return Err(AuthError::Refused(format!(
            "the listener does not offer {} (it offers {})",
            login.mechanism.name(),
            offered.join(", ")
        )));
    }
    let (mut client, mut token) =
        ClientLogin::start(login.mechanism, &login.username, &login.password);
    loop {
        let answer = exchange.step(token).await?;
        match client.answer(&answer) {
            Ok(Some(next)) => token = next,
            Ok(None) => break,
            Err(e) => {
                return Err(AuthError::Protocol(format!(
                    "{}: {e}",
                    login.mechanism.name()
                )))
            }
        }
    }
    Ok(())
}

struct Exchange<'a> {
    stream: &'a mut BoxConnection,
    correlation: i32,
}

impl Exchange<'_> {
    async fn step(&mut self, token: Vec<u8>) -> Result<Bytes, AuthError> {
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
        let answer: SaslAuthenticateResponse = self
            .call(ApiKey::SaslAuthenticate, AUTHENTICATE_VERSION, &request)
            .await?;
        if answer.error_code != 0 {
            let message = answer.error_message.as_ref().map_or("", StrBytes::as_str);
            return Err(AuthError::Refused(format!(
                "error code {}: {message}",
                answer.error_code
            )));
        }
        Ok(answer.auth_bytes)
    }

    async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        body: &Req,
    ) -> Result<Resp, AuthError> {
        self.correlation += 1;
        let bytes = encode_request(key, version, self.correlation, Some(CLIENT_ID), body)
            .map_err(|e| AuthError::Protocol(e.to_string()))?;
        self.stream.write_all(&bytes).await?;
        self.stream.flush().await?;
        let frame = read_frame(&mut *self.stream, MAX_SASL_RESPONSE_BYTES)
            .await
            .map_err(|e| AuthError::Protocol(e.to_string()))?
            .ok_or_else(|| AuthError::Protocol("the broker closed the connection".into()))?;
        let (got, body) = decode_response::<Resp>(frame.freeze(), key, version)
            .map_err(|e| AuthError::Protocol(e.to_string()))?;
        if got != self.correlation {
            return Err(AuthError::Protocol(format!(
                "correlation id {got}, expected {}",
                self.correlation
            )));
        }
        Ok(body)
    }
}
