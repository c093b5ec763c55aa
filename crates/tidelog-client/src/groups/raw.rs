//! A connection for the group APIs at fixed versions that every Kafka since 2.x and
//! tidelog speak: the shared [`crate::Connection`]'s version table covers only the
//! produce, fetch and admin APIs.

use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::Request;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::client::Client;
use crate::error::{ClientError, Result};

const RESPONSE_LIMIT: usize = 100 * 1024 * 1024;

pub(crate) struct RawConnection {
    addr: String,
    stream: TcpStream,
    correlation_id: i32,
    client_id: String,
    limit: Duration,
}

impl RawConnection {
    pub(crate) async fn connect(addr: &str, client: &Client) -> Result<RawConnection> {
        let limit = client.config().connection.request_timeout;
        let io = |source| ClientError::Io {
            addr: addr.to_string(),
            source,
        };
        let stream = match timeout(limit, TcpStream::connect(addr)).await {
            Ok(stream) => stream.map_err(io)?,
            Err(_) => {
                return Err(ClientError::Timeout {
                    addr: addr.to_string(),
                    api: "connect".into(),
                    timeout_ms: u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
                })
            }
        };
        let _ = stream.set_nodelay(true);
        Ok(RawConnection {
            addr: addr.to_string(),
            stream,
            correlation_id: 0,
            client_id: client.config().connection.client_id.clone(),
            limit,
        })
    }

    pub(crate) async fn call<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response> {
        let key = ApiKey::try_from(R::KEY)
            .map_err(|_| ClientError::Protocol(format!("unknown api key {}", R::KEY)))?;
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let frame = tidelog_protocol::client::encode_request(
            key,
            version,
            self.correlation_id,
            Some(&self.client_id),
            request,
        )
        .map_err(|e| ClientError::Protocol(format!("encoding {key:?} v{version}: {e}")))?;
        let addr = self.addr.clone();
        let exchange = async {
            self.stream
                .write_all(&frame)
                .await
                .map_err(|source| ClientError::Io {
                    addr: addr.clone(),
                    source,
                })?;
            match tidelog_protocol::frame::read_frame(&mut self.stream, RESPONSE_LIMIT).await {
                Ok(Some(body)) => Ok(body.freeze()),
                Ok(None) => Err(ClientError::Closed { addr: addr.clone() }),
                Err(e) => Err(ClientError::Protocol(format!("reading from {addr}: {e}"))),
            }
        };
        let body = timeout(self.limit, exchange)
            .await
            .map_err(|_| ClientError::Timeout {
                addr: self.addr.clone(),
                api: format!("{key:?}"),
                timeout_ms: u64::try_from(self.limit.as_millis()).unwrap_or(u64::MAX),
            })??;
        let (correlation_id, response) =
            tidelog_protocol::client::decode_response::<R::Response>(body, key, version)
                .map_err(|e| ClientError::Protocol(format!("decoding {key:?} v{version}: {e}")))?;
        if correlation_id != self.correlation_id {
            return Err(ClientError::Protocol(format!(
                "{} answered correlation id {correlation_id}, expected {}",
                self.addr, self.correlation_id
            )));
        }
        Ok(response)
    }

    /// Like [`RawConnection::call`] with another response deadline: JoinGroup is held by
    /// the coordinator for up to the rebalance timeout.
    pub(crate) async fn call_for<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        limit: Duration,
    ) -> Result<R::Response> {
        let usual = std::mem::replace(&mut self.limit, limit);
        let response = self.call(request, version).await;
        self.limit = usual;
        response
    }

    /// Retries while the coordinator is loading (bounded: about 5 s).
    pub(crate) async fn call_retrying<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        error_of: impl Fn(&R::Response) -> i16,
    ) -> Result<R::Response> {
        let loading = kafka_protocol::ResponseError::CoordinatorLoadInProgress.code();
        for _ in 0..25 {
            let response = self.call(request, version).await?;
            if error_of(&response) != loading {
                return Ok(response);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        self.call(request, version).await
    }
}
