//! The HTTP admin port: `/healthz` (the process is up), `/readyz` (metadata loaded,
//! logs recovered, Kafka listener accepting), `/metrics` (OpenMetrics text, which Prometheus scrapes) and
//! the JSON views `/v1/cluster`, `/v1/quorum`, `/v1/topics`, `/v1/groups`, `/v1/transactions`, `/v1/lag-history` and
//! `/v1/groups/<group>/lag-history`, and at `/` the console: one page whose HTML, CSS
//! and script are compiled into the binary (`console/`), drawn from those views. A
//! deliberately tiny HTTP/1.1 responder: GET only, one request per connection, bounded
//! request size and time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::admin_actions;
use crate::metrics::tail::{self, TailRequest};
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
const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JAVASCRIPT: &str = "text/javascript; charset=utf-8";

/// The console's assets: plain HTML, CSS and script, no build step, nothing fetched
/// from elsewhere (docs/operations.md states their size).
const CONSOLE_HTML: &str = include_str!("console/index.html");
const CONSOLE_CSS: &str = include_str!("console/console.css");
const CONSOLE_JS: &str = include_str!("console/console.js");
/// The page loads only its own assets and talks only to this port.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'";

/// What the admin port answers from. The port opens before the node's logs are
/// recovered (so `/healthz` answers during a long recovery); `node` carries the node's
/// view once the server has built it.
#[derive(Clone)]
pub(crate) struct AdminState {
    pub(crate) ready: Arc<AtomicBool>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) node: watch::Receiver<Option<Arc<NodeView>>>,
    /// The admin port authenticates nobody, so with an authorizer on (Kafka's ACLs
    /// guard every read of records) it shows no records.
    pub(crate) records_hidden: bool,
    /// `admin.console.actions.enabled`: the console may create topics.
    pub(crate) actions_enabled: bool,
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
    let mut head_end = None;
    while head_end.is_none() && head.len() < MAX_REQUEST_HEAD {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        head_end = head
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map(|p| p + 4);
    }
    let head_len = head_end.unwrap_or(head.len());
    let request_head = String::from_utf8_lossy(&head[..head_len]).into_owned();
    let mut words = request_head.split_whitespace();
    let method = words.next().unwrap_or("");
    // Only the records view reads a query string; `/metrics?x=y` is `/metrics`.
    let target = words.next().unwrap_or("");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let response = match method {
        "GET" | "HEAD" => route(path, query, state).await,
        "POST" => {
            let headers = Headers::parse(&request_head);
            match read_body(&mut stream, &head[head_len..], headers.content_length).await? {
                Some(body) => action(path, &headers, &body, state).await,
                None => Response::new("413 Payload Too Large", TEXT, "body too large\n"),
            }
        }
        _ => Response::new("405 Method Not Allowed", TEXT, "GET, HEAD or POST only\n"),
    };
    let header = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n\
         X-Content-Type-Options: nosniff\r\nContent-Security-Policy: {}\r\nConnection: close\r\n\r\n",
        response.status,
        response.content_type,
        response.body.len(),
        CONTENT_SECURITY_POLICY,
    );
    stream.write_all(header.as_bytes()).await?;
    if method != "HEAD" {
        stream.write_all(response.body.as_bytes()).await?;
    }
    stream.shutdown().await
}

/// The request headers an action reads.
struct Headers {
    content_length: usize,
    content_type_json: bool,
    from_console: bool,
}

impl Headers {
    fn parse(head: &str) -> Headers {
        let mut headers = Headers {
            content_length: 0,
            content_type_json: false,
            from_console: false,
        };
        for line in head.lines().skip(1) {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
            match name.as_str() {
                "content-length" => headers.content_length = value.parse().unwrap_or(usize::MAX),
                "content-type" => {
                    headers.content_type_json = value.starts_with("application/json");
                }
                n if n == admin_actions::CONSOLE_HEADER => headers.from_console = true,
                _ => {}
            }
        }
        headers
    }
}

/// The body: what came with the head and the rest up to `length`; None when
/// `length` is over [`admin_actions::MAX_BODY`].
async fn read_body(
    stream: &mut TcpStream,
    already: &[u8],
    length: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    if length > admin_actions::MAX_BODY {
        return Ok(None);
    }
    let mut body = already[..already.len().min(length)].to_vec();
    let mut buf = [0u8; 1024];
    while body.len() < length {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&buf[..n.min(length - body.len())]);
    }
    Ok(Some(body))
}

/// A console action: see `admin_actions` for who may act and how.
async fn action(path: &str, headers: &Headers, body: &[u8], state: AdminState) -> Response {
    let forbidden = |why: &str| Response::new("403 Forbidden", TEXT, format!("{why}\n"));
    let Some(action) = admin_actions::Action::for_path(path) else {
        return Response::new("405 Method Not Allowed", TEXT, "GET only here\n");
    };
    if !state.actions_enabled {
        return forbidden("console actions are off (admin.console.actions.enabled=false)");
    }
    if state.records_hidden {
        return forbidden("console actions are off while an authorizer is on: the admin port authenticates nobody");
    }
    if !headers.from_console || !headers.content_type_json {
        return forbidden("an action needs the X-Tidelog-Console header and a JSON body");
    }
    let Some(node) = state.node().filter(|_| state.ready.load(Ordering::Acquire)) else {
        return Response::new("503 Service Unavailable", TEXT, "not ready\n");
    };
    let answer = admin_actions::run(&node, action, body).await;
    let mut response = json_response(&answer.body);
    response.status = answer.status;
    response
}

async fn route(path: &str, query: &str, state: AdminState) -> Response {
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
        "/" | "/index.html" => Response::new("200 OK", HTML, CONSOLE_HTML),
        "/console.css" => Response::new("200 OK", CSS, CONSOLE_CSS),
        "/console.js" => Response::new("200 OK", JAVASCRIPT, CONSOLE_JS),
        "/v1/transactions" => transactions_view(state).await,
        "/v1/quorum" => quorum_view(state).await,
        "/v1/console" => json_response(&serde_json::json!({
            "actions_enabled": state.actions_enabled && !state.records_hidden,
            "records_shown": !state.records_hidden,
        })),
        "/v1/cluster" | "/v1/topics" | "/v1/groups" | "/v1/lag-history" => {
            json_view(View::Named(path.to_string()), state).await
        }
        _ => {
            if let Some(group) = group_history_path(path) {
                json_view(View::GroupHistory(group), state).await
            } else if let Some(request) = tail_request(path, query) {
                if state.records_hidden {
                    Response::new(
                        "403 Forbidden",
                        TEXT,
                        "records are not shown on the admin port while an authorizer is on\n",
                    )
                } else {
                    json_view(View::Tail(request), state).await
                }
            } else {
                not_found()
            }
        }
    }
}

fn not_found() -> Response {
    Response::new("404 Not Found", TEXT, "not found\n")
}

enum View {
    Named(String),
    GroupHistory(String),
    Tail(TailRequest),
}

/// `/v1/topics/<topic>/partitions/<n>/records?offset=O&limit=N` (both optional).
fn tail_request(path: &str, query: &str) -> Option<TailRequest> {
    let rest = path.strip_prefix("/v1/topics/")?.strip_suffix("/records")?;
    let (topic, partition) = rest.split_once("/partitions/")?;
    let mut request = TailRequest {
        topic: percent_decode(topic).filter(|t| !t.is_empty())?,
        partition: partition.parse().ok()?,
        offset: None,
        limit: 20,
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("offset", v)) => request.offset = Some(v.parse().ok()?),
            Some(("limit", v)) => request.limit = v.parse().ok()?,
            _ => {}
        }
    }
    Some(request)
}

/// The group named by `/v1/groups/<group>/lag-history`, percent-decoded (a group id
/// may hold any character).
fn group_history_path(path: &str) -> Option<String> {
    let encoded = path
        .strip_prefix("/v1/groups/")?
        .strip_suffix("/lag-history")?;
    percent_decode(encoded).filter(|g| !g.is_empty())
}

/// `%XX` escapes to bytes; None when an escape is malformed or the bytes are not UTF-8.
pub(crate) fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn json_response(value: &serde_json::Value) -> Response {
    let mut body = serde_json::to_string_pretty(value).unwrap_or_default();
    body.push('\n');
    Response::new("200 OK", JSON, body)
}

/// The transaction coordinators answer from their own tasks, without blocking.
async fn transactions_view(state: AdminState) -> Response {
    match state.node() {
        Some(node) if state.ready.load(Ordering::Acquire) => {
            let listed = node.txns.list().await;
            json_response(&views::transactions(listed, crate::context::now_ms()))
        }
        _ => Response::new("503 Service Unavailable", TEXT, "not ready\n"),
    }
}

/// How long `/v1/quorum` waits for the quorum leader's status.
const QUORUM_TIMEOUT: Duration = Duration::from_secs(2);

/// The controller quorum as its leader reports it (asked through this node's link).
async fn quorum_view(state: AdminState) -> Response {
    let Some(node) = state.node().filter(|_| state.ready.load(Ordering::Acquire)) else {
        return Response::new("503 Service Unavailable", TEXT, "not ready\n");
    };
    let asked = node.metadata.controller().describe_quorum();
    match tokio::time::timeout(QUORUM_TIMEOUT, asked).await {
        Ok(Ok(status)) => json_response(&views::to_json(&status)),
        Ok(Err(e)) => Response::new("503 Service Unavailable", TEXT, format!("{e}\n")),
        Err(_) => Response::new(
            "503 Service Unavailable",
            TEXT,
            "the controller quorum did not answer within 2 s\n",
        ),
    }
}

async fn json_view(view: View, state: AdminState) -> Response {
    // What /readyz says, these say too: a node that is not ready (starting, or cut off
    // from the controller quorum) has no trustworthy view of the cluster.
    let node = match state.node() {
        Some(node) if state.ready.load(Ordering::Acquire) => node,
        _ => return Response::new("503 Service Unavailable", TEXT, "not ready\n"),
    };
    let metrics = state.metrics;
    let value = tokio::task::spawn_blocking(move || match view {
        View::Named(path) => Some(match path.as_str() {
            "/v1/cluster" => views::cluster(&node, metrics.topics.node_totals()),
            "/v1/topics" => views::topics(&node),
            "/v1/lag-history" => views::to_json(&metrics.lag_history.summary()),
            _ => views::groups(&node, &metrics.groups),
        }),
        View::Tail(request) => tail::tail(&node, &request).map(|t| views::to_json(&t)),
        View::GroupHistory(group) => metrics
            .lag_history
            .group(&group)
            .map(|history| views::to_json(&history)),
    })
    .await;
    match value {
        Ok(Some(value)) => json_response(&value),
        Ok(None) => not_found(),
        Err(_) => Response::new("500 Internal Server Error", TEXT, "view failed\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_history_paths_name_their_group_percent_decoded() {
        assert_eq!(
            group_history_path("/v1/groups/billing/lag-history").as_deref(),
            Some("billing")
        );
        assert_eq!(
            group_history_path("/v1/groups/a%2Fb%20c/lag-history").as_deref(),
            Some("a/b c")
        );
        assert_eq!(group_history_path("/v1/groups//lag-history"), None);
        assert_eq!(group_history_path("/v1/groups/x%2/lag-history"), None);
        assert_eq!(group_history_path("/v1/groups/%ff/lag-history"), None);
        assert_eq!(group_history_path("/v1/groups/billing"), None);
    }

    #[test]
    fn the_console_is_small_and_loads_nothing_from_elsewhere() {
        let total = CONSOLE_HTML.len() + CONSOLE_CSS.len() + CONSOLE_JS.len();
        // docs/operations.md states the size; keep it honest when the console grows.
        assert!(total < 40 * 1024, "the console is {total} bytes");
        for asset in [CONSOLE_HTML, CONSOLE_CSS, CONSOLE_JS] {
            // The SVG namespace is a name, not a place the page loads from.
            let rest = asset.replace("http://www.w3.org/2000/svg", "");
            assert!(
                !rest.contains("http://") && !rest.contains("https://"),
                "an asset names another host"
            );
        }
        assert!(CONSOLE_HTML.contains(r#"<script src="/console.js" defer>"#));
    }

    #[test]
    fn tail_paths_name_a_partition_and_an_optional_offset_and_limit() {
        let tail = |path, query| tail_request(path, query);
        assert_eq!(
            tail(
                "/v1/topics/or%2Eders/partitions/3/records",
                "offset=10&limit=5"
            ),
            Some(TailRequest {
                topic: "or.ders".into(),
                partition: 3,
                offset: Some(10),
                limit: 5,
            })
        );
        let latest = tail("/v1/topics/t/partitions/0/records", "").unwrap();
        assert_eq!((latest.offset, latest.limit), (None, 20));
        assert_eq!(tail("/v1/topics/t/partitions/x/records", ""), None);
        assert_eq!(
            tail("/v1/topics/t/partitions/0/records", "offset=abc"),
            None
        );
        assert_eq!(tail("/v1/topics//partitions/0/records", ""), None);
    }
}
