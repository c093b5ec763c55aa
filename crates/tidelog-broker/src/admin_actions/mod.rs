//! The console's actions on the admin port, each a POST with a JSON body that can first
//! be sent as a check (`validate_only` / `dry_run`: what would change, changing nothing),
//! which the console shows before it asks for the confirmation:
//!
//! - `POST /v1/topics`: create a topic (CreateTopics);
//! - `POST /v1/topics/<t>/partitions`: add partitions (CreatePartitions);
//! - `POST /v1/topics/<t>/configs`: set and delete topic config overrides
//!   (IncrementalAlterConfigs);
//! - `POST /v1/topics/<t>/delete-records`: move partitions' log start (DeleteRecords);
//! - `POST /v1/groups/<g>/reset-offsets`: rewrite an inactive group's committed offsets,
//!   as `kafka-consumer-groups --reset-offsets` does.
//!
//! Topic changes go through the controller from any node. Records and offsets are the
//! business of a partition's leader and a group's coordinator, wherever they are: those
//! actions send Kafka requests to them over the inter-broker listener (`calls`), so the
//! same handlers, checks and replication apply as to a client's request.
//!
//! Off unless `admin.console.actions.enabled=true`. With an authorizer on, the admin
//! port knows who asks (`admin_auth`) and each action, its check included, is
//! authorized as its Kafka API authorizes it, before anything is asked of another node
//! (which the node asks as itself): CreateTopics, CREATE on the cluster or the topic;
//! CreatePartitions, ALTER on the topic; IncrementalAlterConfigs, ALTER_CONFIGS on the
//! topic; DeleteRecords, DELETE on the topic; a reset of offsets (OffsetCommit), READ
//! on the group and the topic. A refusal is 403 with Kafka's error code. A request
//! must carry the `X-Tidelog-Console` header and a JSON body: a page of another site can
//! send neither without a CORS preflight, which this port does not answer, so it cannot
//! make a visitor's browser act here (nor use credentials the browser keeps for it).

mod calls;
mod offsets;
mod records;
mod topics;

use serde::de::DeserializeOwned;
use tidelog_controller::acl::{AclOperation, ResourceType};

use crate::auth::Access;
use crate::metrics::NodeView;

/// Bytes a request body may have.
pub(crate) const MAX_BODY: usize = 16 * 1024;
/// The header a console request carries (lower case, as headers are compared).
pub(crate) const CONSOLE_HEADER: &str = "x-tidelog-console";

/// The answer: an HTTP status and a JSON body.
pub(crate) struct ActionAnswer {
    pub(crate) status: &'static str,
    pub(crate) body: serde_json::Value,
}

impl ActionAnswer {
    fn ok(body: serde_json::Value) -> Self {
        ActionAnswer {
            status: "200 OK",
            body,
        }
    }
}

/// Why an action was not carried out: an HTTP status, the message, and the Kafka error
/// code when a Kafka answer said no.
#[derive(Debug)]
pub(crate) struct Refusal {
    status: &'static str,
    message: String,
    error_code: Option<i16>,
}

impl Refusal {
    fn new(status: &'static str, message: impl Into<String>) -> Self {
        Refusal {
            status,
            message: message.into(),
            error_code: None,
        }
    }

    fn bad_request(message: impl Into<String>) -> Self {
        Refusal::new("400 Bad Request", message)
    }

    /// 403 with Kafka's authorization error for a resource of this type.
    fn forbidden(resource: ResourceType, message: impl Into<String>) -> Self {
        Refusal {
            status: "403 Forbidden",
            message: message.into(),
            error_code: Some(crate::auth::denied_code(resource)),
        }
    }

    /// A Kafka error code from the node that acted (or would have).
    fn kafka(code: i16, message: impl Into<String>) -> Self {
        let status = match kafka_protocol::error::ResponseError::try_from_code(code) {
            Some(e) if e.is_retriable() => "503 Service Unavailable",
            _ => "409 Conflict",
        };
        Refusal {
            status,
            message: message.into(),
            error_code: Some(code),
        }
    }
}

impl From<Refusal> for ActionAnswer {
    fn from(r: Refusal) -> Self {
        let mut body = serde_json::json!({ "error": r.message });
        if let Some(code) = r.error_code {
            body["error_code"] = code.into();
        }
        ActionAnswer {
            status: r.status,
            body,
        }
    }
}

/// What a POST path asks for; names percent-decoded.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Action {
    CreateTopic,
    AddPartitions(String),
    AlterTopicConfigs(String),
    DeleteRecords(String),
    ResetOffsets(String),
}

impl Action {
    pub(crate) fn for_path(path: &str) -> Option<Action> {
        if path == "/v1/topics" {
            return Some(Action::CreateTopic);
        }
        let named = |prefix: &str, suffix: &str| {
            let name = path.strip_prefix(prefix)?.strip_suffix(suffix)?;
            crate::admin_http::percent_decode(name).filter(|n| !n.is_empty() && !n.contains('/'))
        };
        if let Some(topic) = named("/v1/topics/", "/partitions") {
            return Some(Action::AddPartitions(topic));
        }
        if let Some(topic) = named("/v1/topics/", "/configs") {
            return Some(Action::AlterTopicConfigs(topic));
        }
        if let Some(topic) = named("/v1/topics/", "/delete-records") {
            return Some(Action::DeleteRecords(topic));
        }
        named("/v1/groups/", "/reset-offsets").map(Action::ResetOffsets)
    }
}

/// Carries out (or checks) `action` with the request `body`, if `access` allows it.
pub(crate) async fn run(
    node: &NodeView,
    access: &Access,
    action: Action,
    body: &[u8],
) -> ActionAnswer {
    let outcome = match action {
        Action::CreateTopic => topics::create(node, access, body).await,
        Action::AddPartitions(topic) => match allowed(access, &TopicOp::AddPartitions, &topic) {
            Ok(()) => topics::add_partitions(node, &topic, body).await,
            Err(refused) => Err(refused),
        },
        Action::AlterTopicConfigs(topic) => match allowed(access, &TopicOp::AlterConfigs, &topic) {
            Ok(()) => topics::alter_configs(node, &topic, body).await,
            Err(refused) => Err(refused),
        },
        Action::DeleteRecords(topic) => match allowed(access, &TopicOp::DeleteRecords, &topic) {
            Ok(()) => records::delete(node, &topic, body).await,
            Err(refused) => Err(refused),
        },
        Action::ResetOffsets(group) => offsets::reset(node, access, &group, body).await,
    };
    outcome.unwrap_or_else(ActionAnswer::from)
}

/// A topic action and the Kafka API whose ACL check it makes.
enum TopicOp {
    AddPartitions,
    AlterConfigs,
    DeleteRecords,
    ResetOffsets,
}

impl TopicOp {
    fn operation(&self) -> AclOperation {
        match self {
            TopicOp::AddPartitions => AclOperation::Alter,
            TopicOp::AlterConfigs => AclOperation::AlterConfigs,
            TopicOp::DeleteRecords => AclOperation::Delete,
            TopicOp::ResetOffsets => AclOperation::Read,
        }
    }

    fn api(&self) -> &'static str {
        match self {
            TopicOp::AddPartitions => "CreatePartitions",
            TopicOp::AlterConfigs => "IncrementalAlterConfigs",
            TopicOp::DeleteRecords => "DeleteRecords",
            TopicOp::ResetOffsets => "OffsetCommit",
        }
    }
}

/// TOPIC_AUTHORIZATION_FAILED unless `access` may do `op` on `topic`, checked before
/// the topic is looked up (as Kafka does, so a refusal tells nothing of what exists).
fn allowed(access: &Access, op: &TopicOp, topic: &str) -> Result<(), Refusal> {
    if access.topic(op.operation(), topic) {
        return Ok(());
    }
    Err(Refusal::forbidden(
        ResourceType::Topic,
        format!(
            "{} may not {} topic {topic} (as {} needs)",
            access.principal(),
            op.operation().name(),
            op.api()
        ),
    ))
}

fn parse<T: DeserializeOwned>(body: &[u8], what: &str) -> Result<T, Refusal> {
    serde_json::from_slice(body)
        .map_err(|e| Refusal::bad_request(format!("not a {what} request: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn post_paths_name_their_action_and_its_percent_decoded_subject() {
        assert_eq!(Action::for_path("/v1/topics"), Some(Action::CreateTopic));
        assert_eq!(
            Action::for_path("/v1/topics/or%2Eders/partitions"),
            Some(Action::AddPartitions("or.ders".into()))
        );
        assert_eq!(
            Action::for_path("/v1/topics/t/configs"),
            Some(Action::AlterTopicConfigs("t".into()))
        );
        assert_eq!(
            Action::for_path("/v1/topics/t/delete-records"),
            Some(Action::DeleteRecords("t".into()))
        );
        assert_eq!(
            Action::for_path("/v1/groups/a%20b/reset-offsets"),
            Some(Action::ResetOffsets("a b".into()))
        );
        for nothing in [
            "/v1/topics/",
            "/v1/topics//partitions",
            "/v1/topics/a/b/partitions",
            "/v1/topics/%zz/configs",
            "/v1/groups/g",
            "/v1/cluster",
        ] {
            assert_eq!(Action::for_path(nothing), None, "{nothing}");
        }
    }
}
