//! The controller listener's side of a secured connection: a listener whose accepted
//! connections come out TLS-decrypted (SSL, SASL_SSL) and, on SASL_PLAINTEXT and
//! SASL_SSL, authenticated with the SASL exchange Kafka's clients run (SaslHandshake
//! v1, then SaslAuthenticate with PLAIN), before the controller quorum reads its first
//! RPC. Only other nodes of the cluster connect here (`net::outbound` is their side),
//! so nothing else is spoken before authentication: no ApiVersions, no raw v0 tokens.
//!
//! With an authorizer configured, the principal must also be one of `super.users`:
//! the controller quorum carries the ACLs, so ACLs cannot be what admits its members.
//!
//! Handshakes run in their own tasks (a slow or silent peer never delays another's
//! accept), bounded in number and in time; the accept loop and every handshake stop
//! when the listener is dropped.

use std::collections::HashSet;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tidelog_env::net::{BoxConnection, BoxFuture, Listener, Transport};
use tidelog_protocol::frame::read_frame;
use tidelog_protocol::header::{decode_request_header, encode_response};
use tidelog_protocol::DecodedHeader;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::sasl::{SaslListener, SaslMechanism};
use crate::tls::ServerTlsFiles;

/// Connections in their handshake at once; more are closed at accept.
const MAX_HANDSHAKES: usize = 64;
/// A peer that has not authenticated by then is closed.
const AUTHENTICATION_TIMEOUT: Duration = Duration::from_secs(10);
/// Authenticated connections waiting for the quorum's accept.
const READY_QUEUE: usize = 16;
const ANONYMOUS: &str = "User:ANONYMOUS";

/// What the controller listener asks of the nodes that connect to it.
pub(crate) struct InboundSecurity {
    /// The listener's name, for logs.
    pub(crate) listener: String,
    pub(crate) tls: Option<Arc<ServerTlsFiles>>,
    pub(crate) sasl: Option<Arc<SaslListener>>,
    /// With an authorizer: the principals admitted (`super.users`). `None`: any
    /// principal that authenticated.
    pub(crate) admitted: Option<HashSet<String>>,
}

impl InboundSecurity {
    fn is_open(&self) -> bool {
        self.tls.is_none() && self.sasl.is_none() && self.admitted.is_none()
    }
}

/// `inner` whose listeners hand out only connections `security` admitted; connecting
/// is `inner`'s own.
pub(crate) struct SecureListenTransport {
    inner: Arc<dyn Transport>,
    security: Arc<InboundSecurity>,
}

impl std::fmt::Debug for SecureListenTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecureListenTransport")
            .field("inner", &self.inner)
            .field("listener", &self.security.listener)
            .field("tls", &self.security.tls.is_some())
            .field("sasl", &self.security.sasl.is_some())
            .finish()
    }
}

impl SecureListenTransport {
    /// `inner` itself when the listener is PLAINTEXT and admits everyone.
    pub(crate) fn wrap(inner: Arc<dyn Transport>, security: InboundSecurity) -> Arc<dyn Transport> {
        if security.is_open() {
            return inner;
        }
        Arc::new(SecureListenTransport {
            inner,
            security: Arc::new(security),
        })
    }
}

impl Transport for SecureListenTransport {
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<BoxConnection>> {
        self.inner.connect(addr)
    }

    fn reach<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<()>> {
        self.inner.reach(addr)
    }

    fn listen<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<Box<dyn Listener>>> {
        Box::pin(async move {
            let inner = self.inner.listen(addr).await?;
            let local = inner.local_addr();
            let (tx, ready) = mpsc::channel(READY_QUEUE);
            let accepting = tokio::spawn(accept_loop(inner, Arc::clone(&self.security), tx));
            Ok(Box::new(SecuredListener {
                local,
                ready,
                accepting,
            }) as Box<dyn Listener>)
        })
    }
}

struct SecuredListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(BoxConnection, SocketAddr)>,
    accepting: tokio::task::JoinHandle<()>,
}

impl Drop for SecuredListener {
    fn drop(&mut self) {
        // The loop owns the handshakes' JoinSet: aborting it ends them all.
        self.accepting.abort();
    }
}

impl Listener for SecuredListener {
    fn local_addr(&self) -> SocketAddr {
        self.local
    }

    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxConnection, SocketAddr)>> {
        Box::pin(async move {
            self.ready.recv().await.ok_or_else(|| {
                io::Error::new(io::ErrorKind::BrokenPipe, "the secured listener stopped")
            })
        })
    }
}

async fn accept_loop(
    mut inner: Box<dyn Listener>,
    security: Arc<InboundSecurity>,
    ready: mpsc::Sender<(BoxConnection, SocketAddr)>,
) {
    let mut handshakes: JoinSet<Option<(BoxConnection, SocketAddr)>> = JoinSet::new();
    loop {
        tokio::select! {
            accepted = inner.accept() => match accepted {
                Ok((stream, peer)) => {
                    if handshakes.len() >= MAX_HANDSHAKES {
                        tracing::warn!(%peer, listener = %security.listener, "too many connections authenticating; closing this one");
                        continue;
                    }
                    let security = Arc::clone(&security);
                    handshakes.spawn(async move {
                        match tokio::time::timeout(AUTHENTICATION_TIMEOUT, admit(stream, peer, &security)).await {
                            Ok(admitted) => admitted.map(|stream| (stream, peer)),
                            Err(_) => {
                                tracing::warn!(%peer, listener = %security.listener, "not authenticated within {AUTHENTICATION_TIMEOUT:?}; closing the connection");
                                None
                            }
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, listener = %security.listener, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(done) = handshakes.join_next(), if !handshakes.is_empty() => {
                if let Ok(Some(admitted)) = done {
                    if ready.send(admitted).await.is_err() {
                        return;
                    }
                }
            }
            () = ready.closed() => return,
        }
    }
}

/// The connection once it is decrypted, authenticated and admitted; `None` (logged)
/// closes it.
async fn admit(
    stream: BoxConnection,
    peer: SocketAddr,
    security: &InboundSecurity,
) -> Option<BoxConnection> {
    let listener = security.listener.as_str();
    let (mut stream, mut principal) = match &security.tls {
        Some(server) => super::tls::handshake(&server.get().await, stream, peer, listener).await?,
        None => (stream, ANONYMOUS.to_string()),
    };
    if let Some(sasl) = &security.sasl {
        match authenticate(&mut stream, sasl).await {
            Ok(user) => principal = format!("User:{user}"),
            Err(why) => {
                tracing::warn!(%peer, listener, "SASL authentication failed; closing the connection: {why}");
                return None;
            }
        }
    }
    if let Some(admitted) = &security.admitted {
        if !admitted.contains(&principal) {
            tracing::warn!(%peer, listener, %principal, "refusing a controller connection: with an authorizer, the controller listener admits only super.users");
            return None;
        }
    }
    Some(stream)
}

/// SaslHandshake v1 then SaslAuthenticate with PLAIN: the authenticated user, or why
/// not (the peer has been answered, after the failure delay where it gave a wrong
/// credential).
async fn authenticate(stream: &mut BoxConnection, sasl: &SaslListener) -> Result<String, String> {
    let (header, mut body) = read_request(stream, sasl.max_receive_bytes).await?;
    if header.api_key != ApiKey::SaslHandshake || header.api_version != 1 {
        return Err(format!(
            "expected SaslHandshake v1, got {:?} v{}",
            header.api_key, header.api_version
        ));
    }
    let request = SaslHandshakeRequest::decode(&mut body, 1)
        .map_err(|e| format!("undecodable SaslHandshake: {e}"))?;
    let plain = sasl
        .enabled(&request.mechanism)
        .filter(|m| *m == SaslMechanism::Plain);
    let mut response = SaslHandshakeResponse::default()
        .with_mechanisms(vec![StrBytes::from_static_str(SaslMechanism::Plain.name())]);
    if plain.is_none() {
        response = response.with_error_code(ResponseError::UnsupportedSaslMechanism.code());
    }
    respond(stream, &header, &response).await?;
    if plain.is_none() {
        return Err(format!(
            "mechanism {:?}: the controller listener serves PLAIN",
            request.mechanism.as_str()
        ));
    }
    let (header, mut body) = read_request(stream, sasl.max_receive_bytes).await?;
    if header.api_key != ApiKey::SaslAuthenticate || !(0..=2).contains(&header.api_version) {
        return Err(format!(
            "expected SaslAuthenticate, got {:?} v{}",
            header.api_key, header.api_version
        ));
    }
    let request = SaslAuthenticateRequest::decode(&mut body, header.api_version)
        .map_err(|e| format!("undecodable SaslAuthenticate: {e}"))?;
    match tidelog_sasl::plain::authenticate(&request.auth_bytes, |u| sasl.plain_password(u)) {
        Ok(user) => {
            let user = user.to_string();
            respond(stream, &header, &SaslAuthenticateResponse::default()).await?;
            Ok(user)
        }
        Err(why) => {
            tokio::time::sleep(sasl.failure_delay).await;
            let refusal = SaslAuthenticateResponse::default()
                .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                .with_error_message(Some(StrBytes::from_static_str(
                    "Authentication failed: Invalid username or password",
                )));
            respond(stream, &header, &refusal).await?;
            Err(why.to_string())
        }
    }
}

async fn read_request(
    stream: &mut BoxConnection,
    max_bytes: usize,
) -> Result<(DecodedHeader, Bytes), String> {
    let frame = read_frame(stream, max_bytes)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "the peer closed the connection".to_string())?;
    let mut body = frame.freeze();
    let header = decode_request_header(&mut body).map_err(|e| e.to_string())?;
    Ok((header, body))
}

async fn respond<T: Encodable>(
    stream: &mut BoxConnection,
    header: &DecodedHeader,
    body: &T,
) -> Result<(), String> {
    let bytes = encode_response(
        header.correlation_id,
        header.api_key,
        header.api_version,
        body,
    )
    .map_err(|e| e.to_string())?;
    stream.write_all(&bytes).await.map_err(|e| e.to_string())?;
    stream.flush().await.map_err(|e| e.to_string())
}
