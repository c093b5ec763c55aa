//! Connections: framing, per-connection ordering, and bounds.
//!
//! Each connection has a reader task and a writer task. The reader decodes one request
//! at a time and *dispatches* it (a produce is appended right there, so one
//! connection's appends keep their order); the handler's reply, possibly still waiting
//! (a long-poll fetch, later an acks=all produce), goes into a bounded queue that the
//! writer drains in request order. The queue bound is the connection's in-flight limit.
//! Complete replies the writer finds waiting together are written with one write.

mod connection;
mod inbound;
pub(crate) mod ktls;
mod outbound;
mod sasl;
mod sendfile;
mod stream;
mod tls;
#[cfg(test)]
mod writer_tests;

pub(crate) use connection::{serve_listener, ListenerContext, Reply, Session};
pub(crate) use inbound::{InboundSecurity, SecureListenTransport};
pub(crate) use outbound::{OutboundSecurity, SecureTransport};
pub(crate) use tls::handshake as tls_handshake;
