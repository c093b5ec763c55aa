//! [`RaftQuorum`]: one controller voter — openraft, its disk storage and its TCP
//! server — behind the [`MetadataQuorum`] trait.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use openraft::error::{ClientWriteError, Fatal, RaftError};
use openraft::metrics::WaitError;
use openraft::{BasicNode, Raft, ServerState};
use tidelog_env::net::{Listener, TcpAcceptor, Transport};
use tokio::net::TcpListener;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

use super::config::QuorumConfig;
use super::error::QuorumError;
use super::log_store::{remove_temp_files, LogStore, WriterThread};
use super::network::PeerConnection;
use super::peers::QuorumPeers;
use super::rpc::{RpcRequest, RpcResponse};
use super::server::{self, ForwardHandler, ServerShared};
use super::state_machine::{close_snapshots, Published, SnapshotSlot, StateMachine};
use super::types::{from_node_id, to_node_id, MetadataBatch, NodeId, TypeConfig};
use super::{Committed, CommittedEvent, MetadataQuorum, QuorumRole, QuorumStatus, VoterStatus};
use crate::durable::sync_dir;
use crate::error::ControllerError;
use crate::image::MetadataImage;
use crate::record::MetadataRecord;

/// Committed batches kept for slow subscribers before they see `Lagged` (and should
/// resynchronise from [`MetadataQuorum::image`]).
const EVENT_BUFFER: usize = 4096;

/// One running voter of the controller quorum.
pub struct RaftQuorum {
    node_id: i32,
    peers: QuorumPeers,
    cluster_id: String,
    raft: Raft<TypeConfig>,
    shared: Arc<ServerShared>,
    published: Arc<Published>,
    image_rx: watch::Receiver<Arc<MetadataImage>>,
    write_timeout: Duration,
    /// The leader lease (openraft's is the longest election timeout).
    election_timeout_max: Duration,
    /// Where the RPC server listens; `None` for a voter no other node talks to.
    local_addr: Option<std::net::SocketAddr>,
    /// How this voter reaches the others (and the controller forwards to the leader).
    transport: Arc<dyn Transport>,
    shutdown_tx: watch::Sender<bool>,
    server: Mutex<Option<JoinHandle<()>>>,
    /// Closed at shutdown, so no snapshot builder writes after it.
    snapshots: Arc<Mutex<SnapshotSlot>>,
    /// The Raft log's writer thread, waited for at shutdown (it ends once openraft has
    /// dropped the log store and the queued writes are done).
    log_writer: WriterThread,
    /// Set while a stopping leader hands over: it proposes nothing more, so the voter
    /// it hands to holds its whole log.
    stepping_down: AtomicBool,
}

impl std::fmt::Debug for RaftQuorum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftQuorum")
            .field("node_id", &self.node_id)
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl RaftQuorum {
    /// Listens on `config.listen` (if any) over the config's transport and starts the
    /// voter.
    pub async fn start(config: QuorumConfig) -> Result<RaftQuorum, QuorumError> {
        let listener =
            match &config.listen {
                Some(addr) => Some(config.transport.listen(addr).await.map_err(|source| {
                    QuorumError::Bind {
                        addr: addr.clone(),
                        source,
                    }
                })?),
                None => None,
            };
        RaftQuorum::launch(config, listener).await
    }

    /// Starts the voter on an already bound listener (tests bind port 0 first to learn
    /// the addresses that go into the voter list).
    pub async fn start_on(
        config: QuorumConfig,
        listener: TcpListener,
    ) -> Result<RaftQuorum, QuorumError> {
        let addr = config.listen.clone().unwrap_or_default();
        let listener =
            TcpAcceptor::new(listener).map_err(|source| QuorumError::Bind { addr, source })?;
        RaftQuorum::launch(config, Some(Box::new(listener))).await
    }

    async fn launch(
        config: QuorumConfig,
        listener: Option<Box<dyn Listener>>,
    ) -> Result<RaftQuorum, QuorumError> {
        if !config.peers.contains(config.node_id) {
            return Err(QuorumError::Config(format!(
                "node id {} is not a voter of the quorum {}",
                config.node_id, config.peers
            )));
        }
        let raft_config = Arc::new(config.raft_config()?);
        let (image_tx, image_rx) = watch::channel(Arc::new(MetadataImage::new(&config.cluster_id)));
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let published = Arc::new(Published {
            image: image_tx,
            events,
            snapshots_installed: Default::default(),
        });
        // Opening reads (and may repair) the files: off the async workers.
        let (dir, cluster_id, publish) = (
            config.dir.clone(),
            config.cluster_id.clone(),
            Arc::clone(&published),
        );
        let (log_store, state_machine) =
            tokio::task::spawn_blocking(move || open_storage(&dir, &cluster_id, publish))
                .await
                .map_err(|e| {
                    QuorumError::Raft(format!("opening the quorum's files panicked: {e}"))
                })??;
        let log_writer = log_store.writer_thread();
        let snapshots = state_machine.snapshot_slot();
        let network = super::network::Network {
            cluster_id: config.cluster_id.clone(),
            node_id: to_node_id(config.node_id),
            transport: Arc::clone(&config.transport),
        };
        let node_id = to_node_id(config.node_id);
        let raft = Raft::new(node_id, raft_config, network, log_store, state_machine)
            .await
            .map_err(|e| QuorumError::Raft(e.to_string()))?;
        let local_addr = listener.as_ref().map(|l| l.local_addr());
        let shared = Arc::new(ServerShared {
            raft: raft.clone(),
            cluster_id: config.cluster_id.clone(),
            forward: OnceLock::new(),
        });
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let quorum = RaftQuorum {
            node_id: config.node_id,
            peers: config.peers.clone(),
            cluster_id: config.cluster_id.clone(),
            raft,
            shared,
            published,
            image_rx,
            write_timeout: config.write_timeout,
            election_timeout_max: config.election_timeout_max,
            local_addr,
            transport: Arc::clone(&config.transport),
            shutdown_tx,
            server: Mutex::new(None),
            snapshots,
            log_writer,
            stepping_down: AtomicBool::new(false),
        };
        // The voters on disk are checked before this node answers any peer.
        if let Err(e) = quorum.initialize(&config.peers).await {
            let _ = quorum.shutdown().await;
            return Err(e);
        }
        if let Some(listener) = listener {
            let server = tokio::spawn(server::serve(
                listener,
                Arc::clone(&quorum.shared),
                shutdown_rx,
            ));
            *quorum.server.lock().unwrap_or_else(|p| p.into_inner()) = Some(server);
        }
        match local_addr {
            Some(addr) => {
                tracing::info!(node_id = config.node_id, %addr, quorum = %config.peers, "controller quorum voter started")
            }
            None => tracing::info!(
                node_id = config.node_id,
                "controller started: a one-voter quorum of this node"
            ),
        }
        Ok(quorum)
    }

    /// A brand-new voter proposes the configured voter list as the first membership.
    /// Every voter does so with the same list, which openraft allows; a voter with any
    /// state on disk already has it.
    async fn initialize(&self, peers: &QuorumPeers) -> Result<(), QuorumError> {
        let initialized = self
            .raft
            .is_initialized()
            .await
            .map_err(|e| QuorumError::Raft(e.to_string()))?;
        let members: BTreeMap<NodeId, BasicNode> = peers
            .voters()
            .map(|(id, addr)| (to_node_id(id), BasicNode::new(addr)))
            .collect();
        if initialized {
            let metrics = self.raft.metrics().borrow().clone();
            let stored: BTreeMap<NodeId, BasicNode> = metrics
                .membership_config
                .membership()
                .nodes()
                .map(|(id, node)| (*id, node.clone()))
                .collect();
            // Other voters than the log's would be another quorum: this node would lead
            // (or wait for) a cluster that does not hold its topics. Refuse rather than
            // hide them.
            if !stored.keys().eq(members.keys()) {
                return Err(QuorumError::VotersMismatch {
                    stored: describe_voters(&stored),
                    configured: describe_voters(&members),
                });
            }
            if stored != members {
                // Same voters, other addresses: the log's win (changing them needs a
                // membership change, not a new flag).
                tracing::warn!(configured = %peers, stored = %describe_voters(&stored), "the configured voter addresses differ from those recorded in the metadata log; using the recorded ones");
            }
            return Ok(());
        }
        match self.raft.initialize(members).await {
            Ok(()) => Ok(()),
            // Another voter's election reached us first: we are initialized.
            Err(RaftError::APIError(e)) => {
                tracing::debug!(error = %e, "quorum already initialized");
                Ok(())
            }
            Err(RaftError::Fatal(e)) => Err(QuorumError::Raft(e.to_string())),
        }
    }

    /// The voters, as configured.
    pub fn peers(&self) -> &QuorumPeers {
        &self.peers
    }

    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// The address the RPC server listens on (`None`: no listener).
    pub fn local_addr(&self) -> Option<std::net::SocketAddr> {
        self.local_addr
    }

    /// Waits (at most `timeout`) until this voter leads the quorum; whether it does.
    pub async fn wait_until_leader(&self, timeout: Duration) -> bool {
        self.raft
            .wait(Some(timeout))
            .metrics(
                |m| m.state == ServerState::Leader && m.current_leader == Some(m.id),
                "this voter leads",
            )
            .await
            .is_ok()
    }

    pub(crate) fn set_forward_handler(&self, handler: Arc<dyn ForwardHandler>) {
        let _ = self.shared.forward.set(handler);
    }

    pub(crate) fn transport(&self) -> Arc<dyn Transport> {
        Arc::clone(&self.transport)
    }

    pub(crate) fn write_timeout(&self) -> Duration {
        self.write_timeout
    }

    /// A leader that is about to stop hands its leadership to another voter (Raft's
    /// leadership transfer): it stops proposing, waits until a voter holds its whole
    /// log, asks that voter to stand for election at once, and waits until a new leader
    /// is known. Without this the others wait out the leader lease and an election
    /// timeout (about 3-4 s) before one of them leads, and every controller request
    /// fails meanwhile. Returns the new leader; `None` when this voter does not lead,
    /// is the only voter, or the hand-over did not finish within `within` (then the
    /// quorum elects a leader as after a crash).
    pub async fn hand_over_leadership(&self, within: Duration) -> Option<i32> {
        let me = to_node_id(self.node_id);
        let metrics = self.raft.metrics().borrow().clone();
        if metrics.state != ServerState::Leader {
            return None;
        }
        let membership = metrics.membership_config.membership().clone();
        let others: Vec<NodeId> = membership.voter_ids().filter(|v| *v != me).collect();
        if others.is_empty() {
            return None;
        }
        self.stepping_down.store(true, Ordering::Release);
        let deadline = tokio::time::Instant::now() + within;
        // The voter that holds all of this leader's log (an entry proposed just before
        // may still be on its way).
        let (target, term) = loop {
            let m = self.raft.metrics().borrow().clone();
            if m.state != ServerState::Leader {
                return m
                    .current_leader
                    .map(from_node_id)
                    .filter(|l| *l != self.node_id);
            }
            let caught_up = others.iter().copied().find(|id| {
                m.replication
                    .as_ref()
                    .and_then(|r| r.get(id))
                    .is_some_and(|matched| matched.map(|l| l.index) == m.last_log_index)
            });
            if let Some(target) = caught_up {
                break (target, m.current_term);
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!("no other controller voter caught up in time; stopping without handing over leadership");
                return None;
            }
            let _ = self.raft.trigger().heartbeat().await;
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let addr = membership.get_node(&target).map(|n| n.addr.clone())?;
        let mut conn = PeerConnection::new(
            Arc::clone(&self.transport),
            addr,
            self.cluster_id.clone(),
            me,
        );
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match conn.call(RpcRequest::ElectNow { term }, left).await {
            Ok(RpcResponse::ElectNow(true)) => {}
            Ok(other) => {
                tracing::warn!(target, answer = ?other, "controller voter would not take over leadership");
                return None;
            }
            Err(e) => {
                tracing::warn!(target, error = %e, "asking a controller voter to take over leadership failed");
                return None;
            }
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let moved = self
            .raft
            .wait(Some(left))
            .metrics(
                |m| m.current_leader.is_some_and(|l| l != me),
                "another voter leads",
            )
            .await;
        match moved {
            Ok(m) => {
                let leader = m.current_leader.map(from_node_id);
                tracing::info!(leader = ?leader, "controller leadership handed over");
                leader
            }
            Err(e) => {
                tracing::warn!(error = %e, "controller leadership was not taken over in time");
                None
            }
        }
    }

    /// Resolves when the Raft core stopped on its own: a failed write or fsync of the
    /// metadata log or vote (EIO, a full disk) ends it for good, and a voter that stays
    /// up without it never serves again. The node then stops so that its supervisor
    /// restarts it, as Kafka halts on a failed metadata log directory; recovery at the
    /// next start runs the same code as after a crash. Not meant to be awaited while the
    /// node itself is shutting the core down.
    pub async fn failed(&self) -> String {
        let mut metrics = self.raft.metrics();
        loop {
            if let Err(fatal) = &metrics.borrow_and_update().running_state {
                return fatal.to_string();
            }
            if metrics.changed().await.is_err() {
                return "the Raft core ended".to_owned();
            }
        }
    }

    /// A clean stop (what a node does on SIGTERM): a leader first hands its
    /// leadership to another voter ([`RaftQuorum::hand_over_leadership`]), then the
    /// voter shuts down ([`RaftQuorum::shutdown`]).
    pub async fn stop(&self) -> Result<(), QuorumError> {
        self.hand_over_leadership(self.write_timeout).await;
        self.shutdown().await
    }

    /// Stops the voter as it is, leader or not (the others notice as after a crash):
    /// the RPC server and its connections, then openraft (which closes the files).
    /// Bounded by the write timeout.
    pub async fn shutdown(&self) -> Result<(), QuorumError> {
        self.shutdown_tx.send_replace(true);
        let server = self.server.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(server) = server {
            if tokio::time::timeout(self.write_timeout, server)
                .await
                .is_err()
            {
                tracing::warn!("controller RPC server did not stop in time");
            }
        }
        let stopped = tokio::time::timeout(self.write_timeout, self.raft.shutdown()).await;
        // A snapshot write in progress finishes first; none starts after.
        let slot = Arc::clone(&self.snapshots);
        let _ = tokio::task::spawn_blocking(move || close_snapshots(&slot)).await;
        let writer = self.log_writer.clone();
        let joined = tokio::task::spawn_blocking(move || writer.join());
        if tokio::time::timeout(self.write_timeout, joined)
            .await
            .is_err()
        {
            tracing::warn!("the raft log writer did not stop in time");
        }
        match stopped {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(QuorumError::Raft(e.to_string())),
            Err(_) => Err(QuorumError::Timeout(self.write_timeout)),
        }
    }

    fn not_controller(&self) -> QuorumError {
        QuorumError::NotController {
            leader: self
                .raft
                .metrics()
                .borrow()
                .current_leader
                .map(from_node_id),
        }
    }

    fn fatal(e: Fatal<NodeId>) -> QuorumError {
        match e {
            Fatal::Stopped => QuorumError::ShuttingDown,
            other => QuorumError::Raft(other.to_string()),
        }
    }
}

/// Creates the quorum directory if needed and opens the Raft log and the state machine
/// (blocking: reads and may repair files).
fn open_storage(
    dir: &std::path::Path,
    cluster_id: &str,
    published: Arc<Published>,
) -> Result<(LogStore, StateMachine), QuorumError> {
    let existed = dir.is_dir();
    std::fs::create_dir_all(dir).map_err(|e| ControllerError::io(dir, e))?;
    if !existed {
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent)?;
        }
    }
    remove_temp_files(dir)?;
    let log_store = LogStore::open(dir)?;
    let state_machine = StateMachine::open(dir, cluster_id, published)?;
    Ok((log_store, state_machine))
}

/// `1@host:port, 2@host:port`, or `1 (a single node)` for a one-voter quorum with no
/// controller listener.
fn describe_voters(voters: &BTreeMap<NodeId, BasicNode>) -> String {
    if let [(id, node)] = voters.iter().collect::<Vec<_>>()[..] {
        if node.addr.is_empty() {
            return format!("{} (a single node, no --quorum)", from_node_id(*id));
        }
    }
    voters
        .iter()
        .map(|(id, node)| format!("{}@{}", from_node_id(*id), node.addr))
        .collect::<Vec<_>>()
        .join(",")
}

impl Drop for RaftQuorum {
    fn drop(&mut self) {
        if self.shutdown_tx.send_replace(true) {
            return; // `shutdown` ran
        }
        if let Some(server) = self.server.lock().unwrap_or_else(|p| p.into_inner()).take() {
            server.abort();
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let raft = self.raft.clone();
            runtime.spawn(async move {
                let _ = raft.shutdown().await;
            });
        }
    }
}

impl MetadataQuorum for RaftQuorum {
    fn node_id(&self) -> i32 {
        self.node_id
    }

    async fn propose(&self, records: Vec<MetadataRecord>) -> Result<Committed, QuorumError> {
        if self.stepping_down.load(Ordering::Acquire) {
            return Err(QuorumError::NotController { leader: None });
        }
        let deadline = tokio::time::Instant::now() + self.write_timeout;
        let batch = MetadataBatch { records };
        let response = loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let write = self.raft.client_write(batch.clone());
            match tokio::time::timeout(left, write).await {
                Err(_) => return Err(QuorumError::Timeout(self.write_timeout)),
                Ok(Ok(response)) => break response,
                Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward)))) => {
                    // Just elected, this voter may lead before its leadership is
                    // established: it names itself (or nobody yet). Ask again shortly.
                    let own = to_node_id(self.node_id);
                    let elected_here = forward.leader_id.is_none_or(|l| l == own)
                        && self.raft.metrics().borrow().state == ServerState::Leader;
                    if !elected_here || tokio::time::Instant::now() >= deadline {
                        return Err(self.not_controller());
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Ok(Err(RaftError::APIError(e))) => return Err(QuorumError::Raft(e.to_string())),
                Ok(Err(RaftError::Fatal(e))) => return Err(Self::fatal(e)),
            }
        };
        Ok(Committed {
            first_offset: response.data.first_offset,
            last_offset: response.data.last_offset,
            log_index: response.log_id.index,
        })
    }

    async fn sync_leader(&self) -> Result<(), QuorumError> {
        // Writes are safe without a round trip to a majority: a deposed leader's
        // proposal can never commit. What planning needs is an image that includes
        // every entry this leader holds (its term's first entry, and any write that
        // timed out but may still commit), so wait until all of them are applied.
        let deadline = tokio::time::Instant::now() + self.write_timeout;
        loop {
            let (term, target) = {
                let m = self.raft.metrics().borrow().clone();
                if m.state != ServerState::Leader {
                    return Err(QuorumError::NotController {
                        leader: m.current_leader.map(from_node_id),
                    });
                }
                (m.current_term, m.last_log_index)
            };
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let waited = self
                .raft
                .wait(Some(left))
                .metrics(
                    move |m| {
                        m.state != ServerState::Leader
                            || m.current_term != term
                            || m.last_applied.map(|l| l.index) >= target
                    },
                    "leader applied its own log",
                )
                .await;
            match waited {
                Err(WaitError::Timeout(..)) => {
                    return Err(QuorumError::Timeout(self.write_timeout))
                }
                Err(WaitError::ShuttingDown) => return Err(QuorumError::ShuttingDown),
                Ok(m) if m.state == ServerState::Leader && m.current_term == term => return Ok(()),
                // Elected again in a newer term (a single voter does so right after a
                // restart): its new term's entry must be applied too.
                Ok(m) if m.state == ServerState::Leader => continue,
                Ok(m) => {
                    return Err(QuorumError::NotController {
                        leader: m.current_leader.map(from_node_id),
                    })
                }
            }
        }
    }

    fn image(&self) -> Arc<MetadataImage> {
        Arc::clone(&self.image_rx.borrow())
    }

    fn watch_image(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.image_rx.clone()
    }

    fn subscribe(&self) -> broadcast::Receiver<CommittedEvent> {
        self.published.events.subscribe()
    }

    fn status(&self) -> QuorumStatus {
        let metrics = self.raft.metrics().borrow().clone();
        let role = match metrics.state {
            ServerState::Leader => QuorumRole::Leader,
            ServerState::Follower => QuorumRole::Follower,
            ServerState::Candidate => QuorumRole::Candidate,
            ServerState::Learner => QuorumRole::Learner,
            ServerState::Shutdown => QuorumRole::Shutdown,
        };
        let log_end = metrics.last_log_index.map_or(0, |i| i + 1);
        let membership = metrics.membership_config.membership();
        let voters = membership
            .nodes()
            .filter(|(id, _)| membership.voter_ids().any(|v| v == **id))
            .map(|(id, node)| {
                let (voter_log_end, lag) = if *id == to_node_id(self.node_id) {
                    (Some(log_end), (role == QuorumRole::Leader).then_some(0))
                } else {
                    match metrics.replication.as_ref().and_then(|r| r.get(id)) {
                        Some(matched) => {
                            let end = matched.map_or(0, |m| m.index + 1);
                            (Some(end), Some(log_end.saturating_sub(end)))
                        }
                        None => (None, None),
                    }
                };
                VoterStatus {
                    node_id: from_node_id(*id),
                    address: node.addr.clone(),
                    log_end: voter_log_end,
                    lag,
                }
            })
            .collect();
        // A leader no majority has answered for a lease may have been deposed (or be cut
        // off with no majority left): it does not name itself. (One just elected, not
        // acknowledged yet, still does: its first heartbeats are on their way.)
        // Followers stop naming a leader once they stand for election.
        let voter_count = membership.voter_ids().count();
        let lease_ms = u64::try_from(self.election_timeout_max.as_millis()).unwrap_or(u64::MAX);
        let leader = match metrics.current_leader {
            Some(leader)
                if role == QuorumRole::Leader
                    && voter_count > 1
                    && metrics
                        .millis_since_quorum_ack
                        .is_some_and(|ms| ms > lease_ms) =>
            {
                tracing::debug!(
                    leader,
                    "leading without a majority's acknowledgement within the lease"
                );
                None
            }
            other => other.map(from_node_id),
        };
        QuorumStatus {
            node_id: self.node_id,
            role,
            term: metrics.current_term,
            leader,
            log_end,
            applied_end: metrics.last_applied.map_or(0, |l| l.index + 1),
            snapshot_end: metrics.snapshot.map_or(0, |l| l.index + 1),
            snapshots_installed: self.published.snapshots_installed.load(Ordering::Relaxed),
            voters,
        }
    }
}
