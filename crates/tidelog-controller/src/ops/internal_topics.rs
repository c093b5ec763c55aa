//! What no client may do to the internal topics, checked by the planners so every path
//! (a single node, a cluster, a request forwarded to the quorum leader) refuses alike.
//!
//! The coordinators keep their state in their topics: every group's committed offsets
//! in `__consumer_offsets`, every transaction in `__transaction_state`, share-group state
//! in `__share_group_state`; `__cluster_metadata` names the metadata log itself. So:
//! * none of them may be deleted (the state would be gone, for every group at once);
//! * none may be created through CreateTopics: the broker creates the coordinator topics
//!   itself on first use, with the partition count and settings the coordinator places
//!   keys by ([`plan_create_internal_topic`]); the metadata log is no topic at all;
//! * none may get partitions added: a key's partition is `hash(key) % partitions`, so a
//!   new count moves every group and transactional id to a partition without its state;
//! * their `cleanup.policy` stays what the coordinator needs (compaction for the offsets
//!   and transaction logs, which replay the newest record per key; `delete` for share
//!   state, as KIP-932 defines it), neither changed nor removed back to the default.
//!
//! Kafka 4's controller refuses only the creation of `__cluster_metadata`, with
//! INVALID_REQUEST and "Creation of internal topic __cluster_metadata is prohibited.";
//! tidelog extends that answer to the other refusals above (INVALID_REQUEST, or
//! INVALID_CONFIG for a setting), with a message saying why.

use super::Plan;
use super::{plan_new_topic, CreateTopic, TopicDefaults};
use crate::error::TopicError;
use crate::image::{MetadataImage, TopicImage, INTERNAL_TOPICS};

/// The name the metadata log goes by in Kafka (`Topic.CLUSTER_METADATA_TOPIC_NAME`).
pub const METADATA_TOPIC: &str = "__cluster_metadata";

/// Whether `name` is one of the topics this module protects.
pub fn is_protected(name: &str) -> bool {
    name == METADATA_TOPIC || INTERNAL_TOPICS.contains(&name)
}

/// The `cleanup.policy` the coordinator of an internal topic depends on.
fn required_cleanup_policy(name: &str) -> Option<&'static str> {
    match name {
        "__consumer_offsets" | "__transaction_state" => Some("compact"),
        "__share_group_state" => Some("delete"),
        _ => None,
    }
}

fn prohibited(what: &str, name: &str, why: &str) -> TopicError {
    TopicError::InvalidRequest(format!(
        "{what} of internal topic {name} is prohibited: {why}."
    ))
}

fn holds(name: &str) -> &'static str {
    match name {
        "__consumer_offsets" => "every consumer group's committed offsets",
        "__transaction_state" => "the state of every transaction",
        "__share_group_state" => "the state of every share group",
        _ => "the cluster's metadata",
    }
}

pub(super) fn check_delete(name: &str) -> Result<(), TopicError> {
    if is_protected(name) {
        return Err(prohibited(
            "Deletion",
            name,
            &format!("it holds {}", holds(name)),
        ));
    }
    Ok(())
}

/// A client's CreateTopics (or auto-creation by Metadata) of `name`.
pub(super) fn check_client_create(name: &str) -> Result<(), TopicError> {
    if name == METADATA_TOPIC {
        return Err(prohibited(
            "Creation",
            name,
            "it is the metadata log, not a topic",
        ));
    }
    if is_protected(name) {
        return Err(prohibited(
            "Creation",
            name,
            "the broker creates it on first use, with the settings its coordinator needs",
        ));
    }
    Ok(())
}

pub(super) fn check_create_partitions(name: &str) -> Result<(), TopicError> {
    if is_protected(name) {
        return Err(prohibited(
            "Adding partitions",
            name,
            "its keys are placed by hash modulo the partition count, so a new count would move them away from their state",
        ));
    }
    Ok(())
}

/// An incremental config change of topic `name`: `Some` sets, `None` removes.
pub(super) fn check_config_changes(
    name: &str,
    changes: &[(String, Option<String>)],
) -> Result<(), TopicError> {
    let Some(required) = required_cleanup_policy(name) else {
        return Ok(());
    };
    for (key, value) in changes {
        if key == "cleanup.policy" {
            check_cleanup_policy(name, required, value.as_deref())?;
        }
    }
    Ok(())
}

fn check_cleanup_policy(name: &str, required: &str, value: Option<&str>) -> Result<(), TopicError> {
    match value.map(str::trim) {
        Some(v) if v == required => Ok(()),
        Some(v) => Err(TopicError::InvalidConfig(format!(
            "Invalid value {v} for configuration cleanup.policy: internal topic {name} must stay {required}, which its coordinator depends on."
        ))),
        None => Err(TopicError::InvalidConfig(format!(
            "Configuration cleanup.policy of internal topic {name} cannot be removed: it must stay {required}, which its coordinator depends on."
        ))),
    }
}

/// The broker's own creation of a coordinator topic on first use (never a client's
/// request): only those topics, and only with the `cleanup.policy` they need.
pub fn plan_create_internal_topic(
    image: &MetadataImage,
    req: &CreateTopic,
    defaults: TopicDefaults,
    topic_id: uuid::Uuid,
    placement_start: usize,
) -> Result<Plan<TopicImage>, TopicError> {
    let Some(required) = required_cleanup_policy(&req.name) else {
        return Err(TopicError::InvalidRequest(format!(
            "{} is not an internal topic a coordinator creates.",
            req.name
        )));
    };
    let policy = req
        .configs
        .iter()
        .find(|(k, _)| k == "cleanup.policy")
        .map(|(_, v)| v.as_deref());
    check_cleanup_policy(&req.name, required, policy.flatten())?;
    plan_new_topic(image, req, defaults, topic_id, placement_start)
}
