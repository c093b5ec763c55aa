//! Kafka requests an action sends to the node that must carry it out (a partition's
//! leader, a group's coordinator; this node too), over the inter-broker listener and
//! secured as it requires, like the transaction coordinator's markers. Each call has its
//! own connection and a bound on its time and answer.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::list_offsets_response::ListOffsetsResponse;
use kafka_protocol::messages::{ApiKey, BrokerId, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::Refusal;
use crate::metrics::{error_name, NodeView};

/// Bound of one exchange (connect, send, answer); DeleteRecords' own wait is shorter.
pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// Largest answer read: one group's offsets or one topic's partitions.
const MAX_RESPONSE: usize = 8 << 20;

/// Sends `request` as `key` v`version` to node `to` and reads its answer.
pub(super) async fn call<Req: Encodable, Resp: Decodable>(
    node: &NodeView,
    to: i32,
    key: ApiKey,
    version: i16,
    request: &Req,
) -> Result<Resp, Refusal> {
    let unreachable = |why: String| {
        Refusal::new(
            "502 Bad Gateway",
            format!("node {to} could not be asked ({key:?}): {why}"),
        )
    };
    let started = tokio::time::Instant::now();
    let mut peer = node
        .connect(to, "console", CALL_TIMEOUT)
        .await
        .map_err(unreachable)?;
    let left = CALL_TIMEOUT.saturating_sub(started.elapsed());
    peer.call(key, version, request, MAX_RESPONSE, left)
        .await
        .map_err(|e| unreachable(e.to_string()))
}

/// Kafka's special ListOffsets timestamps.
pub(super) const EARLIEST: i64 = -2;
pub(super) const LATEST: i64 = -1;

/// ListOffsets for `timestamp` on `partitions` of `topic`, asked of each one's leader:
/// the offset, or the partition's Kafka error code.
pub(super) async fn leader_offsets(
    node: &NodeView,
    topic: &str,
    partitions: &[i32],
    timestamp: i64,
) -> Result<BTreeMap<i32, Result<i64, i16>>, Refusal> {
    let mut found = BTreeMap::new();
    for (leader, led) in by_leader(node, topic, partitions)? {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(
                    led.iter()
                        .map(|p| {
                            ListOffsetsPartition::default()
                                .with_partition_index(*p)
                                .with_current_leader_epoch(-1)
                                .with_timestamp(timestamp)
                        })
                        .collect(),
                )]);
        let answer: ListOffsetsResponse = call(
            node,
            leader,
            ApiKey::ListOffsets,
            LIST_OFFSETS_VERSION,
            &request,
        )
        .await?;
        for p in answer.topics.iter().flat_map(|t| &t.partitions) {
            let outcome = match p.error_code {
                0 => Ok(p.offset),
                code => Err(code),
            };
            found.insert(p.partition_index, outcome);
        }
    }
    for p in partitions {
        found
            .entry(*p)
            .or_insert(Err(ResponseError::UnknownTopicOrPartition.code()));
    }
    Ok(found)
}

const LIST_OFFSETS_VERSION: i16 = 7;

/// The log start and end of partitions, asked of their leaders: two ListOffsets, as
/// Kafka refuses a request that names a partition twice.
pub(super) struct LogBounds {
    starts: BTreeMap<i32, Result<i64, i16>>,
    ends: BTreeMap<i32, Result<i64, i16>>,
}

impl LogBounds {
    pub(super) async fn ask(
        node: &NodeView,
        topic: &str,
        partitions: &[i32],
    ) -> Result<LogBounds, Refusal> {
        Ok(LogBounds {
            starts: leader_offsets(node, topic, partitions, EARLIEST).await?,
            ends: leader_offsets(node, topic, partitions, LATEST).await?,
        })
    }

    /// (log start, log end) of `partition`, or the leader's refusal.
    pub(super) fn of(&self, topic: &str, partition: i32) -> Result<(i64, i64), Refusal> {
        Ok((
            known(topic, partition, &self.starts)?,
            known(topic, partition, &self.ends)?,
        ))
    }
}

/// A partition's offset from its leader's answer, or the leader's error.
pub(super) fn known(
    topic: &str,
    partition: i32,
    offsets: &BTreeMap<i32, Result<i64, i16>>,
) -> Result<i64, Refusal> {
    match offsets.get(&partition) {
        Some(Ok(offset)) => Ok(*offset),
        Some(Err(code)) => Err(Refusal::kafka(
            *code,
            format!("{topic}-{partition}: {}", error_name(*code)),
        )),
        None => Err(unknown_topic(topic)),
    }
}

/// `partitions` of `topic` by the node that leads them; a partition without a leader
/// refuses the whole action (retriable).
pub(super) fn by_leader(
    node: &NodeView,
    topic: &str,
    partitions: &[i32],
) -> Result<BTreeMap<i32, Vec<i32>>, Refusal> {
    let image = node.metadata.image();
    let t = image.topic(topic).ok_or_else(|| unknown_topic(topic))?;
    let mut led: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for p in partitions {
        match t.partitions.get(p) {
            Some(state) if state.leader >= 0 => led.entry(state.leader).or_default().push(*p),
            Some(_) => {
                return Err(Refusal::kafka(
                    ResponseError::LeaderNotAvailable.code(),
                    format!("partition {p} of {topic} has no leader right now"),
                ))
            }
            None => {
                return Err(Refusal::bad_request(format!(
                    "{topic} has no partition {p}"
                )))
            }
        }
    }
    Ok(led)
}

pub(super) fn unknown_topic(topic: &str) -> Refusal {
    Refusal {
        status: "404 Not Found",
        message: format!("topic {topic} does not exist"),
        error_code: Some(ResponseError::UnknownTopicOrPartition.code()),
    }
}

/// The partitions an action names, or every partition of the topic when it names none.
pub(super) fn partitions_of(
    node: &NodeView,
    topic: &str,
    named: &[i32],
) -> Result<Vec<i32>, Refusal> {
    let image = node.metadata.image();
    let t = image.topic(topic).ok_or_else(|| unknown_topic(topic))?;
    if named.is_empty() {
        return Ok(t.partitions.keys().copied().collect());
    }
    let mut out = named.to_vec();
    out.sort_unstable();
    out.dedup();
    match out.iter().find(|p| !t.partitions.contains_key(p)) {
        Some(p) => Err(Refusal::bad_request(format!(
            "{topic} has no partition {p}"
        ))),
        None => Ok(out),
    }
}

pub(super) fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}
