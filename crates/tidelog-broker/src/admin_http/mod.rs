//! The HTTP admin port: `/healthz` (the process is up), `/readyz` (metadata loaded,
//! logs recovered, Kafka listener accepting), `/metrics` (OpenMetrics text, which
//! Prometheus scrapes), the JSON views under `/v1/` (`routes`), the console's actions
//! (POST, `admin_actions`) and at `/` the console: one page whose HTML, CSS and script
//! are compiled into the binary (`console/`), drawn from those views. A deliberately
//! tiny HTTP/1.1 responder: GET, HEAD and POST, one request per connection, bounded
//! request size and time; HTTPS with `admin.listener.security.protocol=SSL`.
//!
//! With an authorizer on, who asks is checked first (`admin_auth`) and what they see
//! and do is what the ACLs allow them through Kafka's APIs.

mod routes;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tidelog_env::net::BoxConnection;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::admin_actions;
use crate::admin_auth::{self, AdminProtocol, AdminSecurity, BasicCredentials, Unauthenticated};
use crate::auth::{Access, Authorizer};
use crate::config::BrokerConfig;
use crate::metrics::{Metrics, NodeView};
use crate::readiness::Readiness;
use crate::settings;
use crate::tls::{ListenerSsl, ServerTls, TlsError};

const MAX_REQUEST_HEAD: usize = 8 * 1024;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Scrapes answered at once; more wait for a turn, so a scrape storm cannot pile up
/// blocking work (each one locks every partition briefly).
const MAX_CONCURRENT_ANSWERS: usize = 8;

const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";

/// The page loads only its own assets and talks only to this port.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'";

/// What the admin port answers from. The port opens before the node's logs are
/// recovered (so `/healthz` answers during a long recovery); `node` carries the node's
/// view once the server has built it.
#[derive(Clone)]
pub(crate) struct AdminState {
    pub(crate) ready: Readiness,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) node: watch::Receiver<Option<Arc<NodeView>>>,
    /// `admin.console.actions.enabled`: the console may act.
    pub(crate) actions_enabled: bool,
    /// With an authorizer: how who asks is checked. `None`: nobody is.
    security: Option<Arc<AdminSecurity>>,
    /// With `admin.listener.security.protocol=SSL`: the port's TLS server.
    tls: Option<Arc<ServerTls>>,
}

impl AdminState {
    /// The admin port's state from `config`; reads the TLS files (on a blocking thread)
    /// when the port is HTTPS.
    pub(crate) async fn new(
        config: &BrokerConfig,
        ready: Readiness,
        metrics: Arc<Metrics>,
        node: watch::Receiver<Option<Arc<NodeView>>>,
        authorizer: Option<Arc<Authorizer>>,
    ) -> Result<AdminState, TlsError> {
        let protocol =
            AdminProtocol::parse(&config.get(settings::ADMIN_LISTENER_SECURITY_PROTOCOL))
                .unwrap_or(AdminProtocol::Plaintext);
        let tls = match protocol {
            AdminProtocol::Plaintext => None,
            AdminProtocol::Ssl => {
                let config = config.clone();
                let loaded = tokio::task::spawn_blocking(move || {
                    ListenerSsl::new(&config, admin_auth::LISTENER).server_tls()
                })
                .await
                .map_err(|e| TlsError::Invalid {
                    listener: admin_auth::LISTENER.to_string(),
                    setting: settings::ADMIN_LISTENER_SECURITY_PROTOCOL.name.to_string(),
                    reason: format!("loading the TLS files panicked: {e}"),
                })??;
                Some(Arc::new(loaded))
            }
        };
        let security = AdminSecurity::from_config(config, authorizer).map(Arc::new);
        if security.is_some() && tls.is_none() {
            tracing::warn!("the admin port is plain HTTP while an authorizer is on: HTTP Basic passwords cross the network in the clear (set admin.listener.security.protocol=SSL)");
        }
        Ok(AdminState {
            ready,
            metrics,
            node,
            actions_enabled: config.get(settings::ADMIN_CONSOLE_ACTIONS_ENABLED),
            security,
            tls,
        })
    }

    fn node(&self) -> Option<Arc<NodeView>> {
        self.node.borrow().clone()
    }

    /// The node's view once it is ready; views and actions answer 503 before.
    fn ready_node(&self) -> Option<Arc<NodeView>> {
        self.node().filter(|_| self.ready.is_ready())
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
                if let Ok((stream, peer)) = accepted {
                    let state = state.clone();
                    let permits = Arc::clone(&permits);
                    tokio::spawn(async move {
                        let Ok(_permit) = permits.acquire_owned().await else {
                            return;
                        };
                        connection(Box::new(stream), peer, state).await;
                    });
                }
            }
            _ = shutdown.changed() => break,
        }
    }
}

/// One connection: the TLS handshake on an HTTPS port (bounded by its own timeout),
/// then one request, answered within [`REQUEST_TIMEOUT`].
async fn connection(stream: BoxConnection, peer: SocketAddr, state: AdminState) {
    let (stream, tls_principal) = match &state.tls {
        Some(server) => {
            match crate::net::tls_handshake(server, stream, peer, admin_auth::LISTENER).await {
                Some(secured) => secured,
                None => return,
            }
        }
        None => (stream, "User:ANONYMOUS".to_string()),
    };
    let caller = Caller {
        peer: peer.ip(),
        tls_principal,
    };
    let _ = tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, caller, state)).await;
}

/// Who is on the other end, before any credentials are read.
struct Caller {
    peer: IpAddr,
    /// The client certificate's principal; `User:ANONYMOUS` without one.
    tls_principal: String,
}

struct Response {
    status: &'static str,
    content_type: &'static str,
    body: String,
    /// A 401 carries the Basic challenge, so a browser asks for credentials.
    challenge: bool,
}

impl Response {
    fn new(status: &'static str, content_type: &'static str, body: impl Into<String>) -> Self {
        Response {
            status,
            content_type,
            body: body.into(),
            challenge: false,
        }
    }

    /// A refusal as JSON (`{"error": ...}`), which the console shows as it is.
    fn error(status: &'static str, message: impl Into<String>) -> Self {
        let mut response = json_response(&serde_json::json!({ "error": message.into() }));
        response.status = status;
        response
    }

    fn not_ready() -> Self {
        Response::new("503 Service Unavailable", TEXT, "not ready\n")
    }
}

async fn answer(
    mut stream: BoxConnection,
    caller: Caller,
    state: AdminState,
) -> std::io::Result<()> {
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
    let headers = Headers::parse(&request_head);
    let response = match method {
        "GET" | "HEAD" | "POST" => match who_asks(path, &headers, caller, &state).await {
            Ok(Gate::Open) if method == "POST" => match state.node() {
                None => Response::not_ready(),
                Some(_) => Response::new("405 Method Not Allowed", TEXT, "GET only here\n"),
            },
            Ok(Gate::Open) => routes::route(path, query, &state, None).await,
            Ok(Gate::As(access)) if method == "POST" => {
                match read_body(&mut stream, &head[head_len..], headers.content_length).await? {
                    Some(body) => action(path, &headers, &body, &state, &access).await,
                    None => Response::new("413 Payload Too Large", TEXT, "body too large\n"),
                }
            }
            Ok(Gate::As(access)) => {
                routes::route(path, query, &state, Some(Arc::new(access))).await
            }
            Err(refused) => refused,
        },
        _ => Response::new("405 Method Not Allowed", TEXT, "GET, HEAD or POST only\n"),
    };
    let challenge = if response.challenge {
        format!("WWW-Authenticate: {}\r\n", admin_auth::CHALLENGE)
    } else {
        String::new()
    };
    let header = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n\
         X-Content-Type-Options: nosniff\r\nContent-Security-Policy: {}\r\n{challenge}Connection: close\r\n\r\n",
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

/// What a request may go on to.
enum Gate {
    /// A public path (`admin.public.paths`, or any path with security off that needs
    /// no principal): no one is asked who they are.
    Open,
    /// What the principal may see and do.
    As(Access),
}

/// Checks who asks, where security wants to know: a public path is open; any other
/// needs a principal (401 with the Basic challenge without one), and the node's
/// metadata (SCRAM credentials, ACLs) to check it against.
async fn who_asks(
    path: &str,
    headers: &Headers,
    caller: Caller,
    state: &AdminState,
) -> Result<Gate, Response> {
    let security = state.security.as_deref();
    let public = security.is_none_or(|s| s.is_public(path));
    if public && routes::needs_no_node(path) {
        return Ok(Gate::Open);
    }
    let Some(node) = state.node() else {
        return if public {
            Ok(Gate::Open)
        } else {
            Err(Response::not_ready())
        };
    };
    let basic = headers
        .authorization
        .as_deref()
        .and_then(BasicCredentials::parse);
    let image = node.metadata.image();
    match admin_auth::authenticate(
        security,
        image,
        basic,
        caller.tls_principal,
        caller.peer,
        &state.metrics,
    )
    .await
    {
        Ok(access) => Ok(Gate::As(access)),
        Err(why) => {
            let message = match why {
                Unauthenticated::NoCredentials => "authentication required: the user name and password of a SCRAM user, or a client certificate",
                Unauthenticated::WrongCredentials => "authentication failed: wrong user name or password",
            };
            let mut response = Response::error("401 Unauthorized", message);
            response.challenge = true;
            Err(response)
        }
    }
}

/// The request headers the port reads.
struct Headers {
    content_length: usize,
    content_type_json: bool,
    from_console: bool,
    /// The `Authorization` header's value (never logged).
    authorization: Option<String>,
}

impl Headers {
    fn parse(head: &str) -> Headers {
        let mut headers = Headers {
            content_length: 0,
            content_type_json: false,
            from_console: false,
            authorization: None,
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
                "authorization" => headers.authorization = Some(value.to_string()),
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
    stream: &mut BoxConnection,
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
async fn action(
    path: &str,
    headers: &Headers,
    body: &[u8],
    state: &AdminState,
    access: &Access,
) -> Response {
    let Some(action) = admin_actions::Action::for_path(path) else {
        return Response::new("405 Method Not Allowed", TEXT, "GET only here\n");
    };
    if !state.actions_enabled {
        return Response::error(
            "403 Forbidden",
            "console actions are off (admin.console.actions.enabled=false)",
        );
    }
    if !headers.from_console || !headers.content_type_json {
        return Response::error(
            "403 Forbidden",
            "an action needs the X-Tidelog-Console header and a JSON body",
        );
    }
    let Some(node) = state.ready_node() else {
        return Response::not_ready();
    };
    let answer = admin_actions::run(&node, access, action, body).await;
    let mut response = json_response(&answer.body);
    response.status = answer.status;
    response
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
