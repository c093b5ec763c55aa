//! The TLS side of a connection: the handshake (bounded in time), the client's
//! principal, and the stream that carries the Kafka frames afterwards. A TLS stream is
//! not a TCP socket, so `stream::split` sends its fetch data through rustls (no
//! sendfile).

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tidelog_env::net::{BoxConnection, Connection};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsStream;

use crate::tls::{client_principal, ServerTls};

/// A client that has not finished its handshake by then is closed: a connection
/// that never speaks must not hold a slot of `max.connections` for ever.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The first bytes of a TLS handshake record: content type 22, major version 3.
pub(super) fn looks_like_tls(prefix: &[u8]) -> bool {
    matches!(prefix, [0x16, 0x03, minor, ..] if *minor <= 0x04)
}

/// Either side of a TLS connection (this listener's, or one this node opened to
/// another broker: `outbound`): its bytes go through rustls, not sendfile.
pub(super) struct TlsConnection(pub(super) TlsStream<BoxConnection>);

impl Connection for TlsConnection {
    fn into_tcp(self: Box<Self>) -> Result<TcpStream, Box<dyn Connection>> {
        Err(self)
    }
}

impl AsyncRead for TlsConnection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConnection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

/// Runs the server handshake; on success the decrypted stream and the client's
/// principal. A failure is logged (saying what the client did wrong where that is
/// known) and `None` returned: the connection is closed.
pub(crate) async fn handshake(
    server: &Arc<ServerTls>,
    stream: BoxConnection,
    peer: SocketAddr,
    listener: &str,
) -> Option<(BoxConnection, String)> {
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, server.acceptor.accept(stream)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            if is_plaintext(&e) {
                tracing::warn!(%peer, listener, "plaintext (not TLS) connection on SSL listener {listener}; closing it (the client must use security.protocol=SSL here)");
            } else {
                tracing::warn!(%peer, listener, error = %e, "TLS handshake failed; closing the connection");
            }
            return None;
        }
        Err(_) => {
            tracing::warn!(%peer, listener, "TLS handshake not finished within {HANDSHAKE_TIMEOUT:?}; closing the connection");
            return None;
        }
    };
    let cert = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|c| c.as_ref().to_vec());
    match client_principal(cert.as_deref(), &server.rules) {
        Ok(principal) => Some((Box::new(TlsConnection(TlsStream::Server(tls))), principal)),
        Err(reason) => {
            tracing::warn!(%peer, listener, "refusing the TLS client: {reason}");
            None
        }
    }
}

/// Whether the handshake failed because the first record was not TLS at all: a
/// Kafka frame starts with its size, whose first byte (0 below 16 MiB) is no TLS
/// content type.
fn is_plaintext(e: &io::Error) -> bool {
    matches!(
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>()),
        Some(rustls::Error::InvalidMessage(
            rustls::InvalidMessage::InvalidContentType
        ))
    )
}
