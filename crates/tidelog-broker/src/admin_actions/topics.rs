//! Topic actions, through the controller from any node: create a topic, add partitions,
//! set and delete config overrides. Each can be sent with `"validate_only": true` first;
//! the controller then checks everything and changes nothing.

use std::collections::BTreeMap;

use serde::Deserialize;
use tidelog_controller::CreateTopic;

use tidelog_controller::acl::{AclOperation, ResourceType};

use super::calls::unknown_topic;
use super::{parse, ActionAnswer, Refusal};
use crate::auth::Access;
use crate::metrics::NodeView;

/// What the console asks for.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateTopicAction {
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

/// A controller's refusal, with its Kafka error code.
fn controller_refused(e: &tidelog_controller::quorum::RequestError) -> Refusal {
    Refusal {
        status: "400 Bad Request",
        message: e.to_string(),
        error_code: Some(e.error_code()),
    }
}

/// Creates (or checks) the topic, if `access` may: CREATE on the cluster or on the
/// topic, as CreateTopics checks.
pub(super) async fn create(
    node: &NodeView,
    access: &Access,
    body: &[u8],
) -> Result<ActionAnswer, Refusal> {
    let action: CreateTopicAction = parse(body, "create-topic")?;
    if !access.cluster(AclOperation::Create) && !access.topic(AclOperation::Create, &action.name) {
        return Err(Refusal::forbidden(
            ResourceType::Topic,
            format!(
                "{} may not CREATE topic {} (as CreateTopics needs, on the cluster or the topic)",
                access.principal(),
                action.name
            ),
        ));
    }
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
    let topic = node
        .metadata
        .create_topic(request, action.validate_only)
        .await
        .map_err(|e| controller_refused(&e))?;
    Ok(ActionAnswer {
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
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AddPartitions {
    /// The new total, as CreatePartitions takes it.
    count: i32,
    #[serde(default)]
    validate_only: bool,
}

/// Raises the topic's partition count to `count` (or checks it could be).
pub(super) async fn add_partitions(
    node: &NodeView,
    topic: &str,
    body: &[u8],
) -> Result<ActionAnswer, Refusal> {
    let action: AddPartitions = parse(body, "add-partitions")?;
    let before = current_partitions(node, topic)?;
    node.metadata
        .create_partitions(topic, action.count, action.validate_only)
        .await
        .map_err(|e| controller_refused(&e))?;
    Ok(ActionAnswer::ok(serde_json::json!({
        "topic": topic,
        "validate_only": action.validate_only,
        "partitions_before": before,
        "partitions": action.count,
    })))
}

fn current_partitions(node: &NodeView, topic: &str) -> Result<i32, Refusal> {
    node.metadata
        .image()
        .topic(topic)
        .map(|t| t.partition_count())
        .ok_or_else(|| unknown_topic(topic))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AlterConfigs {
    /// Overrides to set.
    #[serde(default)]
    set: BTreeMap<String, String>,
    /// Overrides to remove (back to the broker's value).
    #[serde(default)]
    delete: Vec<String>,
    #[serde(default)]
    validate_only: bool,
}

/// Sets and deletes overrides of the topic, all or none (or checks they could be).
pub(super) async fn alter_configs(
    node: &NodeView,
    topic: &str,
    body: &[u8],
) -> Result<ActionAnswer, Refusal> {
    let action: AlterConfigs = parse(body, "alter-configs")?;
    if action.set.is_empty() && action.delete.is_empty() {
        return Err(Refusal::bad_request("nothing to set or delete"));
    }
    if let Some(both) = action.delete.iter().find(|k| action.set.contains_key(*k)) {
        return Err(Refusal::bad_request(format!(
            "{both} is both set and deleted"
        )));
    }
    current_partitions(node, topic)?;
    let before = node.metadata.image().topic_configs(topic);
    let changes: Vec<(String, Option<String>)> = action
        .set
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .chain(action.delete.iter().map(|k| (k.clone(), None)))
        .collect();
    node.metadata
        .alter_topic_configs(topic, changes, action.validate_only)
        .await
        .map_err(|e| controller_refused(&e))?;
    let mut after = before.clone();
    for (k, v) in &action.set {
        after.insert(k.clone(), v.clone());
    }
    for k in &action.delete {
        after.remove(k);
    }
    Ok(ActionAnswer::ok(serde_json::json!({
        "topic": topic,
        "validate_only": action.validate_only,
        "configs_before": before,
        "configs": after,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_topic_request_takes_broker_defaults_and_refuses_unknown_fields() {
        let action: CreateTopicAction = parse(br#"{"name": "orders"}"#, "t").unwrap();
        assert_eq!(
            (
                action.partitions,
                action.replication_factor,
                action.validate_only
            ),
            (-1, -1, false)
        );
        let full: CreateTopicAction = parse(
            br#"{"name": "o", "partitions": 3, "replication_factor": 2,
                 "configs": {"retention.ms": "1000"}, "validate_only": true}"#,
            "t",
        )
        .unwrap();
        assert_eq!(full.configs["retention.ms"], "1000");
        assert!(parse::<CreateTopicAction>(br#"{"name": "o", "partitons": 3}"#, "t").is_err());
        assert!(parse::<CreateTopicAction>(b"name=o", "t").is_err());
    }

    #[test]
    fn config_changes_and_partition_counts_refuse_unknown_fields() {
        let alter: AlterConfigs = parse(
            br#"{"set": {"retention.ms": "1"}, "delete": ["cleanup.policy"]}"#,
            "t",
        )
        .unwrap();
        assert_eq!(
            (alter.set.len(), alter.delete.len(), alter.validate_only),
            (1, 1, false)
        );
        assert!(parse::<AlterConfigs>(br#"{"sets": {}}"#, "t").is_err());
        assert!(
            parse::<AddPartitions>(br#"{"count": 4, "validate_only": true}"#, "t")
                .unwrap()
                .validate_only
        );
        assert!(parse::<AddPartitions>(br#"{}"#, "t").is_err());
    }
}
