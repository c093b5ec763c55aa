//! The openraft type configuration. Nothing here leaves the `quorum` module: the
//! broker sees only [`crate::MetadataRecord`]s and the quorum's own types.

use std::io::Cursor;

use serde::{Deserialize, Serialize};

use crate::record::MetadataRecord;

openraft::declare_raft_types!(
    /// Node ids are our positive `node.id`s widened to `u64`; a node's `BasicNode`
    /// address is its controller listener.
    pub(crate) TypeConfig:
        D = MetadataBatch,
        R = Applied,
        NodeId = u64,
        Node = openraft::BasicNode,
        SnapshotData = Cursor<Vec<u8>>,
);

pub(crate) type NodeId = u64;
pub(crate) type LogId = openraft::LogId<NodeId>;
pub(crate) type Vote = openraft::Vote<NodeId>;
pub(crate) type Entry = openraft::Entry<TypeConfig>;
pub(crate) type StorageError = openraft::StorageError<NodeId>;
pub(crate) type SnapshotMeta = openraft::SnapshotMeta<NodeId, openraft::BasicNode>;
pub(crate) type StoredMembership = openraft::StoredMembership<NodeId, openraft::BasicNode>;

/// One Raft log entry's payload: records appended atomically (one request's worth).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MetadataBatch {
    pub(crate) records: Vec<MetadataRecord>,
}

/// What applying an entry did: the metadata offsets its records received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Applied {
    /// `None` for an entry without records (Raft's own blank and membership entries).
    pub(crate) first_offset: Option<u64>,
    pub(crate) last_offset: Option<u64>,
}

pub(crate) fn to_node_id(id: i32) -> NodeId {
    u64::try_from(id).unwrap_or(0)
}

/// Our ids are positive i32s, so every id the quorum knows converts back.
pub(crate) fn from_node_id(id: NodeId) -> i32 {
    i32::try_from(id).unwrap_or(-1)
}

/// An I/O failure as openraft's storage error (which shuts the Raft node down: the
/// quorum must not run on a log it cannot write).
pub(crate) fn io_write_error(e: impl std::error::Error + 'static) -> StorageError {
    openraft::StorageIOError::write(&e).into()
}

pub(crate) fn io_read_error(e: impl std::error::Error + 'static) -> StorageError {
    openraft::StorageIOError::read(&e).into()
}
