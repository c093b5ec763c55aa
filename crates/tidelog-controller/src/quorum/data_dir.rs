//! Starting this node's controller voter on its data directory.
//!
//! `<data-dir>/__cluster_metadata/` holds the voter's files in `quorum/` and, for a node
//! started without `--quorum` (a one-voter quorum of itself), `meta.properties`: the
//! cluster id, random at the first start, and the node id the directory belongs to. What
//! the directory holds decides how the voter starts:
//! - nothing yet: a fresh voter (a single node also writes `meta.properties`);
//! - `quorum/`: the voter as it was, provided it is started with the same voters
//!   (else it refuses, see [`super::QuorumError::VotersMismatch`]);
//! - the metadata log of a single node of an earlier release: migrated into a fresh
//!   one-voter quorum when started without `--quorum`, refused with `--quorum`
//!   (see `crate::legacy`).

use std::path::{Path, PathBuf};

use super::{QuorumConfig, QuorumError, QuorumPeers, RaftQuorum};
use crate::error::ControllerError;
use crate::legacy;
use crate::meta_properties::{bind_node_id, load_or_create_cluster_id, stored_cluster_id};

/// Name of the metadata directory inside a node's data directory.
pub const METADATA_DIR_NAME: &str = "__cluster_metadata";
const QUORUM_DIR_NAME: &str = "quorum";

/// `<data_dir>/__cluster_metadata`.
pub fn metadata_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(METADATA_DIR_NAME)
}

impl QuorumConfig {
    /// The voter of a node started without `--quorum`: a one-voter quorum of this node,
    /// with no controller listener, in `<data_dir>/__cluster_metadata/quorum`. Its
    /// cluster id is the data directory's own (random at the first start), and the
    /// directory is bound to `node_id` (another id is refused).
    pub fn single_node(data_dir: &Path, node_id: i32) -> Result<QuorumConfig, QuorumError> {
        let meta_dir = metadata_dir(data_dir);
        std::fs::create_dir_all(&meta_dir).map_err(|e| ControllerError::io(&meta_dir, e))?;
        let cluster_id = load_or_create_cluster_id(&meta_dir)?;
        bind_node_id(&meta_dir, node_id)?;
        Ok(QuorumConfig::single(
            node_id,
            meta_dir.join(QUORUM_DIR_NAME),
            cluster_id,
        ))
    }

    /// The voter of a node started with `--quorum`, in
    /// `<data_dir>/__cluster_metadata/quorum`. A directory first written by a single node
    /// keeps its own cluster id (and node id).
    pub fn in_data_dir(
        data_dir: &Path,
        node_id: i32,
        peers: QuorumPeers,
    ) -> Result<QuorumConfig, QuorumError> {
        let meta_dir = metadata_dir(data_dir);
        let mut config = QuorumConfig::new(node_id, peers, meta_dir.join(QUORUM_DIR_NAME));
        if let Some(cluster_id) = stored_cluster_id(&meta_dir)? {
            bind_node_id(&meta_dir, node_id)?;
            config.cluster_id = cluster_id;
        }
        Ok(config)
    }

    /// Whether this is a single node's quorum ([`QuorumConfig::single`]).
    pub fn is_single_node(&self) -> bool {
        self.listen.is_none()
            && self.peers.len() == 1
            && self.peers.address(self.node_id) == Some("")
    }
}

/// Starts the voter `config` describes (its `dir` is `__cluster_metadata/quorum` of the
/// node's data directory), first migrating a single node's metadata of an earlier
/// release, or refusing it (see the module docs).
pub async fn start_voter(config: QuorumConfig) -> Result<RaftQuorum, QuorumError> {
    let meta_dir = config
        .dir
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let legacy = legacy::legacy_files(&meta_dir)?;
    if !legacy.is_empty() {
        if quorum_exists(&config.dir) {
            // Migrated, but the old files were not moved aside before a crash.
            legacy::set_aside(&meta_dir)?;
        } else if config.is_single_node() {
            let migrated = legacy::migrate(&meta_dir, &config).await?;
            tracing::info!(
                node_id = config.node_id,
                "migrated this single node's metadata to its one-voter Raft controller: {migrated}"
            );
        } else {
            return Err(legacy::refusal(&meta_dir));
        }
    }
    RaftQuorum::start(config).await
}

fn quorum_exists(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some())
}
