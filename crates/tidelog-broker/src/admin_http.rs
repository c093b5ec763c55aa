//! The HTTP admin port: `/healthz` (the process is up), `/readyz` (metadata loaded,
//! logs recovered, Kafka listener accepting), `/metrics` (OpenMetrics text, which Prometheus scrapes) and
//! the JSON views `/v1/cluster`, `/v1/topics`, `/v1/groups`. A deliberately tiny
//! HTTP/1.1 responder: GET only, one request per connection, bounded request size and
//! time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::metrics::{views, Metrics, NodeView};

const MAX_REQUEST_HEAD: usize = 8 * 1024;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Scrapes answered at once; more wait for a turn, so a scrape storm cannot pile up
/// blocking work (each one locks every partition briefly).
const MAX_CONCURRENT_ANSWERS: usize = 8;

const TEXT: &str = "text/plain; charset=utf-8";
/// What `prometheus_client` writes: OpenMetrics text (counter families named without
/// `_total`, a final `# EOF`), which Prometheus parses by this content type.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const JSON: &str = "application/json";

/// What the admin port answers from. The port opens before the node's logs are
/// recovered (so `/healthz` answers during a long recovery); `node` carries the node's
/// view once the server has built it.
#[derive(Clone)]
pub(crate) struct AdminState {
    pub(crate) ready: Arc<AtomicBool>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) node: watch::Receiver<Option<Arc<NodeView>>>,
}

impl AdminState {
    fn node(&self) -> Option<Arc<NodeView>> {
        self.node.borrow().clone()
    }
}

pub(crate) async fn serve(
    listener: TcpListener,
    state: AdminState,
    mut shutdown: watch::Receiver<bool>,
) {
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_ANSWERS));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    let state = state.clone();
                    let permits = Arc::clone(&permits);
                    tokio::spawn(async move {
                        let Ok(_permit) = permits.acquire_owned().await else {
                            return;
                        };
                        let _ = tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, state)).await;
                    });
                }
            }
            _ = shutdown.changed() => break,
        }
    }
}

struct Response {
    status: &'static str,
    content_type: &'static str,
    body: String,
}

impl Response {
    fn new(status: &'static str, content_type: &'static str, body: impl Into<String>) -> Self {
        Response {
            status,
            content_type,
            body: body.into(),
        }
    }
}

async fn answer(mut stream: TcpStream, state: AdminState) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST_HEAD {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let request_line = String::from_utf8_lossy(&head);
    let mut words = request_line.split_whitespace();
    let method = words.next().unwrap_or("");
    // A query string selects nothing here; `/metrics?x=y` is `/metrics`.
    let path = words.next().unwrap_or("").split('?').next().unwrap_or("");
    let response = if method != "GET" && method != "HEAD" {
        Response::new("405 Method Not Allowed", TEXT, "GET only\n")
    } else {
        route(path, state).await
    };
    let header = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response.status,
        response.content_type,
        response.body.len()
    );
    stream.write_all(header.as_bytes()).await?;
    if method != "HEAD" {
        stream.write_all(response.body.as_bytes()).await?;
    }
    stream.shutdown().await
}

async fn route(path: &str, state: AdminState) -> Response {
    match path {
        "/healthz" => Response::new("200 OK", TEXT, "ok\n"),
        "/readyz" if state.ready.load(Ordering::Acquire) => {
            Response::new("200 OK", TEXT, "ready\n")
        }
        "/readyz" => Response::new("503 Service Unavailable", TEXT, "not ready\n"),
        // Scrape-time gauges lock partitions and may read from disk: off the runtime.
        "/metrics" => {
            let node = state.node();
            let metrics = Arc::clone(&state.metrics);
            match tokio::task::spawn_blocking(move || metrics.render(node.as_ref())).await {
                Ok(body) => Response::new("200 OK", OPENMETRICS, body),
                Err(_) => Response::new("500 Internal Server Error", TEXT, "metrics failed\n"),
            }
        }
        "/v1/cluster" | "/v1/topics" | "/v1/groups" => json_view(path.to_string(), state).await,
        _ => Response::new("404 Not Found", TEXT, "not found\n"),
    }
}

async fn json_view(path: String, state: AdminState) -> Response {
    // What /readyz says, these say too: a node that is not ready (starting, or cut off
    // from the controller quorum) has no trustworthy view of the cluster.
    let node = match state.node() {
        Some(node) if state.ready.load(Ordering::Acquire) => node,
        _ => return Response::new("503 Service Unavailable", TEXT, "not ready\n"),
    };
    let metrics = state.metrics;
    let view = tokio::task::spawn_blocking(move || match path.as_str() {
        "/v1/cluster" => views::cluster(&node),
        "/v1/topics" => views::topics(&node),
        _ => views::groups(&node, &metrics.groups),
    })
    .await;
    match view {
        Ok(value) => {
            let mut body = serde_json::to_string_pretty(&value).unwrap_or_default();
            body.push('\n');
            Response::new("200 OK", JSON, body)
        }
        Err(_) => Response::new("500 Internal Server Error", TEXT, "view failed\n"),
    }
}
