//! Reset offsets: rewrites a group's committed offsets for one topic as
//! `kafka-consumer-groups --reset-offsets` does: only while the group is inactive (Empty,
//! or not there at all), to the earliest or latest offset, a given offset (kept within
//! the log), the first offset at a timestamp, or shifted from the committed one. The
//! group's coordinator is found and asked with Kafka's requests (FindCoordinator,
//! DescribeGroups / ConsumerGroupDescribe, OffsetFetch, OffsetCommit as an admin with
//! generation -1), the partitions' leaders with ListOffsets. A dry run stops before the
//! commit and answers the same plan.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_request::ConsumerGroupDescribeRequest;
use kafka_protocol::messages::consumer_group_describe_response::ConsumerGroupDescribeResponse;
use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::describe_groups_response::DescribeGroupsResponse;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::OffsetCommitResponse;
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
use kafka_protocol::messages::{ApiKey, GroupId};
use kafka_protocol::protocol::StrBytes;
use serde::Deserialize;

use super::calls::{call, known, leader_offsets, partitions_of, topic_name, LogBounds};
use super::{allowed, parse, ActionAnswer, Refusal, TopicOp};
use crate::auth::Access;
use crate::metrics::{error_name, NodeView};
use tidelog_controller::acl::{AclOperation, ResourceType};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResetOffsets {
    topic: String,
    /// None named: every partition of the topic.
    #[serde(default)]
    partitions: Vec<i32>,
    to: ResetTo,
    /// The offset (`offset`), epoch milliseconds (`timestamp`) or shift (`shift-by`).
    #[serde(default)]
    value: Option<i64>,
    #[serde(default)]
    dry_run: bool,
}

/// Kafka's `--to-earliest`, `--to-latest`, `--to-offset`, `--to-datetime` (as epoch
/// milliseconds) and `--shift-by`.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum ResetTo {
    Earliest,
    Latest,
    Offset,
    Timestamp,
    ShiftBy,
}

/// The states in which Kafka's tool lets a group's offsets be reset.
const INACTIVE: [&str; 2] = ["Empty", "Dead"];

/// Resets (or plans) the offsets, if `access` may commit them: READ on the group and
/// on the topic, as OffsetCommit checks (READ implies the DESCRIBE the lookups need).
pub(super) async fn reset(
    node: &NodeView,
    access: &Access,
    group: &str,
    body: &[u8],
) -> Result<ActionAnswer, Refusal> {
    if !access.group(AclOperation::Read, group) {
        return Err(Refusal::forbidden(
            ResourceType::Group,
            format!(
                "{} may not READ group {group} (as OffsetCommit needs)",
                access.principal()
            ),
        ));
    }
    let action: ResetOffsets = parse(body, "reset-offsets")?;
    allowed(access, &TopicOp::ResetOffsets, &action.topic)?;
    let value = match (action.to, action.value) {
        (ResetTo::Earliest | ResetTo::Latest, _) => 0,
        (_, Some(v)) => v,
        (to, None) => {
            return Err(Refusal::bad_request(format!(
                "resetting to {to:?} needs a value"
            )))
        }
    };
    let topic = action.topic.as_str();
    let partitions = partitions_of(node, topic, &action.partitions)?;
    let coordinator = coordinator_of(node, group).await?;
    let state = group_state(node, coordinator, group).await?;
    if !INACTIVE.contains(&state.as_str()) {
        return Err(Refusal::kafka(
            ResponseError::NonEmptyGroup.code(),
            format!("Assignments can only be reset if the group '{group}' is inactive, but the current state is {state}."),
        ));
    }
    let committed = committed_offsets(node, coordinator, group, topic, &partitions).await?;
    let bounds = LogBounds::ask(node, topic, &partitions).await?;
    let at_time = match action.to {
        ResetTo::Timestamp => Some(leader_offsets(node, topic, &partitions, value).await?),
        _ => None,
    };
    let mut plan = Vec::with_capacity(partitions.len());
    for p in &partitions {
        let (start, end) = bounds.of(topic, *p)?;
        let current = committed.iter().find(|(q, _)| q == p).and_then(|(_, o)| *o);
        let new = match action.to {
            ResetTo::Earliest => start,
            ResetTo::Latest => end,
            ResetTo::Offset => value.clamp(start, end),
            // No record at or after the time: the end, as Kafka's tool does.
            ResetTo::Timestamp => match at_time.as_ref().map(|t| known(topic, *p, t)) {
                Some(Ok(offset)) if offset >= 0 => offset,
                Some(Err(refused)) => return Err(refused),
                _ => end,
            },
            ResetTo::ShiftBy => {
                let Some(current) = current else {
                    return Err(Refusal::bad_request(format!(
                        "{topic}-{p} has no committed offset of group {group} to shift"
                    )));
                };
                current.saturating_add(value).clamp(start, end)
            }
        };
        plan.push((*p, current, new, start, end));
    }
    if !action.dry_run {
        commit(node, coordinator, group, topic, &plan).await?;
    }
    let partitions: Vec<serde_json::Value> = plan
        .iter()
        .map(|(p, current, new, start, end)| {
            serde_json::json!({
                "partition": p,
                "committed_offset": current,
                "new_offset": new,
                "log_start_offset": start,
                "log_end_offset": end,
            })
        })
        .collect();
    Ok(ActionAnswer::ok(serde_json::json!({
        "group": group,
        "topic": topic,
        "state": state,
        "coordinator": coordinator,
        "dry_run": action.dry_run,
        "partitions": partitions,
    })))
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// The group's coordinator, asked of this node (which creates `__consumer_offsets` if
/// it is missing, as it does for a client).
async fn coordinator_of(node: &NodeView, group: &str) -> Result<i32, Refusal> {
    let request = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![str_bytes(group)]);
    let answer: FindCoordinatorResponse =
        call(node, node.node_id, ApiKey::FindCoordinator, 4, &request).await?;
    let found = answer
        .coordinators
        .first()
        .ok_or_else(|| Refusal::new("502 Bad Gateway", "FindCoordinator named no coordinator"))?;
    match found.error_code {
        0 => Ok(found.node_id.0),
        code => Err(Refusal::kafka(
            code,
            format!("no coordinator for group {group}: {}", error_name(code)),
        )),
    }
}

/// The group's state as its coordinator has it: a classic group's from DescribeGroups,
/// a consumer-protocol group's from ConsumerGroupDescribe; `Dead` for no group.
async fn group_state(node: &NodeView, coordinator: i32, group: &str) -> Result<String, Refusal> {
    let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(str_bytes(group))]);
    let answer: DescribeGroupsResponse =
        call(node, coordinator, ApiKey::DescribeGroups, 6, &request).await?;
    let described = answer
        .groups
        .first()
        .ok_or_else(|| Refusal::new("502 Bad Gateway", "DescribeGroups described no group"))?;
    let not_classic = described
        .error_message
        .as_ref()
        .is_some_and(|m| m.contains("not a classic group"));
    match described.error_code {
        0 => return Ok(described.group_state.to_string()),
        code if code == ResponseError::GroupIdNotFound.code() && !not_classic => {
            return Ok("Dead".into())
        }
        code if code != ResponseError::GroupIdNotFound.code() => {
            return Err(Refusal::kafka(
                code,
                format!("describing group {group}: {}", error_name(code)),
            ))
        }
        _ => {}
    }
    let request =
        ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(str_bytes(group))]);
    let answer: ConsumerGroupDescribeResponse = call(
        node,
        coordinator,
        ApiKey::ConsumerGroupDescribe,
        0,
        &request,
    )
    .await?;
    match answer.groups.first() {
        Some(g) if g.error_code == 0 => Ok(g.group_state.to_string()),
        Some(g) if g.error_code == ResponseError::GroupIdNotFound.code() => Ok("Dead".into()),
        Some(g) => Err(Refusal::kafka(
            g.error_code,
            format!("describing group {group}: {}", error_name(g.error_code)),
        )),
        None => Err(Refusal::new(
            "502 Bad Gateway",
            "ConsumerGroupDescribe described no group",
        )),
    }
}

/// The group's committed offset of each partition (None: nothing committed).
async fn committed_offsets(
    node: &NodeView,
    coordinator: i32,
    group: &str,
    topic: &str,
    partitions: &[i32],
) -> Result<Vec<(i32, Option<i64>)>, Refusal> {
    let request =
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(str_bytes(group)))
            .with_member_epoch(-1)
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(topic_name(topic))
                .with_partition_indexes(partitions.to_vec())]))]);
    let answer: OffsetFetchResponse =
        call(node, coordinator, ApiKey::OffsetFetch, 8, &request).await?;
    let fetched = answer
        .groups
        .first()
        .ok_or_else(|| Refusal::new("502 Bad Gateway", "OffsetFetch answered no group"))?;
    if fetched.error_code != 0 {
        return Err(Refusal::kafka(
            fetched.error_code,
            format!(
                "fetching group {group}'s offsets: {}",
                error_name(fetched.error_code)
            ),
        ));
    }
    let mut out = Vec::with_capacity(partitions.len());
    for p in partitions {
        let found = fetched
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .find(|f| f.partition_index == *p);
        match found {
            Some(f) if f.error_code != 0 => {
                return Err(Refusal::kafka(
                    f.error_code,
                    format!("{topic}-{p}: {}", error_name(f.error_code)),
                ))
            }
            Some(f) => out.push((*p, (f.committed_offset >= 0).then_some(f.committed_offset))),
            None => out.push((*p, None)),
        }
    }
    Ok(out)
}

/// Commits the plan's offsets as an admin (generation -1, no member), which the
/// coordinator accepts only for a group with no members.
async fn commit(
    node: &NodeView,
    coordinator: i32,
    group: &str,
    topic: &str,
    plan: &[(i32, Option<i64>, i64, i64, i64)],
) -> Result<(), Refusal> {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(str_bytes(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(StrBytes::default())
        .with_retention_time_ms(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(
                plan.iter()
                    .map(|(p, _, new, _, _)| {
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(*p)
                            .with_committed_offset(*new)
                            .with_committed_leader_epoch(-1)
                            .with_committed_metadata(Some(StrBytes::default()))
                    })
                    .collect(),
            )]);
    let answer: OffsetCommitResponse =
        call(node, coordinator, ApiKey::OffsetCommit, 8, &request).await?;
    for p in answer.topics.iter().flat_map(|t| &t.partitions) {
        if p.error_code != 0 {
            return Err(Refusal::kafka(
                p.error_code,
                format!(
                    "committing {topic}-{}: {}",
                    p.partition_index,
                    error_name(p.error_code)
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_names_its_target_as_kafkas_tool_does() {
        let r: ResetOffsets =
            parse(br#"{"topic": "t", "to": "shift-by", "value": -5}"#, "r").unwrap();
        assert_eq!(
            (r.to, r.value, r.dry_run),
            (ResetTo::ShiftBy, Some(-5), false)
        );
        assert!(r.partitions.is_empty());
        let r: ResetOffsets = parse(
            br#"{"topic": "t", "to": "earliest", "partitions": [1, 0], "dry_run": true}"#,
            "r",
        )
        .unwrap();
        assert_eq!(
            (r.to, r.partitions.clone()),
            (ResetTo::Earliest, vec![1, 0])
        );
        assert!(parse::<ResetOffsets>(br#"{"topic": "t", "to": "yesterday"}"#, "r").is_err());
        assert!(parse::<ResetOffsets>(br#"{"to": "latest"}"#, "r").is_err());
    }
}
