//! Transaction markers for partitions that another broker leads (a cluster): the
//! coordinator asks that broker to write them with WriteTxnMarkers, the request Kafka's
//! own coordinators send. Marker writing (`markers::write_all`) runs under the
//! coordinator's lock and must not wait on the network, so it only records what it
//! wants here; the background task sends the wanted markers (`send_wanted`) and records
//! which were written, and the next completion attempt finds them done.
//!
//! The same way, transactional offsets this coordinator holds for a group whose
//! coordinator has since moved to another broker (the group and the transaction were
//! coordinated here together, then leadership moved apart) are handed to the group's
//! new coordinator with TxnOffsetCommit before its marker is asked for, so the marker
//! finds them there and commits them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequest, TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::txn_offset_commit_response::TxnOffsetCommitResponse;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest,
};
use kafka_protocol::messages::write_txn_markers_response::WriteTxnMarkersResponse;
use kafka_protocol::messages::{ApiKey, GroupId, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::{Decodable, StrBytes};
use tidelog_protocol::client::{decode_response, encode_request};
use tidelog_protocol::frame::read_frame;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::state::PendingOffset;
use crate::context::Ctx;
use crate::group::OFFSETS_TOPIC;

/// Bound of one WriteTxnMarkers exchange (connect, send, answer).
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest answer read (a few bytes per partition).
const MAX_RESPONSE: usize = 1 << 20;
/// Markers kept wanted or written at most; beyond it new wants wait for the next round.
const MAX_TRACKED: usize = 100_000;

/// One marker for one partition.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct MarkerKey {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) producer_id: i64,
    pub(crate) epoch: i16,
    pub(crate) commit: bool,
    pub(crate) coordinator_epoch: i32,
}

/// One transaction's offsets for one group coordinated by another broker.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct OffsetsKey {
    pub(crate) group: String,
    /// The group's `__consumer_offsets` partition (its coordinator leads it).
    pub(crate) partition: i32,
    pub(crate) producer_id: i64,
    pub(crate) epoch: i16,
}

/// What a TxnOffsetCommit on the transaction's behalf carries.
#[derive(Debug, Clone)]
pub(crate) struct OffsetsDelivery {
    pub(crate) transactional_id: String,
    pub(crate) offsets: Vec<(String, i32, PendingOffset)>,
}

/// Markers and offsets waiting to be sent, and those another broker confirmed.
#[derive(Debug, Default)]
pub(crate) struct RemoteMarkers {
    wanted: BTreeSet<MarkerKey>,
    written: BTreeSet<MarkerKey>,
    offsets_wanted: BTreeMap<OffsetsKey, OffsetsDelivery>,
    offsets_delivered: BTreeSet<OffsetsKey>,
}

impl RemoteMarkers {
    /// True if the marker was written remotely (and forgets it); else asks for it.
    pub(crate) fn take_or_want(&mut self, key: MarkerKey) -> bool {
        if self.written.remove(&key) {
            return true;
        }
        if self.wanted.len() < MAX_TRACKED {
            self.wanted.insert(key);
        }
        false
    }

    /// True if the offsets were handed to the group's coordinator (and forgets it);
    /// else asks for the hand-over.
    pub(crate) fn offsets_delivered_or_want(
        &mut self,
        key: OffsetsKey,
        delivery: OffsetsDelivery,
    ) -> bool {
        if self.offsets_delivered.remove(&key) {
            return true;
        }
        if self.offsets_wanted.len() < MAX_TRACKED {
            self.offsets_wanted.insert(key, delivery);
        }
        false
    }
}

/// The listener of `leader` if it is a live broker of the image.
fn endpoint_of(ctx: &Ctx, leader: i32) -> Option<(String, u16)> {
    ctx.metadata
        .image()
        .broker(leader)
        .filter(|b| !b.fenced)
        .and_then(|b| b.listeners.first())
        .map(|l| (l.host.clone(), l.port))
}

/// The leader of `topic`/`partition` if it is another broker.
fn remote_leader(ctx: &Ctx, topic: &str, partition: i32) -> Option<i32> {
    let leader = ctx
        .metadata
        .image()
        .topic(topic)
        .and_then(|t| t.partitions.get(&partition))
        .map_or(-1, |p| p.leader);
    (leader >= 0 && leader != ctx.node_id()).then_some(leader)
}

/// Hands every wanted set of offsets to its group's coordinator; records those taken.
async fn deliver_wanted_offsets(ctx: &Ctx) {
    let wanted = std::mem::take(&mut ctx.txns.remote_lock().offsets_wanted);
    for (key, delivery) in wanted {
        // Led here now (or by no one): the local path commits them, or the retry asks again.
        let Some(leader) = remote_leader(ctx, OFFSETS_TOPIC, key.partition) else {
            continue;
        };
        let Some((host, port)) = endpoint_of(ctx, leader) else {
            continue;
        };
        match deliver_offsets(ctx, &host, port, &key, &delivery).await {
            Ok(()) => {
                tracing::info!(leader, group = %key.group, producer_id = key.producer_id, "handed a transaction's offsets to the group's coordinator");
                let mut remote = ctx.txns.remote_lock();
                if remote.offsets_delivered.len() < MAX_TRACKED {
                    remote.offsets_delivered.insert(key);
                }
            }
            Err(e) => {
                tracing::warn!(leader, group = %key.group, error = %e, "handing transactional offsets to the group coordinator failed; will retry");
            }
        }
    }
}

/// One TxnOffsetCommit carrying a transaction's offsets for `key.group`. The
/// generation is left unknown (-1, no member): the group may have rebalanced since
/// the client sent them, and a decided transaction's offsets stand regardless.
async fn deliver_offsets(
    ctx: &Ctx,
    host: &str,
    port: u16,
    key: &OffsetsKey,
    delivery: &OffsetsDelivery,
) -> Result<(), String> {
    let mut topics: BTreeMap<&str, Vec<TxnOffsetCommitRequestPartition>> = BTreeMap::new();
    for (topic, partition, offset) in &delivery.offsets {
        topics.entry(topic.as_str()).or_default().push(
            TxnOffsetCommitRequestPartition::default()
                .with_partition_index(*partition)
                .with_committed_offset(offset.offset)
                .with_committed_leader_epoch(offset.leader_epoch)
                .with_committed_metadata(offset.metadata.clone().map(StrBytes::from_string)),
        );
    }
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(
            delivery.transactional_id.clone(),
        )))
        .with_group_id(GroupId(StrBytes::from_string(key.group.clone())))
        .with_producer_id(ProducerId(key.producer_id))
        .with_producer_epoch(key.epoch)
        .with_generation_id(-1)
        .with_topics(
            topics
                .into_iter()
                .map(|(topic, partitions)| {
                    TxnOffsetCommitRequestTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                        .with_partitions(partitions)
                })
                .collect(),
        );
    let response: TxnOffsetCommitResponse =
        exchange(ctx, host, port, ApiKey::TxnOffsetCommit, 3, &request).await?;
    let refused: Vec<i16> = response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .filter(|code| *code != 0)
        .collect();
    if refused.is_empty() {
        Ok(())
    } else {
        Err(format!("refused with error codes {refused:?}"))
    }
}

/// Sends every wanted hand-over of offsets, then every wanted marker, to the leader of
/// its partition; records those done.
pub(crate) async fn send_wanted(ctx: &Ctx) {
    deliver_wanted_offsets(ctx).await;
    let wanted = std::mem::take(&mut ctx.txns.remote_lock().wanted);
    if wanted.is_empty() {
        return;
    }
    let mut by_leader: BTreeMap<i32, Vec<MarkerKey>> = BTreeMap::new();
    for key in wanted {
        // Led here (or by no one): the local path writes it, or the retry asks again.
        if let Some(leader) = remote_leader(ctx, &key.topic, key.partition) {
            by_leader.entry(leader).or_default().push(key);
        }
    }
    for (leader, keys) in by_leader {
        let Some((host, port)) = endpoint_of(ctx, leader) else {
            continue;
        };
        match call(ctx, &host, port, &keys).await {
            Ok(written) => {
                let mut remote = ctx.txns.remote_lock();
                if remote.written.len() + written.len() <= MAX_TRACKED {
                    remote.written.extend(written);
                }
            }
            Err(e) => {
                tracing::warn!(leader, error = %e, "sending transaction markers failed; will retry");
            }
        }
    }
}

/// One WriteTxnMarkers request for `keys`; the markers the leader wrote.
async fn call(
    ctx: &Ctx,
    host: &str,
    port: u16,
    keys: &[MarkerKey],
) -> Result<Vec<MarkerKey>, String> {
    type MarkerGroup = (i64, i16, bool, i32);
    let mut groups: BTreeMap<MarkerGroup, BTreeMap<&str, Vec<i32>>> = BTreeMap::new();
    for k in keys {
        groups
            .entry((k.producer_id, k.epoch, k.commit, k.coordinator_epoch))
            .or_default()
            .entry(k.topic.as_str())
            .or_default()
            .push(k.partition);
    }
    let markers = groups
        .iter()
        .map(|((pid, epoch, commit, coordinator_epoch), topics)| {
            WritableTxnMarker::default()
                .with_producer_id(ProducerId(*pid))
                .with_producer_epoch(*epoch)
                .with_transaction_result(*commit)
                .with_coordinator_epoch(*coordinator_epoch)
                .with_topics(
                    topics
                        .iter()
                        .map(|(topic, partitions)| {
                            WritableTxnMarkerTopic::default()
                                .with_name(TopicName(StrBytes::from_string((*topic).to_string())))
                                .with_partition_indexes(partitions.clone())
                        })
                        .collect(),
                )
        })
        .collect();
    let request = WriteTxnMarkersRequest::default().with_markers(markers);
    let response: WriteTxnMarkersResponse =
        exchange(ctx, host, port, ApiKey::WriteTxnMarkers, 1, &request).await?;
    let mut written = Vec::new();
    for marker in &response.markers {
        for topic in &marker.topics {
            for p in topic.partitions.iter().filter(|p| p.error_code == 0) {
                written.extend(
                    keys.iter()
                        .filter(|k| {
                            k.producer_id == marker.producer_id.0
                                && k.topic == topic.name.0.as_str()
                                && k.partition == p.partition_index
                        })
                        .cloned(),
                );
            }
        }
    }
    Ok(written)
}

/// One request and its answer on a fresh connection, bounded by `CALL_TIMEOUT`.
async fn exchange<Req, Resp>(
    ctx: &Ctx,
    host: &str,
    port: u16,
    api_key: ApiKey,
    version: i16,
    request: &Req,
) -> Result<Resp, String>
where
    Req: kafka_protocol::protocol::Encodable,
    Resp: Decodable,
{
    let client_id = format!("tidelog-txn-coordinator-{}", ctx.node_id());
    let bytes: Bytes = encode_request(api_key, version, 1, Some(&client_id), request)
        .map_err(|e| e.to_string())?;
    let call = async {
        let mut stream = TcpStream::connect((host, port))
            .await
            .map_err(|e| e.to_string())?;
        stream.write_all(&bytes).await.map_err(|e| e.to_string())?;
        let frame = read_frame(&mut stream, MAX_RESPONSE)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the broker closed the connection")?;
        decode_response::<Resp>(frame.freeze(), api_key, version).map_err(|e| e.to_string())
    };
    let (_, response) = tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .map_err(|_| "timed out".to_string())??;
    Ok(response)
}
