//! The group coordinator's requests to a share coordinator on another node:
//! ReadShareGroupStateSummary, InitializeShareGroupState and DeleteShareGroupState v0,
//! on the same kept connection as the leaders' reads and writes (`remote`).

use kafka_protocol::messages::delete_share_group_state_request::{
    DeleteShareGroupStateRequest, DeleteStateData, PartitionData as DeletePartition,
};
use kafka_protocol::messages::delete_share_group_state_response::DeleteShareGroupStateResponse;
use kafka_protocol::messages::initialize_share_group_state_request::{
    InitializeShareGroupStateRequest, InitializeStateData, PartitionData as InitializePartition,
};
use kafka_protocol::messages::initialize_share_group_state_response::InitializeShareGroupStateResponse;
use kafka_protocol::messages::read_share_group_state_summary_request::{
    PartitionData as SummaryPartition, ReadShareGroupStateSummaryRequest, ReadStateSummaryData,
};
use kafka_protocol::messages::read_share_group_state_summary_response::ReadShareGroupStateSummaryResponse;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::StrBytes;
use tidelog_controller::MetadataImage;

use super::records::{ShareSnapshot, StateKey};
use super::remote::Coordinators;
use super::ShareStateError;
use crate::replica::ReplicaManager;

const VERSION: i16 = 0;
/// ReadShareGroupStateSummary v1 answers the delivery-complete count (KIP-1226); a
/// node of an older release (a rolling upgrade) answers only v0.
const SUMMARY_VERSION: i16 = 1;

fn unnamed(node: i32) -> ShareStateError {
    ShareStateError::Unreachable {
        node,
        why: "the answer does not name the share partition".into(),
    }
}

fn outcome(node: i32, code: Option<i16>) -> Result<(), ShareStateError> {
    match code {
        Some(0) => Ok(()),
        Some(code) => Err(ShareStateError::Refused { node, code }),
        None => Err(unnamed(node)),
    }
}

/// The error code the answer gives `key`'s partition, if it names it.
fn code_of(key: &StateKey, mut codes: impl Iterator<Item = (uuid::Uuid, i32, i16)>) -> Option<i16> {
    codes
        .find(|(topic, partition, _)| *topic == key.1 && *partition == key.2)
        .map(|(_, _, code)| code)
}

impl Coordinators {
    pub(super) async fn summary(
        &self,
        replicas: &ReplicaManager,
        image: &MetadataImage,
        node: i32,
        key: &StateKey,
    ) -> Result<Option<ShareSnapshot>, ShareStateError> {
        let request = ReadShareGroupStateSummaryRequest::default()
            .with_group_id(StrBytes::from_string(key.0.clone()))
            .with_topics(vec![ReadStateSummaryData::default()
                .with_topic_id(key.1)
                .with_partitions(vec![SummaryPartition::default()
                    .with_partition(key.2)
                    .with_leader_epoch(-1)])]);
        let asked = self
            .call(
                replicas,
                image,
                node,
                ApiKey::ReadShareGroupStateSummary,
                SUMMARY_VERSION,
                &request,
            )
            .await;
        let response: ReadShareGroupStateSummaryResponse = match asked {
            // An older node closes the connection on a v1 request: once more at
            // v0 (its answer reads as count -1, lag unknown).
            Err(ShareStateError::HungUp { .. }) => {
                self.call(
                    replicas,
                    image,
                    node,
                    ApiKey::ReadShareGroupStateSummary,
                    VERSION,
                    &request,
                )
                .await?
            }
            other => other?,
        };
        let found = response
            .results
            .iter()
            .filter(|r| r.topic_id == key.1)
            .flat_map(|r| r.partitions.iter())
            .find(|p| p.partition == key.2)
            .ok_or_else(|| unnamed(node))?;
        outcome(node, Some(found.error_code))?;
        Ok((found.start_offset >= 0).then(|| ShareSnapshot {
            snapshot_epoch: 0,
            state_epoch: found.state_epoch,
            leader_epoch: found.leader_epoch,
            start_offset: found.start_offset,
            delivery_complete_count: found.delivery_complete_count,
            batches: Vec::new(),
        }))
    }

    pub(super) async fn initialize(
        &self,
        replicas: &ReplicaManager,
        image: &MetadataImage,
        node: i32,
        key: &StateKey,
        state_epoch: i32,
        start_offset: i64,
    ) -> Result<(), ShareStateError> {
        let request = InitializeShareGroupStateRequest::default()
            .with_group_id(StrBytes::from_string(key.0.clone()))
            .with_topics(vec![InitializeStateData::default()
                .with_topic_id(key.1)
                .with_partitions(vec![InitializePartition::default()
                    .with_partition(key.2)
                    .with_state_epoch(state_epoch)
                    .with_start_offset(start_offset)])]);
        let response: InitializeShareGroupStateResponse = self
            .call(
                replicas,
                image,
                node,
                ApiKey::InitializeShareGroupState,
                VERSION,
                &request,
            )
            .await?;
        let codes = response.results.iter().flat_map(|r| {
            r.partitions
                .iter()
                .map(move |p| (r.topic_id, p.partition, p.error_code))
        });
        outcome(node, code_of(key, codes))
    }

    pub(super) async fn delete(
        &self,
        replicas: &ReplicaManager,
        image: &MetadataImage,
        node: i32,
        key: &StateKey,
    ) -> Result<(), ShareStateError> {
        let request = DeleteShareGroupStateRequest::default()
            .with_group_id(StrBytes::from_string(key.0.clone()))
            .with_topics(vec![DeleteStateData::default()
                .with_topic_id(key.1)
                .with_partitions(vec![
                    DeletePartition::default().with_partition(key.2)
                ])]);
        let response: DeleteShareGroupStateResponse = self
            .call(
                replicas,
                image,
                node,
                ApiKey::DeleteShareGroupState,
                VERSION,
                &request,
            )
            .await?;
        let codes = response.results.iter().flat_map(|r| {
            r.partitions
                .iter()
                .map(move |p| (r.topic_id, p.partition, p.error_code))
        });
        outcome(node, code_of(key, codes))
    }
}
