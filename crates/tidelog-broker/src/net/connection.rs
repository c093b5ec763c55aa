use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use tidelog_protocol::frame::{read_frame, FrameError};
use tidelog_protocol::header::decode_request_header;
use tidelog_protocol::Chunk;
use tidelog_protocol::ProtocolError;
use tidelog_storage::FileSlice;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use crate::apis;
use crate::context::Ctx;

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
}

/// Accepts connections until shutdown.
pub(crate) async fn serve_listener(
    listener: TcpListener,
    ctx: Ctx,
    mut shutdown: watch::Receiver<bool>,
) {
    let open = Arc::new(AtomicUsize::new(0));
    let max_connections = usize::try_from(ctx.config.get_i64("max.connections")).unwrap_or(10_000);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    if open.load(Ordering::Acquire) >= max_connections {
                        tracing::warn!(%peer, "connection refused: max.connections reached");
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let ctx = Arc::clone(&ctx);
                    let open = Arc::clone(&open);
                    let shutdown = shutdown.clone();
                    open.fetch_add(1, Ordering::AcqRel);
                    tokio::spawn(async move {
                        serve_connection(stream, peer, ctx, shutdown).await;
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

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    ctx: Ctx,
    mut shutdown: watch::Receiver<bool>,
) {
    let (mut reader, writer) = stream.into_split();
    let (tx, rx) = mpsc::channel::<Reply>(MAX_IN_FLIGHT);
    let writer_task = tokio::spawn(write_replies(writer, rx, peer));
    let max_bytes = ctx.config.max_request_bytes();
    loop {
        let frame = tokio::select! {
            frame = read_frame(&mut reader, max_bytes) => frame,
            _ = shutdown.changed() => break,
        };
        let frame = match frame {
            Ok(Some(frame)) => frame.freeze(),
            Ok(None) => break,
            Err(FrameError::Io(_)) => break,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "bad frame; closing connection");
                break;
            }
        };
        let reply = dispatch(&ctx, frame, peer).await;
        let close = matches!(reply, Reply::Close);
        if tx.send(reply).await.is_err() || close {
            break;
        }
    }
    drop(tx);
    let _ = writer_task.await;
}

async fn dispatch(ctx: &Ctx, mut frame: Bytes, peer: SocketAddr) -> Reply {
    let header = match decode_request_header(&mut frame) {
        Ok(header) => header,
        Err(ProtocolError::UnknownApiKey { api_key, .. }) => {
            tracing::warn!(%peer, api_key, "unknown api key; closing connection");
            return Reply::Close;
        }
        // A newer client's ApiVersions header may not parse at our versions; Kafka still
        // answers it with the ranges it supports.
        Err(ProtocolError::MalformedHeader {
            api_key: ApiKey::ApiVersions,
            correlation_id,
            ..
        }) => return apis::api_versions::unsupported_version(correlation_id),
        Err(e) => {
            tracing::warn!(%peer, error = %e, "malformed request header; closing connection");
            return Reply::Close;
        }
    };
    apis::handle(ctx, header, frame, peer).await
}

async fn write_replies(
    mut writer: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Reply>,
    peer: SocketAddr,
) {
    while let Some(reply) = rx.recv().await {
        let mut reply = reply;
        loop {
            match reply {
                Reply::Later(fut) => reply = fut.await,
                Reply::Nothing => break,
                Reply::Close => {
                    let _ = writer.shutdown().await;
                    return;
                }
                Reply::Chunks(chunks, files) => {
                    if let Err(e) =
                        super::sendfile::write_chunks(writer.as_ref(), &chunks, &files).await
                    {
                        tracing::debug!(%peer, error = %e, "write failed");
                        return;
                    }
                    break;
                }
                Reply::Bytes(bytes) => {
                    if let Err(e) = writer.write_all(&bytes).await {
                        tracing::debug!(%peer, error = %e, "write failed");
                        return;
                    }
                    break;
                }
            }
        }
    }
    let _ = writer.shutdown().await;
}
