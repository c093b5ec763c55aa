use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use tidelog_env::net::{BoxConnection, Listener};
use tidelog_protocol::frame::{read_request_frame, FrameError, RequestFrame};
use tidelog_protocol::header::decode_request_header;
use tidelog_protocol::Chunk;
use tidelog_protocol::ProtocolError;
use tidelog_storage::FileSlice;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

use super::sasl::{Exchange, SaslSession};
use super::sendfile::SliceReadFailed;
use super::stream::{split, WriteSide};
use super::tls;
use crate::apis;
use crate::context::Ctx;
use crate::metrics::{Metrics, RequestTiming};
use crate::quota::{self, QuotaKind};
use crate::replica::LogDirFailures;
use crate::sasl::SaslListener;
use crate::settings;

/// Requests one connection may have in flight before the reader stops reading.
const MAX_IN_FLIGHT: usize = 64;

pub(crate) type ReplyFuture = Pin<Box<dyn Future<Output = Reply> + Send>>;

/// A handler's answer.
pub(crate) enum Reply {
    /// No response at all (produce with acks=0).
    Nothing,
    /// A complete framed response.
    Bytes(Bytes),
    /// A response whose record bytes are sent from segment files (Fetch).
    Chunks(Vec<Chunk>, Vec<FileSlice>),
    /// A response that is not ready yet.
    Later(ReplyFuture),
    /// The request was unanswerable; close the connection after earlier replies.
    Close,
    /// A reply with the times its request reached each stage, for the latency
    /// metrics; the reader wraps every decoded request's reply in one.
    Timed(Box<Reply>, RequestTiming),
}

/// One bound listener: its name (what Metadata answers depend on), for an SSL or
/// SASL_SSL listener its TLS server, and for a SASL listener its mechanisms.
pub(crate) struct ListenerContext {
    pub(crate) name: Arc<str>,
    /// Rebuilt when its key or trust store files change (new connections use it).
    pub(crate) tls: Option<Arc<crate::tls::ServerTlsFiles>>,
    pub(crate) sasl: Option<Arc<SaslListener>>,
}

/// Who is on the other end of a connection, as its requests see it.
#[derive(Debug)]
pub(crate) struct Session {
    /// The listener it came through: Metadata, FindCoordinator and DescribeCluster
    /// answer with that listener's endpoints.
    pub(crate) listener: Arc<str>,
    /// `User:ANONYMOUS`, from the TLS client certificate `User:CN=...`, or on a SASL
    /// listener the authenticated `User:<name>` (which re-authentication cannot
    /// change); what an authorizer will check.
    pub(crate) principal: String,
    /// Set by a throttled answer (client quotas): nothing more is read from the
    /// connection until it passes.
    pub(crate) mute: crate::quota::Mute,
    /// The connection carries a follower's fetches: exempt from client quotas, as
    /// Kafka exempts replication from them.
    pub(crate) inter_broker: std::sync::atomic::AtomicBool,
}

impl Session {
    pub(crate) fn new(listener: Arc<str>, principal: String) -> Session {
        Session {
            listener,
            principal,
            mute: crate::quota::Mute::default(),
            inter_broker: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

/// Accepts connections until shutdown. `open` counts the connections of every
/// listener (`max.connections` is per broker).
pub(crate) async fn serve_listener(
    mut listener: Box<dyn Listener>,
    endpoint: ListenerContext,
    open: Arc<AtomicUsize>,
    ctx: Ctx,
    mut shutdown: watch::Receiver<bool>,
) {
    let endpoint = Arc::new(endpoint);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    // Read per connection: max.connections is a dynamic config.
                    let max_connections = ctx.settings().count::<usize>(settings::MAX_CONNECTIONS);
                    if open.load(Ordering::Acquire) >= max_connections {
                        ctx.metrics.requests.connection_refused();
                        tracing::warn!(%peer, "connection refused: max.connections reached");
                        continue;
                    }
                    let ctx = Arc::clone(&ctx);
                    let open = Arc::clone(&open);
                    let shutdown = shutdown.clone();
                    let endpoint = Arc::clone(&endpoint);
                    open.fetch_add(1, Ordering::AcqRel);
                    ctx.metrics.requests.connection_opened();
                    tokio::spawn(async move {
                        let metrics = Arc::clone(&ctx.metrics);
                        // The handshake runs here, not in the accept loop: a slow
                        // client delays nobody else.
                        let secured = match &endpoint.tls {
                            Some(server) => tls::handshake(&server.get().await, stream, peer, &endpoint.name).await,
                            None => Some((stream, "User:ANONYMOUS".to_string())),
                        };
                        if let Some((stream, principal)) = secured {
                            serve_connection(stream, peer, &endpoint, principal, ctx, shutdown).await;
                        }
                        metrics.requests.connection_closed();
                        open.fetch_sub(1, Ordering::AcqRel);
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            _ = shutdown.changed() => break,
        }
    }
}

/// Reads the first bytes of a connection. A TLS handshake there (a TLS client on a
/// plaintext listener, whose ClientHello would read as a frame of some 369 MB) closes
/// the connection with a log line saying so. `None`: the connection is to be closed.
async fn first_bytes(
    reader: &mut (impl tokio::io::AsyncRead + Unpin),
    peer: SocketAddr,
    listener: &str,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<[u8; 4]> {
    let mut prefix = [0u8; 4];
    tokio::select! {
        read = reader.read_exact(&mut prefix) => read.ok()?,
        _ = shutdown.changed() => return None,
    };
    if tls::looks_like_tls(&prefix) {
        tracing::warn!(%peer, listener, "TLS handshake on plaintext listener {listener}; closing the connection (the client must use security.protocol=PLAINTEXT here, or connect to an SSL listener)");
        return None;
    }
    Some(prefix)
}

async fn serve_connection(
    stream: BoxConnection,
    peer: SocketAddr,
    endpoint: &ListenerContext,
    transport_principal: String,
    ctx: Ctx,
    mut shutdown: watch::Receiver<bool>,
) {
    let listener = &endpoint.name;
    tracing::debug!(%peer, listener = &**listener, "connection");
    let (mut reader, writer) = split(stream);
    let Some(prefix) = first_bytes(&mut reader, peer, listener, &mut shutdown).await else {
        let _ = writer.shutdown_quietly().await;
        return;
    };
    let mut reader = std::io::Cursor::new(prefix).chain(reader);
    let (tx, rx) = mpsc::channel::<Reply>(MAX_IN_FLIGHT);
    let writer_task = tokio::spawn(write_replies(
        writer,
        rx,
        peer,
        Arc::clone(&ctx.metrics),
        Arc::clone(ctx.replicas.dir_failures()),
    ));
    let exchange = endpoint.sasl.as_deref().map(|sasl| Exchange {
        ctx: &ctx,
        listener: sasl,
        listener_name: listener,
        peer,
        tx: &tx,
    });
    // On a SASL listener nothing but the exchange is served until it succeeds; the
    // session's principal is the SASL user (over SASL_SSL too, as in Kafka).
    let mut sasl_session = None;
    if let Some(exchange) = &exchange {
        sasl_session = exchange.run(&mut reader, None, &mut shutdown).await;
    }
    if exchange.is_some() && sasl_session.is_none() {
        // Failed or gone: whatever the exchange queued (its answer, the close) is
        // written before the writer ends.
        drop(tx);
        let _ = writer_task.await;
        return;
    }
    let principal = sasl_session
        .as_ref()
        .map_or(transport_principal, |s: &SaslSession| s.principal.clone());
    let session = Arc::new(Session::new(Arc::clone(listener), principal));
    tracing::debug!(%peer, listener = &**listener, principal = %session.principal, "serving");
    let max_bytes = ctx.config.max_request_bytes();
    loop {
        if !wait_out_mute(&session, &mut shutdown).await {
            break;
        }
        // The api key and version are checked before the body is buffered, so a request
        // nobody will answer costs no memory whatever size it declares.
        let frame = tokio::select! {
            frame = read_request_frame(&mut reader, max_bytes, apis::accepts) => frame,
            _ = shutdown.changed() => break,
        };
        let frame = match frame {
            Ok(Some(RequestFrame::Accepted(frame))) => frame.freeze(),
            Ok(Some(RequestFrame::Refused {
                api_key,
                api_version,
                correlation_id,
            })) => {
                if let Ok(key) = ApiKey::try_from(api_key) {
                    ctx.metrics.requests.unsupported_version(key);
                }
                if api_key == ApiKey::ApiVersions as i16 {
                    let reply = apis::api_versions::unsupported_version(correlation_id);
                    if tx.send(reply).await.is_err() {
                        break;
                    }
                    continue;
                }
                tracing::warn!(%peer, api_key, api_version, "unsupported api or version; closing connection");
                let _ = tx.send(Reply::Close).await;
                break;
            }
            Ok(None) => break,
            Err(FrameError::Io(_)) => break,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "bad frame; closing connection");
                break;
            }
        };
        let received = Instant::now();
        if let (Some(exchange), Some(current)) = (&exchange, &sasl_session) {
            let api_key = frame.get(..2).map(|k| i16::from_be_bytes([k[0], k[1]]));
            if api_key == Some(ApiKey::SaslHandshake as i16) && current.can_reauthenticate {
                match exchange
                    .run(&mut reader, Some((current, frame)), &mut shutdown)
                    .await
                {
                    Some(renewed) => sasl_session = Some(renewed),
                    None => break,
                }
                continue;
            }
            if current.expired(received) {
                tracing::info!(%peer, listener = &**listener, "SASL session expired (connections.max.reauth.ms) without re-authentication; closing the connection");
                let _ = tx.send(Reply::Close).await;
                break;
            }
        }
        // A fetch answered while this frame was read may have throttled the client.
        if !wait_out_mute(&session, &mut shutdown).await {
            break;
        }
        ctx.metrics.requests.frame_received(frame.len());
        let (reply, api) = dispatch(&ctx, frame, peer, &session).await;
        let close = matches!(reply, Reply::Close);
        let reply = match api {
            Some(api) => {
                let timing = RequestTiming {
                    api,
                    received,
                    dispatched: Instant::now(),
                };
                Reply::Timed(Box::new(reply), timing)
            }
            None => reply,
        };
        if tx.send(reply).await.is_err() || close {
            break;
        }
    }
    drop(tx);
    let _ = writer_task.await;
}

/// Waits until a client-quota mute of the connection ends (KIP-219: a throttled
/// client's next request is not read before its throttle time has passed). `false`:
/// the node is shutting down.
async fn wait_out_mute(session: &Session, shutdown: &mut watch::Receiver<bool>) -> bool {
    let Some(until) = session.mute.take() else {
        return true;
    };
    tokio::select! {
        _ = tokio::time::sleep_until(until.into()) => true,
        _ = shutdown.changed() => false,
    }
}

/// Decodes the header and runs the handler; returns the reply and, when the header
/// decoded, the request's API (what the metrics count it under).
async fn dispatch(
    ctx: &Ctx,
    mut frame: Bytes,
    peer: SocketAddr,
    session: &Arc<Session>,
) -> (Reply, Option<ApiKey>) {
    let frame_len = frame.len();
    let header = match decode_request_header(&mut frame) {
        Ok(header) => header,
        Err(ProtocolError::UnknownApiKey { api_key, .. }) => {
            tracing::warn!(%peer, api_key, "unknown api key; closing connection");
            return (Reply::Close, None);
        }
        // A newer client's ApiVersions header may not parse at our versions; Kafka still
        // answers it with the ranges it supports.
        Err(ProtocolError::MalformedHeader {
            api_key: ApiKey::ApiVersions,
            correlation_id,
            ..
        }) => {
            ctx.metrics.requests.request(ApiKey::ApiVersions, frame_len);
            let reply = apis::api_versions::unsupported_version(correlation_id);
            return (reply, Some(ApiKey::ApiVersions));
        }
        Err(e) => {
            tracing::warn!(%peer, error = %e, "malformed request header; closing connection");
            return (Reply::Close, None);
        }
    };
    let api = header.api_key;
    ctx.metrics.requests.request(api, frame_len);
    let client_id = header.client_id.clone();
    let started = Instant::now();
    let reply = apis::handle(ctx, header, frame, peer, session).await;
    // The request quota (request_percentage) counts the time the handler took.
    quota::charge(
        ctx,
        session,
        QuotaKind::Request,
        client_id.as_deref(),
        quota::percent_seconds(started.elapsed()),
    );
    if matches!(reply, Reply::Close) {
        ctx.metrics.requests.closed_connection(api);
    }
    (reply, Some(api))
}

/// Replies already waiting when the writer reaches a complete one are written together,
/// up to this many bytes: a producer that sends a request per partition gets one write
/// (one segment, one wake-up on its side) for a burst instead of one per partition.
const COALESCE_MAX_BYTES: usize = 64 * 1024;

/// A reply taken apart: its content, when its request arrived and was dispatched, when
/// the writer dequeued it, and when its content was ready.
struct Unwrapped {
    reply: Reply,
    timing: Option<RequestTiming>,
    dequeued: Instant,
    ready: Instant,
}

/// Removes the metrics wrapper and resolves a reply that is not ready yet.
async fn unwrap_reply(mut reply: Reply) -> Unwrapped {
    let dequeued = Instant::now();
    let mut ready = dequeued;
    let mut timing = None;
    loop {
        match reply {
            Reply::Timed(inner, t) => {
                timing = Some(t);
                reply = *inner;
            }
            Reply::Later(fut) => {
                reply = fut.await;
                ready = Instant::now();
            }
            reply => {
                return Unwrapped {
                    reply,
                    timing,
                    dequeued,
                    ready,
                }
            }
        }
    }
}

pub(super) async fn write_replies(
    mut writer: WriteSide,
    mut rx: mpsc::Receiver<Reply>,
    peer: SocketAddr,
    metrics: Arc<Metrics>,
    dir_failures: Arc<LogDirFailures>,
) {
    let mut next = rx.recv().await;
    // Complete replies gathered for one write, with their timings.
    let mut gathered: Vec<Bytes> = Vec::new();
    let mut gathered_len = 0usize;
    let mut finished: Vec<(RequestTiming, Instant, Instant)> = Vec::new();
    while let Some(reply) = next.take() {
        let Unwrapped {
            reply,
            timing,
            dequeued,
            ready,
        } = unwrap_reply(reply).await;
        if let Reply::Bytes(bytes) = reply {
            gathered_len += bytes.len();
            gathered.push(bytes);
            if let Some(t) = timing {
                finished.push((t, dequeued, ready));
            }
            if gathered_len < COALESCE_MAX_BYTES {
                next = rx.try_recv().ok();
                // A reply still waiting (a parked fetch) must not hold back the ones
                // gathered before it.
                if next.as_ref().is_some_and(is_complete_bytes) {
                    continue;
                }
            }
            if let Err(e) = write_gathered(&mut writer, &mut gathered).await {
                tracing::debug!(%peer, error = %e, "write failed");
                return;
            }
            metrics.requests.bytes_sent(gathered_len as u64);
            gathered_len = 0;
        } else {
            // Only complete replies are gathered, and the gathered ones go out at once.
            match reply {
                Reply::Close => {
                    let _ = writer.shutdown().await;
                    return;
                }
                Reply::Chunks(chunks, files) => {
                    if let Err(e) = writer.write_chunks(&chunks, &files).await {
                        // The size was sent ahead of the records, so a failed read of a
                        // log file mid-answer can only end the connection; unlike a peer
                        // hanging up, it is the disk failing, and the node halts.
                        match e
                            .get_ref()
                            .and_then(|inner| inner.downcast_ref::<SliceReadFailed>())
                        {
                            Some(failed) => {
                                tracing::error!(%peer, error = %e, "reading a log file for a fetch answer failed; connection closed");
                                dir_failures.report(&failed.file, &failed.storage_error());
                            }
                            None => tracing::debug!(%peer, error = %e, "write failed"),
                        }
                        return;
                    }
                    metrics.requests.bytes_sent(chunks_len(&chunks));
                }
                _ => {}
            }
            if let Some(t) = timing {
                finished.push((t, dequeued, ready));
            }
        }
        for (t, dequeued, ready) in finished.drain(..) {
            metrics.requests.finished(t, dequeued, ready);
        }
        if next.is_none() {
            next = rx.recv().await;
        }
    }
    let _ = writer.shutdown().await;
}

fn is_complete_bytes(reply: &Reply) -> bool {
    match reply {
        Reply::Bytes(_) => true,
        Reply::Timed(inner, _) => is_complete_bytes(inner),
        _ => false,
    }
}

/// Writes the gathered replies in order with one write where there are several, and
/// empties `gathered`.
async fn write_gathered(writer: &mut WriteSide, gathered: &mut Vec<Bytes>) -> std::io::Result<()> {
    match gathered.as_slice() {
        [] => {}
        [one] => writer.write_all(one).await?,
        several => {
            let mut joined = Vec::with_capacity(several.iter().map(Bytes::len).sum());
            for bytes in several {
                joined.extend_from_slice(bytes);
            }
            writer.write_all(&joined).await?;
        }
    }
    gathered.clear();
    Ok(())
}

fn chunks_len(chunks: &[Chunk]) -> u64 {
    chunks
        .iter()
        .map(|c| match c {
            Chunk::Bytes(b) => b.len() as u64,
            Chunk::External { len, .. } => *len,
        })
        .sum()
}
