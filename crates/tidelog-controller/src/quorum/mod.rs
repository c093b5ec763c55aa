//! The Raft controller quorum: the metadata log replicated across 1, 3 or 5 voters
//! with openraft (one voter: a node started without `--quorum`), behind our own [`MetadataQuorum`] trait so that nothing outside this
//! module sees openraft types. See `docs/controller-quorum.md` for the design.
//!
//! - [`RaftQuorum`]: one voter (openraft + disk storage + TCP RPC server), started on
//!   a node's data directory by [`start_voter`] (`data_dir`).
//! - [`QuorumController`]: the controller on top — the leader plans requests with the
//!   [`crate::ops`] functions and proposes their
//!   records; followers forward them to the leader. Broker registration, heartbeats and
//!   fencing after the session timeout live here too.
//! - [`ControllerClient`]: the same requests from a broker-only node, over the
//!   controller port, plus a long-poll fetch of the image to follow.
//! - [`ControllerHandle`]: either of the two, for the broker.
//! - [`QuorumPeers`]: the `--quorum 1@host:port,...` voter list.

mod api;
mod client;
mod config;
mod controller;
mod data_dir;
mod error;
mod file_frame;
mod forward;
mod handle;
mod log_store;
mod network;
mod node;
mod peers;
mod rpc;
mod server;
mod state_machine;
mod types;

use std::future::Future;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, watch};

use crate::image::MetadataImage;
use crate::record::MetadataRecord;

pub use crate::ops::{AlterPartition, ElectionKind, PartitionError, Reassignment, TopicPartition};
pub use api::PartitionOutcomes;
pub use client::ControllerClient;
pub use config::QuorumConfig;
pub use controller::{
    BrokerTraffic, ControllerOptions, HeartbeatReply, QuorumController,
    DEFAULT_LEADER_IMBALANCE_PERCENT, DEFAULT_SESSION_TIMEOUT,
};
pub use data_dir::{metadata_dir, start_voter, METADATA_DIR_NAME};
pub use error::{QuorumError, RequestError};
pub use handle::ControllerHandle;
pub use node::RaftQuorum;
pub use peers::{PeersError, QuorumPeers, MAX_VOTERS};

/// A replicated, ordered log of metadata records and the image it builds.
///
/// Writes go through the leader only; every voter applies committed records to its own
/// [`MetadataImage`] in the same order with the same offsets.
pub trait MetadataQuorum: Send + Sync + 'static {
    fn node_id(&self) -> i32;

    /// Appends `records` as one atomic entry and waits until a majority stored it and
    /// this node applied it. Fails with `NotController` on a non-leader and with
    /// `Timeout` when no majority answers in time (the entry may still commit later).
    fn propose(
        &self,
        records: Vec<MetadataRecord>,
    ) -> impl Future<Output = Result<Committed, QuorumError>> + Send;

    /// Checks that this node leads and waits until its image includes every entry of
    /// its log (so every record committed before now): plan against the image only
    /// after. A deposed leader may pass this check, but its proposals cannot commit.
    fn sync_leader(&self) -> impl Future<Output = Result<(), QuorumError>> + Send;

    /// The image as of the last applied record.
    fn image(&self) -> Arc<MetadataImage>;

    /// Changes whenever committed records (or an installed snapshot) change the image.
    fn watch_image(&self) -> watch::Receiver<Arc<MetadataImage>>;

    /// Every committed record batch from now on, in order. A subscriber that falls
    /// more than a few thousand batches behind gets `Lagged` and should resynchronise
    /// from [`MetadataQuorum::image`].
    fn subscribe(&self) -> broadcast::Receiver<CommittedEvent>;

    /// Leader, voters and how far each one's log reaches (what DescribeQuorum shows).
    fn status(&self) -> QuorumStatus;
}

/// Where a proposed batch landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    /// Metadata offsets of the first and last record (`None` for an empty batch).
    pub first_offset: Option<u64>,
    pub last_offset: Option<u64>,
    /// Raft log index of the entry.
    pub log_index: u64,
}

/// What a subscriber to committed metadata sees.
#[derive(Debug, Clone)]
pub enum CommittedEvent {
    /// Records applied in order; record `i` has offset `first_offset + i`.
    Records {
        first_offset: u64,
        records: Arc<[MetadataRecord]>,
    },
    /// This voter was too far behind and replaced its image with the leader's
    /// snapshot: take the whole image rather than the missing records.
    Snapshot(Arc<MetadataImage>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum QuorumRole {
    Leader,
    Follower,
    Candidate,
    Learner,
    Shutdown,
}

/// One voter's view of the quorum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumStatus {
    pub node_id: i32,
    pub role: QuorumRole,
    pub term: u64,
    pub leader: Option<i32>,
    /// Raft log index after this node's last entry.
    pub log_end: u64,
    /// Raft log index after the last entry applied to this node's image.
    pub applied_end: u64,
    /// Raft log index after the last entry covered by this node's snapshot.
    pub snapshot_end: u64,
    /// Snapshots this node installed from a leader since it started.
    pub snapshots_installed: u64,
    pub voters: Vec<VoterStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoterStatus {
    pub node_id: i32,
    pub address: String,
    /// Log end as the reporting node knows it: exact for itself; for the others, what
    /// the leader knows they replicated (`None` when reported by a follower).
    pub log_end: Option<u64>,
    /// Entries behind the leader's log end (`None` when reported by a follower).
    pub lag: Option<u64>,
}
