//! An in-process network: every node is a host (an IP address) with its own
//! [`MemoryTransport`]; connections are in-memory byte streams. The links between hosts
//! can be cut and healed. A cut link behaves as a partitioned TCP path does: nothing
//! crosses it, connects and reads and writes on it wait (callers' timeouts fire as they
//! would on a real network), and once it heals everything resumes where it stopped.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::{BoxConnection, BoxFuture, Connection, Listener, Transport};

/// Bytes in flight each way on one connection before the writer waits.
const STREAM_BUFFER: usize = 256 * 1024;
/// Connections waiting to be accepted before more are refused (a listen backlog).
const BACKLOG: usize = 128;
/// Ephemeral ports are handed out from here up.
const FIRST_PORT: u16 = 20_000;

/// The network itself: the listeners, and the state of every link between two hosts.
#[derive(Clone, Default, Debug)]
pub struct MemoryNetwork {
    state: Arc<Mutex<NetState>>,
}

#[derive(Default, Debug)]
struct NetState {
    /// Each with the id of the listener that registered it.
    listeners: HashMap<SocketAddr, (u64, mpsc::Sender<(MemoryConnection, SocketAddr)>)>,
    next_listener: u64,
    links: HashMap<(IpAddr, IpAddr), Arc<Link>>,
    hosts: BTreeSet<IpAddr>,
    next_port: HashMap<IpAddr, u16>,
}

impl NetState {
    fn link(&mut self, a: IpAddr, b: IpAddr) -> Arc<Link> {
        let key = if a <= b { (a, b) } else { (b, a) };
        Arc::clone(self.links.entry(key).or_default())
    }

    fn free_port(&mut self, host: IpAddr) -> io::Result<u16> {
        let next = self.next_port.entry(host).or_insert(FIRST_PORT);
        for _ in 0..u16::MAX {
            let port = *next;
            *next = next.checked_add(1).unwrap_or(FIRST_PORT);
            let taken = self.listeners.contains_key(&SocketAddr::new(host, port));
            if !taken {
                return Ok(port);
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            "no free port left on this host",
        ))
    }
}

/// Whether a path between two hosts is cut, and who waits for it to heal.
#[derive(Default, Debug)]
struct Link {
    cut: AtomicBool,
    waiting: Mutex<Vec<Waker>>,
}

impl Link {
    fn waiting(&self) -> MutexGuard<'_, Vec<Waker>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True (and `cx` woken at the heal) while the link is cut.
    fn stalls(&self, cx: &Context<'_>) -> bool {
        if !self.cut.load(Ordering::Acquire) {
            return false;
        }
        let mut waiting = self.waiting();
        // Healed between the check and the lock: the heal saw no waker of ours.
        if !self.cut.load(Ordering::Acquire) {
            return false;
        }
        if !waiting.iter().any(|w| w.will_wake(cx.waker())) {
            waiting.push(cx.waker().clone());
        }
        true
    }

    fn set_cut(&self, cut: bool) {
        let mut waiting = self.waiting();
        self.cut.store(cut, Ordering::Release);
        if !cut {
            for waker in waiting.drain(..) {
                waker.wake();
            }
        }
    }
}

impl MemoryNetwork {
    pub fn new() -> MemoryNetwork {
        MemoryNetwork::default()
    }

    fn state(&self) -> MutexGuard<'_, NetState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The transport of the node at `host`.
    pub fn host(&self, host: IpAddr) -> MemoryTransport {
        self.state().hosts.insert(host);
        MemoryTransport {
            network: self.clone(),
            host,
        }
    }

    /// Cuts the path between two hosts, both ways.
    pub fn cut(&self, a: IpAddr, b: IpAddr) {
        if a != b {
            self.state().link(a, b).set_cut(true);
        }
    }

    /// Restores the path between two hosts.
    pub fn heal(&self, a: IpAddr, b: IpAddr) {
        self.state().link(a, b).set_cut(false);
    }

    /// Cuts `host` off from every other host the network knows.
    pub fn isolate(&self, host: IpAddr) {
        let mut state = self.state();
        let others: Vec<IpAddr> = state.hosts.iter().copied().filter(|h| *h != host).collect();
        for other in others {
            state.link(host, other).set_cut(true);
        }
    }

    /// Restores every path.
    pub fn heal_all(&self) {
        let state = self.state();
        for link in state.links.values() {
            link.set_cut(false);
        }
    }
}

/// One host's view of a [`MemoryNetwork`].
#[derive(Clone, Debug)]
pub struct MemoryTransport {
    network: MemoryNetwork,
    host: IpAddr,
}

impl MemoryTransport {
    pub fn host(&self) -> IpAddr {
        self.host
    }
}

impl Transport for MemoryTransport {
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<BoxConnection>> {
        Box::pin(async move {
            let target = parse(addr)?;
            let link = self.network.state().link(self.host, target.ip());
            // The SYN does not get through a cut link; it is retried until it does.
            std::future::poll_fn(|cx| {
                if link.stalls(cx) {
                    Poll::Pending
                } else {
                    Poll::Ready(())
                }
            })
            .await;
            let mut state = self.network.state();
            let Some((_, listener)) = state.listeners.get(&target).cloned() else {
                return Err(io::ErrorKind::ConnectionRefused.into());
            };
            let local = SocketAddr::new(self.host, state.free_port(self.host)?);
            drop(state);
            let (ours, theirs) = tokio::io::duplex(STREAM_BUFFER);
            let server_end = MemoryConnection {
                stream: theirs,
                link: Arc::clone(&link),
            };
            listener
                .try_send((server_end, local))
                .map_err(|_| io::Error::from(io::ErrorKind::ConnectionRefused))?;
            Ok(Box::new(MemoryConnection { stream: ours, link }) as BoxConnection)
        })
    }

    fn listen<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<Box<dyn Listener>>> {
        Box::pin(async move {
            let addr = parse(addr)?;
            let ip = if addr.ip().is_unspecified() || addr.ip() == self.host {
                self.host
            } else {
                return Err(io::Error::new(
                    io::ErrorKind::AddrNotAvailable,
                    format!("{} is not this host ({})", addr.ip(), self.host),
                ));
            };
            let mut state = self.network.state();
            let port = match addr.port() {
                0 => state.free_port(ip)?,
                port => port,
            };
            let local_addr = SocketAddr::new(ip, port);
            if state.listeners.contains_key(&local_addr) {
                return Err(io::ErrorKind::AddrInUse.into());
            }
            let (tx, rx) = mpsc::channel(BACKLOG);
            let id = state.next_listener;
            state.next_listener += 1;
            state.listeners.insert(local_addr, (id, tx));
            Ok(Box::new(MemoryListener {
                network: self.network.clone(),
                id,
                local_addr,
                incoming: rx,
            }) as Box<dyn Listener>)
        })
    }
}

fn parse(addr: &str) -> io::Result<SocketAddr> {
    addr.parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{addr} is not an ip:port address of this in-memory network"),
        )
    })
}

struct MemoryListener {
    network: MemoryNetwork,
    id: u64,
    local_addr: SocketAddr,
    incoming: mpsc::Receiver<(MemoryConnection, SocketAddr)>,
}

impl Drop for MemoryListener {
    fn drop(&mut self) {
        let mut state = self.network.state();
        if state
            .listeners
            .get(&self.local_addr)
            .is_some_and(|(id, _)| *id == self.id)
        {
            state.listeners.remove(&self.local_addr);
        }
    }
}

impl Listener for MemoryListener {
    fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxConnection, SocketAddr)>> {
        Box::pin(async move {
            match self.incoming.recv().await {
                Some((connection, peer)) => Ok((Box::new(connection) as BoxConnection, peer)),
                None => Err(io::ErrorKind::NotConnected.into()),
            }
        })
    }
}

/// One end of an in-memory connection.
struct MemoryConnection {
    stream: DuplexStream,
    link: Arc<Link>,
}

impl Connection for MemoryConnection {
    fn into_tcp(self: Box<Self>) -> Result<TcpStream, Box<dyn Connection>> {
        Err(self)
    }
}

impl AsyncRead for MemoryConnection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.link.stalls(cx) {
            return Poll::Pending;
        }
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for MemoryConnection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.link.stalls(cx) {
            return Poll::Pending;
        }
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.link.stalls(cx) {
            return Poll::Pending;
        }
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.link.stalls(cx) {
            return Poll::Pending;
        }
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
