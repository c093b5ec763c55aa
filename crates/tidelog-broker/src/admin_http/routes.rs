//! What a GET on the admin port answers: the probes, the metrics, the console's assets
//! and the JSON views. Each view shows what the asking principal may see through the
//! Kafka API that shows the same (docs/security.md has the table): topics it may
//! DESCRIBE (Metadata), groups it may DESCRIBE (ListGroups, DescribeGroups),
//! transactional ids it may DESCRIBE (ListTransactions), the quorum with DESCRIBE on
//! the cluster (DescribeQuorum), records of topics it may READ (Fetch). Without an
//! authorizer every check passes.

use std::sync::Arc;
use std::time::Duration;

use tidelog_controller::acl::AclOperation;

use super::{json_response, percent_decode, AdminState, Response, TEXT};
use crate::auth::Access;
use crate::metrics::tail::{self, TailRequest};
use crate::metrics::views;

/// What `prometheus_client` writes: OpenMetrics text (counter families named without
/// `_total`, a final `# EOF`), which Prometheus parses by this content type.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JAVASCRIPT: &str = "text/javascript; charset=utf-8";

/// The console's assets: plain HTML, CSS and script, no build step, nothing fetched
/// from elsewhere (docs/operations.md states their size).
const CONSOLE_HTML: &str = include_str!("console/index.html");
const CONSOLE_CSS: &str = include_str!("console/console.css");
const CONSOLE_JS: &str = include_str!("console/console.js");

/// Paths answered without the node's view (and so before it has one).
pub(super) fn needs_no_node(path: &str) -> bool {
    matches!(
        path,
        "/healthz" | "/readyz" | "/metrics" | "/" | "/index.html" | "/console.css" | "/console.js"
    )
}

/// Answers a GET (or HEAD) of `path`. `access` is what the principal may see; `None`
/// only for the paths that need no node (and for the views while there is none).
pub(super) async fn route(
    path: &str,
    query: &str,
    state: &AdminState,
    access: Option<Arc<Access>>,
) -> Response {
    match path {
        "/healthz" => Response::new("200 OK", TEXT, "ok\n"),
        "/readyz" if state.ready.is_ready() => Response::new("200 OK", TEXT, "ready\n"),
        "/readyz" => Response::not_ready(),
        // Not public (admin.public.paths): every topic and group is named in it, so
        // it takes DESCRIBE on the cluster, as listing all of them would.
        "/metrics"
            if access
                .as_ref()
                .is_some_and(|a| !a.cluster(AclOperation::Describe)) =>
        {
            refused("/metrics needs DESCRIBE on the cluster when it is not public".into())
        }
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
        _ => match access {
            Some(access) => view(path, query, state, access).await,
            None => Response::not_ready(),
        },
    }
}

async fn view(path: &str, query: &str, state: &AdminState, access: Arc<Access>) -> Response {
    match path {
        "/v1/transactions" => transactions_view(state, &access).await,
        "/v1/quorum" => quorum_view(state, &access).await,
        "/v1/console" => json_response(&serde_json::json!({
            "actions_enabled": state.actions_enabled,
            "records_shown": true,
            "authenticated": state.security.is_some(),
            "principal": state.security.as_ref().map(|_| access.principal()),
        })),
        "/v1/cluster" | "/v1/topics" | "/v1/groups" | "/v1/lag-history" => {
            json_view(View::Named(path.to_string()), state, access).await
        }
        _ => {
            if let Some(group) = group_history_path(path) {
                if !access.group(AclOperation::Describe, &group) {
                    return refused(format!(
                        "group {group}: its lag history needs DESCRIBE on the group (as DescribeGroups)"
                    ));
                }
                json_view(View::GroupHistory(group), state, access).await
            } else if let Some(request) = tail_request(path, query) {
                if !access.topic(AclOperation::Read, &request.topic) {
                    return refused(format!(
                        "the records of {} need READ on the topic (as Fetch)",
                        request.topic
                    ));
                }
                json_view(View::Tail(request), state, access).await
            } else {
                not_found()
            }
        }
    }
}

/// 403, with the reason the console shows.
fn refused(message: String) -> Response {
    Response::error("403 Forbidden", message)
}

fn not_found() -> Response {
    Response::new("404 Not Found", TEXT, "not found\n")
}

enum View {
    Named(String),
    GroupHistory(String),
    Tail(TailRequest),
}

/// `/v1/topics/<topic>/partitions/<n>/records?offset=O&before=B&limit=N` (all
/// optional; see [`TailRequest`]).
fn tail_request(path: &str, query: &str) -> Option<TailRequest> {
    let rest = path.strip_prefix("/v1/topics/")?.strip_suffix("/records")?;
    let (topic, partition) = rest.split_once("/partitions/")?;
    let mut request = TailRequest {
        topic: percent_decode(topic).filter(|t| !t.is_empty())?,
        partition: partition.parse().ok()?,
        offset: None,
        before: None,
        limit: 20,
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("offset", v)) => request.offset = Some(v.parse().ok()?),
            Some(("before", v)) => request.before = Some(v.parse().ok()?),
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

/// The transaction coordinators answer from their own tasks, without blocking.
async fn transactions_view(state: &AdminState, access: &Access) -> Response {
    let Some(node) = state.ready_node() else {
        return Response::not_ready();
    };
    let listed = node.txns.list().await;
    json_response(&views::transactions(
        listed,
        crate::context::now_ms(),
        access,
    ))
}

/// How long `/v1/quorum` waits for the quorum leader's status.
const QUORUM_TIMEOUT: Duration = Duration::from_secs(2);

/// The controller quorum as its leader reports it (asked through this node's link).
async fn quorum_view(state: &AdminState, access: &Access) -> Response {
    let Some(node) = state.ready_node() else {
        return Response::not_ready();
    };
    if !access.cluster(AclOperation::Describe) {
        return refused(
            "the controller quorum needs DESCRIBE on the cluster (as DescribeQuorum)".into(),
        );
    }
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

async fn json_view(view: View, state: &AdminState, access: Arc<Access>) -> Response {
    // What /readyz says, these say too: a node that is not ready (starting, or cut off
    // from the controller quorum) has no trustworthy view of the cluster.
    let Some(node) = state.ready_node() else {
        return Response::not_ready();
    };
    let metrics = Arc::clone(&state.metrics);
    let value = tokio::task::spawn_blocking(move || match view {
        View::Named(path) => Some(match path.as_str() {
            "/v1/cluster" => views::cluster(&node, &metrics, &access),
            "/v1/topics" => views::topics(&node, &access),
            "/v1/lag-history" => views::to_json(
                &metrics
                    .lag_history
                    .summary(|group| access.group(AclOperation::Describe, group)),
            ),
            _ => views::groups(&node, &metrics.groups, &access),
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
        assert!(total < 48 * 1024, "the console is {total} bytes");
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
                before: None,
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
        let older = tail("/v1/topics/t/partitions/0/records", "before=40&limit=10").unwrap();
        assert_eq!(
            (older.offset, older.before, older.limit),
            (None, Some(40), 10)
        );
    }
}
