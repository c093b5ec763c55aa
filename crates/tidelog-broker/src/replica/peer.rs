//! A connection to another broker's Kafka listener (over the node's inter-broker
//! transport), for a follower's fetches and a coordinator's transaction markers:
//! one request at a time, with a timeout on every step and a bound on the response size.

use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable};
use tidelog_env::net::{BoxConnection, Transport};
use tidelog_protocol::client::{decode_response, encode_request};
use tidelog_protocol::frame::read_frame;
use tokio::io::AsyncWriteExt;

#[derive(Debug, thiserror::Error)]
pub(crate) enum PeerError {
    #[error("i/o with the leader: {0}")]
    Io(#[from] std::io::Error),
    #[error("timed out talking to the leader")]
    Timeout,
    #[error("the leader closed the connection")]
    Closed,
    #[error("protocol: {0}")]
    Protocol(String),
}

impl PeerError {
    /// The leader's listener refused this node's TLS handshake or SASL login: a
    /// configuration problem an operator must see, not a leader restarting.
    pub(crate) fn is_refused_security(&self) -> bool {
        matches!(self, PeerError::Io(e) if matches!(
            e.kind(),
            std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::InvalidData
        ))
    }
}

pub(crate) struct Peer {
    stream: BoxConnection,
    next_correlation: i32,
    client_id: String,
}

impl Peer {
    /// Connects (and, on a secured inter-broker listener, authenticates: see
    /// `net::outbound`) within `timeout`.
    pub(crate) async fn connect(
        transport: &dyn Transport,
        host: &str,
        port: u16,
        client_id: String,
        timeout: Duration,
    ) -> Result<Peer, PeerError> {
        let addr = host_port(host, port);
        let stream = tokio::time::timeout(timeout, transport.connect(&addr))
            .await
            .map_err(|_| PeerError::Timeout)??;
        Ok(Peer {
            stream,
            next_correlation: 1,
            client_id,
        })
    }

    /// Sends one request and reads its response (at most `max_frame` bytes), all within
    /// `timeout`.
    pub(crate) async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        body: &Req,
        max_frame: usize,
        timeout: Duration,
    ) -> Result<Resp, PeerError> {
        let correlation = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1).max(1);
        let bytes = encode_request(key, version, correlation, Some(&self.client_id), body)
            .map_err(|e| PeerError::Protocol(e.to_string()))?;
        let exchange = async {
            self.stream.write_all(&bytes).await?;
            let frame = read_frame(&mut self.stream, max_frame)
                .await
                .map_err(|e| PeerError::Protocol(e.to_string()))?
                .ok_or(PeerError::Closed)?;
            let (got, body) = decode_response::<Resp>(frame.freeze(), key, version)
                .map_err(|e| PeerError::Protocol(e.to_string()))?;
            if got != correlation {
                return Err(PeerError::Protocol(format!(
                    "correlation id {got}, expected {correlation}"
                )));
            }
            Ok(body)
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| PeerError::Timeout)?
    }
}

/// `host:port`, with an IPv6 literal in brackets.
pub(crate) fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}
