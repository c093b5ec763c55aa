//! The console's one action so far, on the admin port: `POST /v1/topics` creates a topic
//! as CreateTopics does (the controller validates the name, counts and configs and
//! places the replicas), or with `"validate_only": true` says what it would create, which
//! the console shows before asking for the confirmation.
//!
//! Off unless `admin.console.actions.enabled=true`, and refused while an authorizer is
//! configured: the admin port authenticates nobody, so it cannot check an ACL. A request
//! must carry the `X-Tidelog-Console` header and a JSON body: a page of another site can
//! send neither without a CORS preflight, which this port does not answer, so it cannot
//! make a visitor's browser act here.

use std::collections::BTreeMap;

use serde::Deserialize;
use tidelog_controller::CreateTopic;

use crate::metrics::NodeView;

/// Bytes a request body may have.
pub(crate) const MAX_BODY: usize = 16 * 1024;
/// The header a console request carries (lower case, as headers are compared).
pub(crate) const CONSOLE_HEADER: &str = "x-tidelog-console";

/// What the console asks for.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateTopicAction {
    name: String,
    /// -1: the broker's `num.partitions`.
    #[serde(default = "broker_default")]
    partitions: i32,
    /// -1: the broker's `default.replication.factor`.
    #[serde(default = "broker_default_i16")]
    replication_factor: i16,
    #[serde(default)]
    configs: BTreeMap<String, String>,
    #[serde(default)]
    validate_only: bool,
}

fn broker_default() -> i32 {
    -1
}

fn broker_default_i16() -> i16 {
    -1
}

/// The answer: an HTTP status and a JSON body.
pub(crate) struct ActionAnswer {
    pub(crate) status: &'static str,
    pub(crate) body: serde_json::Value,
}

fn refused(status: &'static str, message: impl Into<String>) -> ActionAnswer {
    ActionAnswer {
        status,
        body: serde_json::json!({ "error": message.into() }),
    }
}

pub(crate) fn parse_create_topic(body: &[u8]) -> Result<CreateTopicAction, String> {
    serde_json::from_slice(body).map_err(|e| format!("not a create-topic request: {e}"))
}

/// Creates (or checks) the topic through the controller.
pub(crate) async fn create_topic(node: &NodeView, body: &[u8]) -> ActionAnswer {
    let action = match parse_create_topic(body) {
        Ok(action) => action,
        Err(message) => return refused("400 Bad Request", message),
    };
    let request = CreateTopic {
        name: action.name.clone(),
        num_partitions: action.partitions,
        replication_factor: action.replication_factor,
        assignments: Vec::new(),
        configs: action
            .configs
            .into_iter()
            .map(|(name, value)| (name, Some(value)))
            .collect(),
    };
    match node
        .metadata
        .create_topic(request, action.validate_only)
        .await
    {
        Ok(topic) => ActionAnswer {
            status: if action.validate_only {
                "200 OK"
            } else {
                "201 Created"
            },
            body: serde_json::json!({
                "name": topic.name,
                "validate_only": action.validate_only,
                "partitions": topic.partition_count(),
                "replication_factor": topic.partitions.values().next().map_or(0, |p| p.replicas.len()),
                "configs": topic.configs,
            }),
        },
        Err(e) => ActionAnswer {
            status: "400 Bad Request",
            body: serde_json::json!({ "error": e.to_string(), "error_code": e.error_code() }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_topic_request_takes_broker_defaults_and_refuses_unknown_fields() {
        let action = parse_create_topic(br#"{"name": "orders"}"#).unwrap();
        assert_eq!(
            (
                action.partitions,
                action.replication_factor,
                action.validate_only
            ),
            (-1, -1, false)
        );
        let full = parse_create_topic(
            br#"{"name": "o", "partitions": 3, "replication_factor": 2,
                 "configs": {"retention.ms": "1000"}, "validate_only": true}"#,
        )
        .unwrap();
        assert_eq!(full.configs["retention.ms"], "1000");
        assert!(parse_create_topic(br#"{"name": "o", "partitons": 3}"#).is_err());
        assert!(parse_create_topic(b"name=o").is_err());
    }
}
