//! The network between nodes: byte streams opened by address. The controller quorum's
//! RPCs, the follower fetchers and the Kafka listener all run over a [`Transport`], so
//! the same code runs over TCP in production and over a [`MemoryNetwork`] in a test.

use std::fmt::Debug;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

mod memory;
mod tcp;

pub use memory::{MemoryNetwork, MemoryTransport};
pub use tcp::{TcpAcceptor, TcpTransport};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A byte stream to or from another node.
pub trait Connection: AsyncRead + AsyncWrite + Send + Sync + Unpin + 'static {
    /// The TCP stream this connection is, if it is one (a broker sends record bytes
    /// to a TCP socket straight from segment files).
    fn into_tcp(self: Box<Self>) -> Result<TcpStream, Box<dyn Connection>>;
}

pub type BoxConnection = Box<dyn Connection>;

/// Accepts the connections other nodes open to one address.
pub trait Listener: Send + 'static {
    /// The address this listener got (port 0 asks for a free one).
    fn local_addr(&self) -> SocketAddr;
    /// The next connection, with the address it came from.
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxConnection, SocketAddr)>>;
}

/// How one node opens connections and listens for them.
pub trait Transport: Send + Sync + Debug + 'static {
    /// Opens a connection to `addr` (`host:port`). Unbounded in time, as a TCP connect
    /// to a partitioned host is: callers bound it.
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<BoxConnection>>;
    /// Whether anything accepts connections at `addr`: a bare connection, dropped at
    /// once. A transport that wraps another one (TLS, SASL) reaches through to it, so a
    /// probe costs no handshake and no login attempt. Unbounded in time, like `connect`.
    fn reach<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move { self.connect(addr).await.map(drop) })
    }
    /// Listens on `addr` (`host:port`; port 0 picks a free one).
    fn listen<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<Box<dyn Listener>>>;
}
