//! DescribeShareGroupOffsets (KIP-932): per share partition of a share group, its start
//! offset and the leader epoch of its stored state, read from the share coordinator.
//! Topics left null mean every share partition the group has state for. A group of
//! another kind, or none, is GROUP_ID_NOT_FOUND; a partition without state answers start
//! offset -1, as in Kafka.
//!
//! v1 (KIP-1226) answers each share partition's lag too: its high watermark less its
//! start offset less its delivery-complete count (the records at or above the start
//! offset already acknowledged or archived, which the leader writes with its state). The high
//! watermark of a partition led elsewhere comes from a ListOffsets to its leader,
//! bounded by a timeout; whatever is not known (no state, a state written without the
//! count, a leader that did not answer) answers lag -1.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequest;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponse, DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition as PartitionAnswer,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::TopicName;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;
use uuid::Uuid;

use super::per_partition::led_partition;
use super::Request;
use crate::auth::Access;
use crate::context::Ctx;
use crate::group::str_bytes;
use crate::metrics::connect_to_node;
use crate::metrics::remote_logs::{list_offsets, CALL_TIMEOUT, LATEST};
use crate::net::Reply;

/// v1 answers the lag (KIP-1226).
pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };
/// The first version with the lag.
const LAG_VERSION: i16 = 1;

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DescribeShareGroupOffsetsRequest = req.decode()?;
    let access = req.access(ctx);
    let mut groups = Vec::with_capacity(request.groups.len());
    for g in request.groups {
        let wanted = g.topics.map(|topics| {
            topics
                .into_iter()
                .map(|t| (t.topic_name.0.to_string(), t.partitions))
                .collect()
        });
        let with_lag = req.version() >= LAG_VERSION;
        groups.push(describe_group(ctx, &access, g.group_id.0.to_string(), wanted, with_lag).await);
    }
    req.respond(&DescribeShareGroupOffsetsResponse::default().with_groups(groups))
}

fn partition_error(index: i32, error: i16, message: Option<String>) -> PartitionAnswer {
    PartitionAnswer::default()
        .with_partition_index(index)
        .with_start_offset(-1)
        .with_leader_epoch(-1)
        .with_error_code(error)
        .with_error_message(message.map(|m| str_bytes(&m)))
}

async fn describe_group(
    ctx: &Ctx,
    access: &Access,
    group: String,
    wanted: Option<Vec<(String, Vec<i32>)>>,
    with_lag: bool,
) -> DescribeShareGroupOffsetsResponseGroup {
    let answer = DescribeShareGroupOffsetsResponseGroup::default()
        .with_group_id(kafka_protocol::messages::GroupId(str_bytes(&group)));
    if let Some(code) = access.refused(AclOperation::Describe, ResourceType::Group, &group) {
        return answer.with_error_code(code);
    }
    let initialized = match ctx.groups.share_offsets_topics(group.clone()).await {
        Err(e) => return answer.with_error_code(e.code()),
        Ok(Err(refusal)) => {
            return answer
                .with_error_code(refusal.error.code())
                .with_error_message(Some(str_bytes(&refusal.message)))
        }
        Ok(Ok(topics)) => topics,
    };
    let image = ctx.metadata.image();
    // (name, id if the image has the topic, partitions asked for).
    let wanted: Vec<(String, Option<Uuid>, Vec<i32>)> = match wanted {
        Some(topics) => topics
            .into_iter()
            .map(|(name, partitions)| {
                let id = image.topic(&name).map(|t| t.topic_id);
                (name, id, partitions)
            })
            .collect(),
        // Every share partition with state, of topics that still exist.
        None => initialized
            .iter()
            .filter(|(id, _)| image.topic_by_id(id).is_some())
            .map(|(id, (name, partitions))| {
                let name = image
                    .topic_by_id(id)
                    .map_or(name.clone(), |t| t.name.clone());
                (name, Some(*id), partitions.iter().copied().collect())
            })
            .collect(),
    };
    let mut topics = Vec::with_capacity(wanted.len());
    // (topic, partition answer) of each share partition with a known start offset and
    // delivery-complete count, with its (name, partition) and their sum.
    let mut lag_of: Vec<(usize, usize, (String, i32), i64)> = Vec::new();
    for (name, id, partitions) in wanted {
        let refused = access.refused(AclOperation::Describe, ResourceType::Topic, &name);
        let exists = |p: i32| {
            id.and_then(|id| image.topic_by_id(&id))
                .is_some_and(|t| t.partitions.contains_key(&p))
        };
        let mut answers = Vec::with_capacity(partitions.len());
        for p in partitions {
            answers.push(match (refused, id) {
                (Some(code), _) => partition_error(p, code, None),
                (None, Some(id)) if exists(p) => {
                    match ctx.share_state.summary((group.clone(), id, p)).await {
                        Ok(Some(s)) => {
                            if s.start_offset >= 0 && s.delivery_complete_count >= 0 {
                                lag_of.push((
                                    topics.len(),
                                    answers.len(),
                                    (name.clone(), p),
                                    s.start_offset
                                        .saturating_add(i64::from(s.delivery_complete_count)),
                                ));
                            }
                            PartitionAnswer::default()
                                .with_partition_index(p)
                                .with_start_offset(s.start_offset)
                                .with_leader_epoch(s.leader_epoch)
                        }
                        Ok(None) => partition_error(p, 0, None),
                        Err(e) => partition_error(p, e.code(), Some(e.to_string())),
                    }
                }
                _ => partition_error(
                    p,
                    ResponseError::UnknownTopicOrPartition.code(),
                    Some("This server does not host this topic-partition.".into()),
                ),
            });
        }
        topics.push(
            DescribeShareGroupOffsetsResponseTopic::default()
                .with_topic_name(TopicName(str_bytes(&name)))
                .with_topic_id(id.unwrap_or_default())
                .with_partitions(answers),
        );
    }
    if with_lag && !lag_of.is_empty() {
        let ends = high_watermarks(ctx, lag_of.iter().map(|(_, _, key, _)| key.clone())).await;
        for (topic, index, key, done_below) in lag_of {
            let answer =
                topics
                    .get_mut(topic)
                    .and_then(|t: &mut DescribeShareGroupOffsetsResponseTopic| {
                        t.partitions.get_mut(index)
                    });
            if let (Some(answer), Some(end)) = (answer, ends.get(&key)) {
                answer.lag = lag(*end, done_below);
            }
        }
    }
    answer.with_topics(topics)
}

/// KIP-1226's lag from the high watermark and start offset + delivery-complete count:
/// never negative (a log truncated below the start offset has nothing left to deliver).
fn lag(high_watermark: i64, start_plus_complete: i64) -> i64 {
    high_watermark.saturating_sub(start_plus_complete).max(0)
}

/// The high watermark of each of `partitions`: read here for a partition led here,
/// else asked of its leader (all leaders at once, each within `CALL_TIMEOUT`). A
/// partition whose leader is unknown or did not answer is left out.
async fn high_watermarks(
    ctx: &Ctx,
    partitions: impl Iterator<Item = (String, i32)>,
) -> HashMap<(String, i32), i64> {
    let mut ends = HashMap::new();
    let image = ctx.metadata.image();
    let mut elsewhere: BTreeMap<i32, BTreeSet<(String, i32)>> = BTreeMap::new();
    for (topic, partition) in partitions {
        if let Ok(p) = led_partition(ctx, &topic, partition, -1) {
            if let Ok(offsets) = p.offsets() {
                ends.insert((topic, partition), offsets.high_watermark);
            }
            continue;
        }
        let leader = image
            .topic(&topic)
            .and_then(|t| t.partitions.get(&partition))
            .map_or(-1, |p| p.leader);
        if leader >= 0 && leader != ctx.node_id() {
            elsewhere
                .entry(leader)
                .or_default()
                .insert((topic, partition));
        }
    }
    let mut asks = tokio::task::JoinSet::new();
    for (leader, partitions) in elsewhere {
        let (metadata, replicas) = (ctx.metadata.clone(), ctx.replicas.clone());
        let from = ctx.node_id();
        asks.spawn(async move {
            let asked = tokio::time::timeout(CALL_TIMEOUT, async {
                let mut peer =
                    connect_to_node(&metadata, &replicas, from, leader, "share-lag", CALL_TIMEOUT)
                        .await?;
                list_offsets(&mut peer, &partitions, LATEST).await
            })
            .await;
            match asked {
                Ok(Ok(found)) => found,
                Ok(Err(why)) => {
                    tracing::debug!(leader, error = %why, "share lag: the leader's high watermarks are not known");
                    HashMap::new()
                }
                Err(_) => {
                    tracing::debug!(leader, "share lag: the leader did not answer in time");
                    HashMap::new()
                }
            }
        });
    }
    while let Some(found) = asks.join_next().await {
        if let Ok(found) = found {
            ends.extend(found);
        }
    }
    ends
}

#[cfg(test)]
mod tests {
    use super::lag;

    #[test]
    fn the_lag_is_what_is_neither_below_the_start_nor_complete() {
        // Records 10..20 below the high watermark 20, 4 of them acknowledged or
        // archived: 6 still to deliver.
        assert_eq!(lag(20, 10 + 4), 6);
        assert_eq!(lag(20, 20), 0);
        assert_eq!(lag(5, 10), 0, "a truncated log has nothing left");
    }
}
