//! The share coordinator on another node, asked as Kafka's share-partition leaders ask
//! it: ReadShareGroupState and WriteShareGroupState v0 over the inter-broker listener.
//! One connection per coordinator node is kept and used one request at a time (a
//! leader writes a share partition's state in turn anyway); a failed exchange drops it
//! and the next call connects again.
//!
//! The conversions between `ShareSnapshot` and the wire are here too, for the handlers
//! that answer these requests (`apis::read_share_group_state`, `..write..`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::read_share_group_state_request::{
    PartitionData as ReadPartition, ReadShareGroupStateRequest, ReadStateData,
};
use kafka_protocol::messages::read_share_group_state_response::{
    self as read_response, ReadShareGroupStateResponse,
};
use kafka_protocol::messages::write_share_group_state_request::{
    self as write_request, PartitionData as WritePartition, WriteShareGroupStateRequest,
    WriteStateData,
};
use kafka_protocol::messages::write_share_group_state_response::WriteShareGroupStateResponse;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tidelog_controller::MetadataImage;

use super::records::{
    delivery_complete_count, ShareSnapshot, StateBatch, StateKey, UNKNOWN_DELIVERY_COMPLETE_COUNT,
};
use super::ShareStateError;
use crate::poison::LockTolerant;
use crate::replica::{Peer, PeerError, ReplicaManager};

/// Bound of one exchange (connect, send, answer).
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest answer read: one share partition's state batches.
const MAX_RESPONSE: usize = 8 << 20;
/// The versions spoken between tidelog nodes.
const READ_VERSION: i16 = 0;
/// v1 carries the delivery-complete count (KIP-1226); v0 is what a node of an older
/// release answers during a rolling upgrade.
const WRITE_VERSION: i16 = 1;
const WRITE_VERSION_BEFORE_KIP_1226: i16 = 0;

type Slot = Arc<tokio::sync::Mutex<Option<Peer>>>;

/// Connections to the share coordinators on other nodes, one per node (bounded by the
/// cluster's size).
pub(super) struct Coordinators {
    node_id: i32,
    slots: Mutex<HashMap<i32, Slot>>,
}

impl Coordinators {
    pub(super) fn new(node_id: i32) -> Coordinators {
        Coordinators {
            node_id,
            slots: Mutex::new(HashMap::new()),
        }
    }

    pub(super) async fn read(
        &self,
        replicas: &ReplicaManager,
        image: &MetadataImage,
        node: i32,
        key: &StateKey,
        leader_epoch: i32,
    ) -> Result<Option<ShareSnapshot>, ShareStateError> {
        let request = ReadShareGroupStateRequest::default()
            .with_group_id(StrBytes::from_string(key.0.clone()))
            .with_topics(vec![ReadStateData::default()
                .with_topic_id(key.1)
                .with_partitions(vec![ReadPartition::default()
                    .with_partition(key.2)
                    .with_leader_epoch(leader_epoch)])]);
        let response: ReadShareGroupStateResponse = self
            .call(
                replicas,
                image,
                node,
                ApiKey::ReadShareGroupState,
                READ_VERSION,
                &request,
            )
            .await?;
        let found = response
            .results
            .iter()
            .filter(|r| r.topic_id == key.1)
            .flat_map(|r| r.partitions.iter())
            .find(|p| p.partition == key.2)
            .ok_or_else(|| ShareStateError::Unreachable {
                node,
                why: "the answer does not name the share partition".into(),
            })?;
        if found.error_code != 0 {
            return Err(ShareStateError::Refused {
                node,
                code: found.error_code,
            });
        }
        Ok(snapshot_of_read(found, leader_epoch))
    }

    pub(super) async fn write(
        &self,
        replicas: &ReplicaManager,
        image: &MetadataImage,
        node: i32,
        key: &StateKey,
        snapshot: &ShareSnapshot,
    ) -> Result<(), ShareStateError> {
        let request = |partition: WritePartition| {
            WriteShareGroupStateRequest::default()
                .with_group_id(StrBytes::from_string(key.0.clone()))
                .with_topics(vec![WriteStateData::default()
                    .with_topic_id(key.1)
                    .with_partitions(vec![partition])])
        };
        let partition = write_partition(key.2, snapshot);
        let asked = self
            .call(
                replicas,
                image,
                node,
                ApiKey::WriteShareGroupState,
                WRITE_VERSION,
                &request(partition.clone()),
            )
            .await;
        let response: WriteShareGroupStateResponse = match asked {
            // A node of an older release closes the connection on a v1 request: once
            // more at v0, without the count (the lag is then not known until a later
            // write). A node that is down or slow is not asked twice.
            Err(ShareStateError::HungUp { .. }) => {
                let without_count =
                    partition.with_delivery_complete_count(UNKNOWN_DELIVERY_COMPLETE_COUNT);
                self.call(
                    replicas,
                    image,
                    node,
                    ApiKey::WriteShareGroupState,
                    WRITE_VERSION_BEFORE_KIP_1226,
                    &request(without_count),
                )
                .await?
            }
            other => other?,
        };
        let code = response
            .results
            .iter()
            .filter(|r| r.topic_id == key.1)
            .flat_map(|r| r.partitions.iter())
            .find(|p| p.partition == key.2)
            .map(|p| p.error_code)
            .ok_or_else(|| ShareStateError::Unreachable {
                node,
                why: "the answer does not name the share partition".into(),
            })?;
        match code {
            0 => Ok(()),
            code => Err(ShareStateError::Refused { node, code }),
        }
    }

    /// One exchange with `node`'s listener, on its kept connection or a new one.
    pub(super) async fn call<Req: Encodable, Resp: Decodable>(
        &self,
        replicas: &ReplicaManager,
        image: &MetadataImage,
        node: i32,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> Result<Resp, ShareStateError> {
        let unreachable = |why: String| ShareStateError::Unreachable { node, why };
        let slot = Arc::clone(self.slots.locked().entry(node).or_default());
        let started = tokio::time::Instant::now();
        let mut held = tokio::time::timeout(CALL_TIMEOUT, slot.lock())
            .await
            .map_err(|_| unreachable("earlier calls did not finish in time".into()))?;
        if held.is_none() {
            let (host, port) = image
                .inter_broker_endpoint(node)
                .ok_or_else(|| unreachable("it is not a registered broker".into()))?;
            let client_id = format!("tidelog-share-{}", self.node_id);
            let left = CALL_TIMEOUT.saturating_sub(started.elapsed());
            let peer = Peer::connect(
                replicas.inter_broker_transport(),
                &host,
                port,
                client_id,
                left,
            )
            .await
            .map_err(|e| unreachable(e.to_string()))?;
            *held = Some(peer);
        }
        let left = CALL_TIMEOUT.saturating_sub(started.elapsed());
        let Some(peer) = held.as_mut() else {
            return Err(unreachable("no connection".into()));
        };
        match peer.call(key, version, request, MAX_RESPONSE, left).await {
            Ok(response) => Ok(response),
            Err(PeerError::Closed) => {
                *held = None;
                Err(ShareStateError::HungUp { node })
            }
            Err(e) => {
                *held = None;
                Err(unreachable(e.to_string()))
            }
        }
    }
}

/// The two wire forms of a state batch: ReadShareGroupState's answer and
/// WriteShareGroupState's request.
trait WireBatch {
    fn batch(&self) -> StateBatch;
}

impl WireBatch for read_response::StateBatch {
    fn batch(&self) -> StateBatch {
        StateBatch {
            first: self.first_offset,
            last: self.last_offset,
            state: self.delivery_state,
            delivery_count: self.delivery_count,
        }
    }
}

impl WireBatch for write_request::StateBatch {
    fn batch(&self) -> StateBatch {
        StateBatch {
            first: self.first_offset,
            last: self.last_offset,
            state: self.delivery_state,
            delivery_count: self.delivery_count,
        }
    }
}

/// A snapshot from the wire (its snapshot epoch is the coordinator's to give).
fn snapshot(
    state_epoch: i32,
    leader_epoch: i32,
    start_offset: i64,
    delivery_complete_count: i32,
    batches: &[impl WireBatch],
) -> ShareSnapshot {
    ShareSnapshot {
        snapshot_epoch: 0,
        state_epoch,
        leader_epoch,
        start_offset,
        delivery_complete_count,
        batches: batches.iter().map(WireBatch::batch).collect(),
    }
}

/// A share partition's state as ReadShareGroupState answers it (`None`: never written,
/// Kafka's start offset -1).
pub(crate) fn snapshot_of_read(
    p: &read_response::PartitionResult,
    leader_epoch: i32,
) -> Option<ShareSnapshot> {
    (p.start_offset >= 0).then(|| {
        snapshot(
            p.state_epoch,
            leader_epoch,
            p.start_offset,
            // ReadShareGroupState does not carry it: the leader counts its window.
            delivery_complete_count(
                &p.state_batches
                    .iter()
                    .map(WireBatch::batch)
                    .collect::<Vec<_>>(),
            ),
            &p.state_batches,
        )
    })
}

/// The answer of ReadShareGroupState for one share partition's stored state.
pub(crate) fn read_result(
    partition: i32,
    stored: Option<&ShareSnapshot>,
) -> read_response::PartitionResult {
    let result = read_response::PartitionResult::default().with_partition(partition);
    match stored {
        None => result.with_start_offset(-1),
        Some(s) => result
            .with_state_epoch(s.state_epoch)
            .with_start_offset(s.start_offset)
            .with_state_batches(
                s.batches
                    .iter()
                    .map(|b| {
                        read_response::StateBatch::default()
                            .with_first_offset(b.first)
                            .with_last_offset(b.last)
                            .with_delivery_state(b.state)
                            .with_delivery_count(b.delivery_count)
                    })
                    .collect(),
            ),
    }
}

fn write_partition(partition: i32, s: &ShareSnapshot) -> WritePartition {
    WritePartition::default()
        .with_partition(partition)
        .with_state_epoch(s.state_epoch)
        .with_leader_epoch(s.leader_epoch)
        .with_start_offset(s.start_offset)
        .with_delivery_complete_count(s.delivery_complete_count)
        .with_state_batches(
            s.batches
                .iter()
                .map(|b| {
                    write_request::StateBatch::default()
                        .with_first_offset(b.first)
                        .with_last_offset(b.last)
                        .with_delivery_state(b.state)
                        .with_delivery_count(b.delivery_count)
                })
                .collect(),
        )
}

/// The snapshot a WriteShareGroupState partition carries (its snapshot epoch is the
/// coordinator's to give), or why it is not a state a leader could have written.
pub(crate) fn snapshot_of_write(p: &WritePartition) -> Result<ShareSnapshot, String> {
    if p.start_offset < 0 {
        return Err(format!("start offset {} is not an offset", p.start_offset));
    }
    let mut below = p.start_offset;
    for b in &p.state_batches {
        if b.first_offset < below || b.last_offset < b.first_offset {
            return Err(format!(
                "state batch {}..{} is out of order or below the start offset",
                b.first_offset, b.last_offset
            ));
        }
        // 3 is ARCHIVING: a record waiting for its dead-letter copy (KIP-1191).
        if !matches!(b.delivery_state, 0 | 2 | 3 | 4) || b.delivery_count < 0 {
            return Err(format!(
                "state batch {}..{} has delivery state {} count {}",
                b.first_offset, b.last_offset, b.delivery_state, b.delivery_count
            ));
        }
        below = b.last_offset.saturating_add(1);
    }
    Ok(snapshot(
        p.state_epoch,
        p.leader_epoch,
        p.start_offset,
        // A v0 writer sends none: Kafka's -1 (the lag is then not known).
        p.delivery_complete_count
            .max(UNKNOWN_DELIVERY_COMPLETE_COUNT),
        &p.state_batches,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(first: i64, last: i64, state: i8, count: i16) -> write_request::StateBatch {
        write_request::StateBatch::default()
            .with_first_offset(first)
            .with_last_offset(last)
            .with_delivery_state(state)
            .with_delivery_count(count)
    }

    #[test]
    fn a_written_state_reads_back_as_it_was_sent() {
        let snapshot = ShareSnapshot {
            snapshot_epoch: 0,
            state_epoch: 2,
            leader_epoch: 5,
            start_offset: 10,
            // 10..=12 acknowledged, 14..=20 archived.
            delivery_complete_count: 10,
            batches: vec![
                StateBatch {
                    first: 10,
                    last: 12,
                    state: 2,
                    delivery_count: 1,
                },
                StateBatch {
                    first: 13,
                    last: 13,
                    state: 0,
                    delivery_count: 3,
                },
                StateBatch {
                    first: 14,
                    last: 20,
                    state: 4,
                    delivery_count: 5,
                },
            ],
        };
        let on_the_wire = write_partition(0, &snapshot);
        assert_eq!(on_the_wire.delivery_complete_count, 10);
        let stored = snapshot_of_write(&on_the_wire).unwrap();
        assert_eq!(stored, snapshot);
        // From a v0 writer (no count): not known.
        let from_v0 = snapshot_of_write(&on_the_wire.clone().with_delivery_complete_count(-1));
        assert_eq!(from_v0.unwrap().delivery_complete_count, -1);
        let answer = read_result(0, Some(&stored));
        assert_eq!(snapshot_of_read(&answer, 5), Some(snapshot));
        assert_eq!(
            snapshot_of_read(&read_result(0, None), 5),
            None,
            "never written: -1"
        );
    }

    #[test]
    fn a_state_no_leader_could_have_written_is_refused() {
        let with = |start: i64, batches| {
            WritePartition::default()
                .with_start_offset(start)
                .with_state_batches(batches)
        };
        assert!(snapshot_of_write(&with(-1, vec![])).is_err(), "no start");
        assert!(
            snapshot_of_write(&with(10, vec![batch(5, 9, 2, 1)])).is_err(),
            "below start"
        );
        assert!(
            snapshot_of_write(&with(0, vec![batch(3, 2, 2, 1)])).is_err(),
            "backwards"
        );
        assert!(
            snapshot_of_write(&with(0, vec![batch(0, 5, 0, 1), batch(4, 6, 2, 1)])).is_err(),
            "overlapping"
        );
        assert!(
            snapshot_of_write(&with(0, vec![batch(0, 1, 1, 1)])).is_err(),
            "ACQUIRED is not stored"
        );
        assert!(
            snapshot_of_write(&with(0, vec![batch(0, 1, 2, -1)])).is_err(),
            "negative count"
        );
        assert!(snapshot_of_write(&with(0, vec![batch(0, 1, 2, 1), batch(2, 9, 4, 5)])).is_ok());
        // ARCHIVING (KIP-1191's dead-letter copy under way) is a leader's state too.
        assert!(snapshot_of_write(&with(0, vec![batch(0, 1, 3, 1), batch(2, 9, 4, 5)])).is_ok());
    }
}
