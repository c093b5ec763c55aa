//! The real network: TCP, with Nagle off on every connection (requests and answers are
//! small and latency-bound).

use std::io;
use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};

use super::{BoxConnection, BoxFuture, Connection, Listener, Transport};

#[derive(Debug, Default, Clone, Copy)]
pub struct TcpTransport;

impl Connection for TcpStream {
    fn into_tcp(self: Box<Self>) -> Result<TcpStream, Box<dyn Connection>> {
        Ok(*self)
    }
}

impl Transport for TcpTransport {
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<BoxConnection>> {
        Box::pin(async move {
            let stream = TcpStream::connect(addr).await?;
            let _ = stream.set_nodelay(true);
            Ok(Box::new(stream) as BoxConnection)
        })
    }

    fn listen<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<Box<dyn Listener>>> {
        Box::pin(async move {
            let listener = TcpListener::bind(addr).await?;
            Ok(Box::new(TcpAcceptor::new(listener)?) as Box<dyn Listener>)
        })
    }
}

/// A bound TCP listener as a [`Listener`].
#[derive(Debug)]
pub struct TcpAcceptor {
    listener: TcpListener,
    local_addr: SocketAddr,
}

impl TcpAcceptor {
    /// Wraps a listener bound elsewhere (tests bind port 0 first to learn addresses).
    pub fn new(listener: TcpListener) -> io::Result<TcpAcceptor> {
        let local_addr = listener.local_addr()?;
        Ok(TcpAcceptor {
            listener,
            local_addr,
        })
    }
}

impl Listener for TcpAcceptor {
    fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxConnection, SocketAddr)>> {
        Box::pin(async move {
            let (stream, peer) = self.listener.accept().await?;
            let _ = stream.set_nodelay(true);
            Ok((Box::new(stream) as BoxConnection, peer))
        })
    }
}
