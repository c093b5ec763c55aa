//! One TCP connection to one broker: request out, response in, in order.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::{Request, StrBytes};
use kafka_protocol::ResponseError;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::error::{ClientError, Result};
use crate::versions::{client_range, NegotiatedVersions};

/// Connection settings shared by every connection of a [`crate::Client`].
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// Sent as `client_id` in every request header.
    pub client_id: String,
    /// Limit on opening the TCP connection.
    pub connect_timeout: Duration,
    /// Limit on each request/response exchange (a fetch adds its `max_wait`).
    pub request_timeout: Duration,
    /// Largest response frame accepted.
    pub max_response_bytes: usize,
    /// Authenticate every connection with SASL (SASL_PLAINTEXT, or SASL_SSL with `tls`).
    pub sasl: Option<crate::sasl::SaslCredentials>,
    /// Speak TLS (an SSL or SASL_SSL listener).
    pub tls: Option<crate::tls::ClientTls>,
}

/// What a connection runs over: TCP, or TLS on TCP.
trait Stream:
    tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + Sync + std::fmt::Debug
{
}

impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + Sync + std::fmt::Debug> Stream
    for T
{
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            client_id: "tidelog-client".into(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            max_response_bytes: 128 * 1024 * 1024,
            sasl: None,
            tls: None,
        }
    }
}

/// One broker connection with negotiated API versions. Requests are strictly one at a time;
/// after any I/O error or timeout the connection is [`Connection::is_broken`] and must be
/// replaced (a late response would otherwise be read as the answer to the next request).
#[derive(Debug)]
pub struct Connection {
    addr: String,
    stream: BufReader<Box<dyn Stream>>,
    config: ConnectionConfig,
    correlation_id: i32,
    versions: NegotiatedVersions,
    broken: bool,
}

impl Connection {
    /// Connects to `addr` (`host:port`) and negotiates API versions: ApiVersions v3 first,
    /// v0 when the broker answers UNSUPPORTED_VERSION.
    pub async fn connect(addr: &str, config: &ConnectionConfig) -> Result<Connection> {
        let connect_error = |reason: String| ClientError::Connect {
            addr: addr.to_owned(),
            reason,
        };
        let stream = match timeout(config.connect_timeout, TcpStream::connect(addr)).await {
            Err(_) => {
                return Err(connect_error(format!(
                    "timed out after {} ms",
                    config.connect_timeout.as_millis()
                )))
            }
            Ok(Err(e)) => return Err(connect_error(e.to_string())),
            Ok(Ok(s)) => s,
        };
        // Small requests (metadata, admin) must not wait for Nagle.
        stream
            .set_nodelay(true)
            .map_err(|e| connect_error(e.to_string()))?;
        let stream: Box<dyn Stream> = match &config.tls {
            None => Box::new(stream),
            Some(tls) => match timeout(config.connect_timeout, tls.wrap(addr, stream)).await {
                Err(_) => return Err(connect_error("TLS handshake timed out".into())),
                Ok(Err(e)) => return Err(connect_error(format!("TLS handshake: {e}"))),
                Ok(Ok(tls)) => Box::new(tls),
            },
        };
        let mut conn = Connection {
            addr: addr.to_owned(),
            stream: BufReader::new(stream),
            config: config.clone(),
            correlation_id: 0,
            versions: NegotiatedVersions::default(),
            broken: false,
        };
        conn.negotiate().await?;
        if let Some(credentials) = &config.sasl {
            conn.authenticate(credentials).await?;
        }
        Ok(conn)
    }

    async fn negotiate(&mut self) -> Result<()> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("tidelog-client"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let mut response: ApiVersionsResponse = self.exchange(&request, 3, None).await?;
        if response.error_code == ResponseError::UnsupportedVersion.code() {
            response = self.exchange(&request, 0, None).await?;
        }
        ClientError::check(response.error_code, None, || {
            format!("ApiVersions with {}", self.addr)
        })?;
        self.versions = NegotiatedVersions::negotiate(&response.api_keys);
        Ok(())
    }

    /// The broker address this connection goes to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// True after an I/O error or timeout: the connection must not be used again.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// The negotiated version of `key`, or `None` when the broker and this client share none.
    pub fn version(&self, key: ApiKey) -> Option<i16> {
        self.versions.get(key)
    }

    fn version_for<R: Request>(&self) -> Result<(ApiKey, i16)> {
        let key = ApiKey::try_from(R::KEY)
            .map_err(|_| ClientError::Protocol(format!("unknown api key {}", R::KEY)))?;
        match self.versions.get(key) {
            Some(v) => Ok((key, v)),
            None => Err(ClientError::UnsupportedApi {
                addr: self.addr.clone(),
                api: format!("{key:?}"),
                ours: client_range(key)
                    .map(|(a, b)| format!("{a}..{b}"))
                    .unwrap_or_else(|| "none".into()),
            }),
        }
    }

    /// Sends `request` at the negotiated version and returns the decoded response.
    pub async fn send<R: Request>(&mut self, request: &R) -> Result<R::Response> {
        let (_, version) = self.version_for::<R>()?;
        self.exchange(request, version, None).await
    }

    /// Like [`Connection::send`] with a longer deadline (long-polling fetches).
    pub async fn send_with_timeout<R: Request>(
        &mut self,
        request: &R,
        limit: Duration,
    ) -> Result<R::Response> {
        let (_, version) = self.version_for::<R>()?;
        self.exchange(request, version, Some(limit)).await
    }

    /// Sends a request the broker does not answer (Produce with acks=0).
    pub async fn send_oneway<R: Request>(&mut self, request: &R) -> Result<()> {
        let (key, version) = self.version_for::<R>()?;
        let frame = self.encode(request, key, version)?;
        let limit = self.config.request_timeout;
        self.guard(key, limit, async |c: &mut Connection| c.write(&frame).await)
            .await
    }

    fn encode<R: Request>(&mut self, request: &R, key: ApiKey, version: i16) -> Result<Bytes> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        tidelog_protocol::client::encode_request(
            key,
            version,
            self.correlation_id,
            Some(&self.config.client_id),
            request,
        )
        .map_err(|e| ClientError::Protocol(format!("encoding {key:?} v{version}: {e}")))
    }

    async fn exchange<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        limit: Option<Duration>,
    ) -> Result<R::Response> {
        let key = ApiKey::try_from(R::KEY)
            .map_err(|_| ClientError::Protocol(format!("unknown api key {}", R::KEY)))?;
        let frame = self.encode(request, key, version)?;
        let expected = self.correlation_id;
        let limit = limit.unwrap_or(self.config.request_timeout);
        let body = self
            .guard(key, limit, async |c: &mut Connection| {
                c.write(&frame).await?;
                c.read().await
            })
            .await?;
        let (correlation_id, response) = tidelog_protocol::client::decode_response::<R::Response>(
            body, key, version,
        )
        .map_err(|e| {
            self.broken = true;
            ClientError::Protocol(format!("decoding {key:?} v{version} response: {e}"))
        })?;
        if correlation_id != expected {
            self.broken = true;
            return Err(ClientError::Protocol(format!(
                "{} answered correlation id {correlation_id}, expected {expected}",
                self.addr
            )));
        }
        Ok(response)
    }

    /// Runs one exchange under `limit`; any failure poisons the connection.
    async fn guard<T>(
        &mut self,
        key: ApiKey,
        limit: Duration,
        op: impl AsyncFnOnce(&mut Connection) -> Result<T>,
    ) -> Result<T> {
        if self.broken {
            return Err(ClientError::Closed {
                addr: self.addr.clone(),
            });
        }
        let addr = self.addr.clone();
        match timeout(limit, op(self)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                self.broken = true;
                Err(e)
            }
            Err(_) => {
                self.broken = true;
                Err(ClientError::Timeout {
                    addr,
                    api: format!("{key:?}"),
                    timeout_ms: u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
                })
            }
        }
    }

    async fn write(&mut self, frame: &[u8]) -> Result<()> {
        let addr = self.addr.clone();
        let io = |source| ClientError::Io { addr, source };
        let stream = self.stream.get_mut();
        match stream.write_all(frame).await {
            Ok(()) => stream.flush().await.map_err(io),
            Err(e) => Err(io(e)),
        }
    }

    async fn read(&mut self) -> Result<Bytes> {
        match tidelog_protocol::frame::read_frame(&mut self.stream, self.config.max_response_bytes)
            .await
        {
            Ok(Some(body)) => Ok(body.freeze()),
            Ok(None) => Err(ClientError::Closed {
                addr: self.addr.clone(),
            }),
            Err(tidelog_protocol::frame::FrameError::Io(source)) => Err(ClientError::Io {
                addr: self.addr.clone(),
                source,
            }),
            Err(e) => Err(ClientError::Protocol(format!(
                "reading a response from {}: {e}",
                self.addr
            ))),
        }
    }
}
