//! Lag of partitions this node holds no replica of. A group's coordinator knows its
//! committed offsets but, on a cluster, not always the partitions: for those its leader
//! is asked, over the inter-broker listener, the log start and high watermark
//! (ListOffsets) and the timestamp of the first record the group has not read (a Fetch
//! of one batch at the committed offset, asked again only when that offset moves). The
//! answers are kept here for the lag arithmetic, which reads nothing remote itself (it
//! runs on a blocking thread, per scrape and per sample).
//!
//! What a leader does not tell through Kafka's APIs is where its segments end, so for a
//! remote partition the retention headroom counts from the first unread record's
//! timestamp (the earliest its segment can be deleted by `retention.ms`), and there is
//! no size headroom.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::list_offsets_response::ListOffsetsResponse;
use kafka_protocol::messages::{ApiKey, BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use tidelog_records::{BatchHeader, BATCH_HEADER_LEN};

use super::groups::GroupLagSource;
use super::NodeView;
use crate::poison::LockTolerant;
use crate::replica::Peer;

/// A view older than this is not used (its leader could not be asked since).
const STALE_AFTER: Duration = Duration::from_secs(300);
/// Remote partitions asked about in one refresh, at most.
const MAX_PARTITIONS: usize = 10_000;
/// Bound of one leader's answers (connect, ListOffsets twice, Fetch).
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest answer read; a Fetch asks for one batch per call.
const MAX_RESPONSE: usize = 4 << 20;
/// Kafka's largest batch by default (`message.max.bytes`): one whole first batch.
const ONE_BATCH: i32 = 1 << 20;
const LIST_OFFSETS_VERSION: i16 = 7;
const FETCH_VERSION: i16 = 12;
const EARLIEST: i64 = -2;
pub(crate) const LATEST: i64 = -1;

/// What a leader said of one partition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct RemoteLog {
    pub(super) log_start: i64,
    pub(super) high_watermark: i64,
    /// (committed offset, timestamp of the batch holding it) when it could be read.
    pub(super) first_unread: Option<(i64, i64)>,
    pub(super) read_at: Instant,
}

/// The latest answers, by (topic, partition).
#[derive(Default)]
pub(crate) struct RemoteLogs {
    views: Mutex<HashMap<(String, i32), RemoteLog>>,
}

type Wanted = BTreeMap<(String, i32), i64>;

impl RemoteLogs {
    /// The partition as its leader last described it, if recently; the first unread
    /// timestamp only if it was read at `committed`.
    pub(super) fn view(&self, topic: &str, partition: i32, committed: i64) -> Option<RemoteLog> {
        let views = self.views.locked();
        let mut view = *views.get(&(topic.to_owned(), partition))?;
        if view.read_at.elapsed() > STALE_AFTER {
            return None;
        }
        view.first_unread = view.first_unread.filter(|(at, _)| *at == committed);
        Some(view)
    }

    /// Asks the leaders of the committed partitions of `groups` this node holds no
    /// replica of. A leader that cannot be reached leaves its partitions' last views
    /// to age out.
    pub(crate) async fn refresh(&self, node: &NodeView, groups: &dyn GroupLagSource) {
        let mut wanted: Wanted = BTreeMap::new();
        for g in groups.groups() {
            if g.group_type == "share" {
                continue;
            }
            for c in g.committed {
                if node.replicas.get(&c.topic, c.partition).is_none()
                    && wanted.len() < MAX_PARTITIONS
                {
                    // Groups sharing a partition: the least committed offset is the one
                    // whose first unread record is oldest.
                    let at = wanted.entry((c.topic, c.partition)).or_insert(c.offset);
                    *at = (*at).min(c.offset);
                }
            }
        }
        {
            let mut views = self.views.locked();
            views.retain(|key, _| wanted.contains_key(key));
        }
        for (leader, partitions) in by_leader(node, wanted) {
            let asked = tokio::time::timeout(CALL_TIMEOUT, self.ask(node, leader, &partitions));
            match asked.await {
                Ok(Ok(())) => {}
                Ok(Err(why)) => {
                    tracing::debug!(leader, error = %why, "lag of partitions led elsewhere not read");
                }
                Err(_) => {
                    tracing::debug!(leader, "lag of partitions led elsewhere: leader too slow")
                }
            }
        }
    }

    /// One leader's answers for `partitions`, stored as they come.
    async fn ask(&self, node: &NodeView, leader: i32, partitions: &Wanted) -> Result<(), String> {
        let mut peer = node
            .connect(leader, "lag", CALL_TIMEOUT)
            .await
            .map_err(|why| format!("node {leader}: {why}"))?;
        let starts = list_offsets(&mut peer, partitions.keys(), EARLIEST).await?;
        let ends = list_offsets(&mut peer, partitions.keys(), LATEST).await?;
        let read_at = Instant::now();
        for (key, committed) in partitions {
            let (Some(&log_start), Some(&high_watermark)) = (starts.get(key), ends.get(key)) else {
                continue;
            };
            let known = {
                let views = self.views.locked();
                views
                    .get(key)
                    .and_then(|v| v.first_unread)
                    .filter(|(at, _)| at == committed)
            };
            let first_unread = match known {
                Some(known) => Some(known),
                None if *committed >= log_start && *committed < high_watermark => {
                    first_batch_timestamp(&mut peer, key, *committed)
                        .await?
                        .map(|ts| (*committed, ts))
                }
                None => None,
            };
            let view = RemoteLog {
                log_start,
                high_watermark,
                first_unread,
                read_at,
            };
            let mut views = self.views.locked();
            views.insert(key.clone(), view);
        }
        Ok(())
    }
}

/// `wanted` by the node leading each partition (partitions without a leader left out).
fn by_leader(node: &NodeView, wanted: Wanted) -> BTreeMap<i32, Wanted> {
    let image = node.metadata.image();
    let mut led: BTreeMap<i32, Wanted> = BTreeMap::new();
    for ((topic, partition), committed) in wanted {
        let leader = image
            .topic(&topic)
            .and_then(|t| t.partitions.get(&partition))
            .map_or(-1, |p| p.leader);
        if leader >= 0 && leader != node.node_id {
            led.entry(leader)
                .or_default()
                .insert((topic, partition), committed);
        }
    }
    led
}

fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

/// One ListOffsets for every partition of `partitions`: offset by (topic, partition),
/// the partitions the leader refused left out. DescribeShareGroupOffsets asks the
/// leaders of other nodes' partitions for their high watermarks with it too.
pub(crate) async fn list_offsets<'a>(
    peer: &mut Peer,
    partitions: impl IntoIterator<Item = &'a (String, i32)>,
    timestamp: i64,
) -> Result<HashMap<(String, i32), i64>, String> {
    let mut topics: BTreeMap<&str, Vec<ListOffsetsPartition>> = BTreeMap::new();
    for (topic, partition) in partitions {
        topics.entry(topic).or_default().push(
            ListOffsetsPartition::default()
                .with_partition_index(*partition)
                .with_current_leader_epoch(-1)
                .with_timestamp(timestamp),
        );
    }
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(
            topics
                .into_iter()
                .map(|(topic, ps)| {
                    ListOffsetsTopic::default()
                        .with_name(topic_name(topic))
                        .with_partitions(ps)
                })
                .collect(),
        );
    let answer: ListOffsetsResponse = peer
        .call(
            ApiKey::ListOffsets,
            LIST_OFFSETS_VERSION,
            &request,
            MAX_RESPONSE,
            CALL_TIMEOUT,
        )
        .await
        .map_err(|e| e.to_string())?;
    Ok(answer
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|p| p.error_code == 0)
                .map(|p| ((t.name.0.to_string(), p.partition_index), p.offset))
        })
        .collect())
}

/// The timestamp of the batch holding `offset` (its base timestamp, or its max with
/// LogAppendTime, as the local lag arithmetic reads it), from a one-partition Fetch:
/// the first batch of the only partition is whole even past `ONE_BATCH`.
async fn first_batch_timestamp(
    peer: &mut Peer,
    (topic, partition): &(String, i32),
    offset: i64,
) -> Result<Option<i64>, String> {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(ONE_BATCH)
        .with_isolation_level(0)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(*partition)
                .with_current_leader_epoch(-1)
                .with_fetch_offset(offset)
                .with_last_fetched_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(1)])]);
    let answer: FetchResponse = peer
        .call(
            ApiKey::Fetch,
            FETCH_VERSION,
            &request,
            MAX_RESPONSE,
            CALL_TIMEOUT,
        )
        .await
        .map_err(|e| e.to_string())?;
    let records = answer
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .find(|p| p.partition_index == *partition && p.error_code == 0)
        .and_then(|p| p.records.clone());
    Ok(records.and_then(|bytes| {
        let head = <&[u8; BATCH_HEADER_LEN]>::try_from(bytes.get(..BATCH_HEADER_LEN)?).ok()?;
        let header = BatchHeader::from_array(head);
        Some(if header.is_log_append_time() {
            header.max_timestamp()
        } else {
            header.base_timestamp()
        })
    }))
}
