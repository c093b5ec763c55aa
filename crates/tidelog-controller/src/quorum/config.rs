//! [`QuorumConfig`]: how one controller voter runs.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use openraft::{Config, SnapshotPolicy};
use tidelog_env::net::{TcpTransport, Transport};

use super::error::QuorumError;
use super::peers::QuorumPeers;

/// How one voter runs. [`QuorumConfig::new`] fills in production defaults.
#[derive(Debug, Clone)]
pub struct QuorumConfig {
    pub node_id: i32,
    pub peers: QuorumPeers,
    /// Address to bind (`--controller-listen`); peers reach this node at its entry in
    /// `peers`, which may differ (e.g. `0.0.0.0:9093` here, a host name there). `None`:
    /// no controller listener, for a one-voter quorum that no other node talks to (the
    /// single node `tidelog serve` runs with no `--quorum`).
    pub listen: Option<String>,
    /// Directory of the quorum's files (e.g. `<data-dir>/__cluster_metadata/quorum`).
    pub dir: PathBuf,
    /// Identical on every voter; RPCs from another cluster id are refused.
    pub cluster_id: String,
    pub heartbeat_interval: Duration,
    /// A follower that hears no leader for a random time in this range starts an
    /// election.
    pub election_timeout_min: Duration,
    pub election_timeout_max: Duration,
    /// How long a write (or a leadership check) may wait for a majority.
    pub write_timeout: Duration,
    /// A snapshot of the image is taken after this many log entries.
    pub snapshot_every_entries: u64,
    /// Entries kept in the log behind the latest snapshot, so a briefly absent voter
    /// catches up from the log rather than by a snapshot.
    pub entries_kept_after_snapshot: u64,
    /// How this voter listens and reaches the others: TCP, or an in-memory network in
    /// a test.
    pub transport: Arc<dyn Transport>,
}

impl QuorumConfig {
    /// Defaults: heartbeats every 100 ms, elections after 0.5–1 s of silence, writes
    /// bounded by 5 s, a snapshot every 10 000 entries keeping 1 000 behind it; the
    /// cluster id derived from the voter list; listening on this node's own entry.
    pub fn new(node_id: i32, peers: QuorumPeers, dir: impl Into<PathBuf>) -> QuorumConfig {
        QuorumConfig {
            node_id,
            listen: peers.address(node_id).map(str::to_owned),
            cluster_id: peers.derived_cluster_id(),
            peers,
            dir: dir.into(),
            // A killed leader is replaced within about a second: openraft's voters
            // refuse a candidate until the longest election timeout (their leader lease)
            // has passed since the leader's last heartbeat, so that timeout bounds the
            // failover. Five heartbeats fit in the shortest, so a leader whose heartbeats
            // are merely late by a few hundred milliseconds keeps its office.
            heartbeat_interval: Duration::from_millis(100),
            election_timeout_min: Duration::from_millis(500),
            election_timeout_max: Duration::from_millis(1000),
            write_timeout: Duration::from_secs(5),
            snapshot_every_entries: 10_000,
            entries_kept_after_snapshot: 1_000,
            transport: Arc::new(TcpTransport),
        }
    }

    /// A one-voter quorum of this node alone, with no controller listener: the single
    /// node. Its voter entry has no address (nobody dials it); `cluster_id` is the data
    /// directory's own (`meta.properties`).
    pub fn single(node_id: i32, dir: impl Into<PathBuf>, cluster_id: String) -> QuorumConfig {
        let mut config = QuorumConfig::new(node_id, QuorumPeers::single(node_id, ""), dir);
        config.listen = None;
        config.cluster_id = cluster_id;
        config
    }

    pub(crate) fn raft_config(&self) -> Result<Config, QuorumError> {
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let config = Config {
            cluster_name: self.cluster_id.clone(),
            heartbeat_interval: millis(self.heartbeat_interval),
            election_timeout_min: millis(self.election_timeout_min),
            election_timeout_max: millis(self.election_timeout_max),
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_every_entries.max(1)),
            max_in_snapshot_log_to_keep: self.entries_kept_after_snapshot,
            // JSON makes a chunk about 3-4 times its size on the wire.
            snapshot_max_chunk_size: 1024 * 1024,
            install_snapshot_timeout: millis(self.write_timeout).max(1000),
            ..Config::default()
        };
        config
            .validate()
            .map_err(|e| QuorumError::Config(e.to_string()))
    }
}
