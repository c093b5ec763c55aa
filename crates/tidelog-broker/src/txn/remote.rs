//! Calls to other brokers: WriteTxnMarkers, the request Kafka's own transaction
//! coordinators send to the leaders of the partitions a transaction wrote (`markers`),
//! and AddPartitionsToTxn v5, which a leader sends to a transaction's coordinator to add
//! the partition a TV2 client produced to.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::add_partitions_to_txn_response::AddPartitionsToTxnResponse;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest,
};
use kafka_protocol::messages::write_txn_markers_response::WriteTxnMarkersResponse;
use kafka_protocol::messages::{ApiKey, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use tidelog_env::net::Transport;

use crate::replica::Peer;

/// Bound of one WriteTxnMarkers exchange (connect, send, answer).
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest answer read (a few bytes per partition).
const MAX_RESPONSE: usize = 1 << 20;

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

/// One WriteTxnMarkers request for `keys` to the broker at `host:port`; the markers
/// it wrote.
pub(crate) async fn write_markers(
    transport: &dyn Transport,
    node_id: i32,
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
        exchange(transport, node_id, host, port, &request).await?;
    let mut written = Vec::new();
    for marker in &response.markers {
        for topic in &marker.topics {
            // Done: written, or refused as stale (a newer producer epoch or coordinator).
            for p in topic
                .partitions
                .iter()
                .filter(|p| p.error_code == 0 || super::markers::is_superseded(p.error_code))
            {
                if p.error_code != 0 {
                    tracing::warn!(topic = %topic.name.0, partition = p.partition_index, code = p.error_code, "a transaction marker was refused as stale; not sent again");
                }
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

/// One WriteTxnMarkers v1 and its answer on a fresh connection, all within
/// `CALL_TIMEOUT`.
async fn exchange(
    transport: &dyn Transport,
    node_id: i32,
    host: &str,
    port: u16,
    request: &WriteTxnMarkersRequest,
) -> Result<WriteTxnMarkersResponse, String> {
    let started = tokio::time::Instant::now();
    let client_id = format!("tidelog-txn-coordinator-{node_id}");
    let mut peer = Peer::connect(transport, host, port, client_id, CALL_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    let left = CALL_TIMEOUT.saturating_sub(started.elapsed());
    peer.call(ApiKey::WriteTxnMarkers, 1, request, MAX_RESPONSE, left)
        .await
        .map_err(|e| e.to_string())
}

/// AddPartitionsToTxn v5 (the brokers' form, `verify_only` false) to the broker at
/// `host:port` that coordinates `transactional_id`: `topic`/`partition` joins the open
/// transaction of `producer`, as Kafka's brokers ask for a TV2 client's produce. The
/// partition's error code.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn add_partition(
    transport: &dyn Transport,
    node_id: i32,
    host: &str,
    port: u16,
    transactional_id: &str,
    producer: (i64, i16),
    topic: &str,
    partition: i32,
) -> Result<i16, String> {
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                transactional_id.to_string(),
            )))
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_verify_only(false)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(vec![partition])]),
    ]);
    let started = tokio::time::Instant::now();
    let client_id = format!("tidelog-txn-verifier-{node_id}");
    let mut peer = Peer::connect(transport, host, port, client_id, CALL_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    let left = CALL_TIMEOUT.saturating_sub(started.elapsed());
    let response: AddPartitionsToTxnResponse = peer
        .call(ApiKey::AddPartitionsToTxn, 5, &request, MAX_RESPONSE, left)
        .await
        .map_err(|e| e.to_string())?;
    if response.error_code != 0 {
        return Ok(response.error_code);
    }
    response
        .results_by_transaction
        .iter()
        .flat_map(|t| &t.topic_results)
        .flat_map(|t| &t.results_by_partition)
        .find(|p| p.partition_index == partition)
        .map(|p| p.partition_error_code)
        .ok_or_else(|| "the coordinator did not answer for the partition".to_string())
}
