//! The data a Fetch response is encoded from, and the chunks it is encoded to.

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, LeaderIdAndEpoch, NodeEndpoint, SnapshotId,
};
use kafka_protocol::messages::TopicName;
use uuid::Uuid;

/// One piece of an encoded response, in wire order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chunk {
    /// Bytes to write as they are.
    Bytes(Bytes),
    /// `len` bytes that the writer takes from its external source number `id`.
    External {
        /// Index into the writer's list of sources (e.g. file slices).
        id: usize,
        /// Exactly how many bytes the source must supply.
        len: u64,
    },
}

/// The records of one partition.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RecordsPayload {
    /// Null records (Kafka writes -1 / compact 0).
    #[default]
    None,
    /// Records already in memory.
    Bytes(Bytes),
    /// Records the writer copies from external source `id` (exactly `len` bytes).
    External {
        /// Index into the writer's list of sources.
        id: usize,
        /// Length of the record bytes.
        len: u64,
    },
}

/// A Fetch response, field for field as `kafka_protocol::messages::FetchResponse`, minus
/// unknown tagged fields, with the record payloads as [`RecordsPayload`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FetchResponseParts {
    /// Quota throttle.
    pub throttle_time_ms: i32,
    /// Top-level error (v7+).
    pub error_code: i16,
    /// Fetch session id (v7+; must be 0 below v7).
    pub session_id: i32,
    /// Per-topic responses.
    pub topics: Vec<FetchTopicParts>,
    /// Endpoints of leaders named in `current_leader` (v16+ tagged field).
    pub node_endpoints: Vec<NodeEndpoint>,
}

/// One topic of a Fetch response.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FetchTopicParts {
    /// Topic name, written for v4..=12.
    pub name: TopicName,
    /// Topic id, written for v13+.
    pub topic_id: Uuid,
    /// Per-partition responses.
    pub partitions: Vec<FetchPartitionParts>,
}

/// One partition of a Fetch response.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchPartitionParts {
    /// Partition index.
    pub partition_index: i32,
    /// Partition-level error.
    pub error_code: i16,
    /// High watermark.
    pub high_watermark: i64,
    /// Last stable offset.
    pub last_stable_offset: i64,
    /// Log start offset (v5+).
    pub log_start_offset: i64,
    /// Aborted transactions in the returned range (read_committed), null allowed.
    pub aborted_transactions: Option<Vec<AbortedTransaction>>,
    /// Preferred read replica (v11+; must be -1 below).
    pub preferred_read_replica: i32,
    /// Tagged (v12+), omitted when default.
    pub diverging_epoch: EpochEndOffset,
    /// Tagged (v12+), omitted when default.
    pub current_leader: LeaderIdAndEpoch,
    /// Tagged (v12+), omitted when default.
    pub snapshot_id: SnapshotId,
    /// The record bytes.
    pub records: RecordsPayload,
}

impl Default for FetchPartitionParts {
    /// The same defaults as `kafka_protocol`'s `PartitionData`.
    fn default() -> Self {
        Self {
            partition_index: 0,
            error_code: 0,
            high_watermark: 0,
            last_stable_offset: -1,
            log_start_offset: -1,
            aborted_transactions: Some(Vec::new()),
            preferred_read_replica: -1,
            diverging_epoch: EpochEndOffset::default(),
            current_leader: LeaderIdAndEpoch::default(),
            snapshot_id: SnapshotId::default(),
            records: RecordsPayload::None,
        }
    }
}
