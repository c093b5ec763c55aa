//! Transaction markers for partitions that another broker leads (a cluster): the
//! coordinator asks that broker to write them with WriteTxnMarkers, the request Kafka's
//! own coordinators send. Marker writing (`markers::write_all`) runs under the
//! coordinator's lock and must not wait on the network, so it only records what it
//! wants here; the background task sends the wanted markers (`send_wanted`) and records
//! which were written, and the next completion attempt finds them done.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest,
};
use kafka_protocol::messages::write_txn_markers_response::WriteTxnMarkersResponse;
use kafka_protocol::messages::{ApiKey, ProducerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use tidelog_protocol::client::{decode_response, encode_request};
use tidelog_protocol::frame::read_frame;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::context::Ctx;

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

/// Markers waiting to be sent, and those another broker confirmed.
#[derive(Debug, Default)]
pub(crate) struct RemoteMarkers {
    wanted: BTreeSet<MarkerKey>,
    written: BTreeSet<MarkerKey>,
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
}

/// Sends every wanted marker to its partition's leader; records those written.
pub(crate) async fn send_wanted(ctx: &Ctx) {
    let wanted = std::mem::take(&mut ctx.txns.remote_lock().wanted);
    if wanted.is_empty() {
        return;
    }
    let image = ctx.metadata.image();
    let mut by_leader: BTreeMap<i32, Vec<MarkerKey>> = BTreeMap::new();
    for key in wanted {
        let leader = image
            .topic(&key.topic)
            .and_then(|t| t.partitions.get(&key.partition))
            .map_or(-1, |p| p.leader);
        // Led here (or by no one): the local path writes it, or the retry asks again.
        if leader >= 0 && leader != ctx.node_id() {
            by_leader.entry(leader).or_default().push(key);
        }
    }
    for (leader, keys) in by_leader {
        let Some(endpoint) = image
            .broker(leader)
            .filter(|b| !b.fenced)
            .and_then(|b| b.listeners.first())
        else {
            continue;
        };
        match call(ctx, &endpoint.host, endpoint.port, &keys).await {
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
    let client_id = format!("tidelog-txn-coordinator-{}", ctx.node_id());
    let bytes = encode_request(ApiKey::WriteTxnMarkers, 1, 1, Some(&client_id), &request)
        .map_err(|e| e.to_string())?;
    let exchange = async {
        let mut stream = TcpStream::connect((host, port))
            .await
            .map_err(|e| e.to_string())?;
        stream.write_all(&bytes).await.map_err(|e| e.to_string())?;
        let frame = read_frame(&mut stream, MAX_RESPONSE)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the leader closed the connection")?;
        decode_response::<WriteTxnMarkersResponse>(frame.freeze(), ApiKey::WriteTxnMarkers, 1)
            .map_err(|e| e.to_string())
    };
    let (_, response) = tokio::time::timeout(CALL_TIMEOUT, exchange)
        .await
        .map_err(|_| "timed out".to_string())??;
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
