//! [`QuorumController`]: the controller requests on a Raft quorum.
//!
//! Writes are serialised on the leader: take the writer lock, confirm leadership and
//! catch the image up ([`MetadataQuorum::sync_leader`]), plan with [`crate::ops`],
//! propose the records, answer once they are applied. A follower forwards the request
//! to the leader it knows (one hop) and relays the answer; with no known leader the
//! answer is NOT_CONTROLLER.
//!
//! Broker liveness: the leader keeps each broker's last heartbeat in memory (not in
//! the log, as Kafka does). A broker silent for the session timeout is fenced with a
//! `FenceBroker` record; its next heartbeat unfences it. A newly elected leader grants
//! every broker a fresh session, so a leader change never fences anyone by itself.
//!
//! A broker that died is fenced sooner, on evidence rather than silence (`sessions.rs`):
//! when a connection that carried its heartbeats closes, or when this node takes office
//! without having heard from it, the leader dials the broker's listeners after a short
//! grace; "connection refused" from every one (nothing listens: the process is gone) with
//! no heartbeat meanwhile fences it. A paused process still accepts connections and a
//! partitioned host does not answer at all, so both wait for the session timeout.

mod leader;
mod partitions;
mod sessions;

use leader::Handler;
use partitions::rebalance_loop;
use sessions::{fence_loop, probe_loop};

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tidelog_env::clock::{Clock, SystemClock};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::api::Route;
use super::error::{QuorumError, RequestError};
use super::forward::{ForwardReply, ForwardedCall};
use super::network::{CallError, PeerConnection};
use super::peers::QuorumPeers;
use super::rpc::{RpcRequest, RpcResponse};
use super::server::ForwardHandler;
use super::types::to_node_id;
use super::{MetadataQuorum, RaftQuorum};
use crate::image::MetadataImage;
use crate::ops::TopicDefaults;

/// Idle connections kept per leader for forwarded requests.
const MAX_IDLE_FORWARD_CONNECTIONS: usize = 4;

/// Kafka's default `broker.session.timeout.ms`.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_millis(9000);

/// The answer to a broker heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatReply {
    /// Whether the broker is fenced after this heartbeat (it was unfenced if it was).
    pub fenced: bool,
    /// The leader's last applied metadata offset: the broker has caught up once its
    /// own image reaches it.
    pub metadata_offset: Option<u64>,
    /// The latest traffic figures each broker's heartbeat carried to this leader
    /// during its term (not metadata: never written to the log), so every broker
    /// knows every other's; empty from an older leader.
    #[serde(default)]
    pub traffic: BTreeMap<i32, BrokerTraffic>,
}

/// A broker's record-batch bytes produced to it and fetched from it since it started,
/// as it counted them at `sampled_at_ms` (its wall clock): two samples give its rates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerTraffic {
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub sampled_at_ms: i64,
}

/// Kafka's default `leader.imbalance.per.broker.percentage`.
pub const DEFAULT_LEADER_IMBALANCE_PERCENT: u32 = 10;

/// How the controller runs (the cluster settings it needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerOptions {
    /// `broker.session.timeout.ms`: a broker silent this long is fenced.
    pub session_timeout: Duration,
    /// `unclean.leader.election.enable` for topics that do not set it.
    pub unclean_leader_election_default: bool,
    /// `leader.imbalance.check.interval.seconds` when `auto.leader.rebalance.enable`:
    /// how often the leader moves leadership back to preferred replicas.
    pub auto_rebalance_interval: Option<Duration>,
    /// `leader.imbalance.per.broker.percentage`: a broker's partitions go back to it
    /// only when more than this share of those it prefers to lead are led elsewhere.
    pub leader_imbalance_percent: u32,
    /// Whether a broker whose heartbeat connection closed (or that a new leader has not
    /// heard from) is probed and fenced when nothing listens at its address any more;
    /// off, only the session timeout fences.
    pub probe_departed_brokers: bool,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        ControllerOptions {
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            unclean_leader_election_default: false,
            auto_rebalance_interval: None,
            leader_imbalance_percent: DEFAULT_LEADER_IMBALANCE_PERCENT,
            probe_departed_brokers: true,
        }
    }
}

#[derive(Debug, Default)]
struct Sessions {
    /// The term in which this node last led; sessions reset when it changes.
    term: Option<u64>,
    leader_since: Option<Instant>,
    last_seen: BTreeMap<i32, Instant>,
    /// Brokers in controlled shutdown (id → broker epoch): they may not rejoin ISRs.
    shutting_down: BTreeMap<i32, i64>,
    /// The traffic figures of each broker's latest heartbeat this term.
    traffic: BTreeMap<i32, BrokerTraffic>,
    /// Brokers that may be gone, with when the doubt arose (a heartbeat connection
    /// closed, or this node took office): probed once a grace passes with no heartbeat.
    /// Bounded by the registered brokers.
    suspects: BTreeMap<i32, Instant>,
    /// When the leader last looked for expired sessions, in real time (not the
    /// controller's clock, which tests move by hand): a gap much longer than its period
    /// means this process did not run meanwhile (paused, starved of CPU).
    last_expiry_check: Option<Instant>,
}

/// The controller of one voter; all requests may be made on any voter.
pub struct QuorumController {
    quorum: Arc<RaftQuorum>,
    peers: QuorumPeers,
    cluster_id: String,
    defaults: TopicDefaults,
    options: ControllerOptions,
    /// Times broker sessions.
    clock: Arc<dyn Clock>,
    /// Placement rotation; taken for every write so writes are serialised.
    writer: tokio::sync::Mutex<Option<usize>>,
    sessions: Mutex<Sessions>,
    /// Idle connections to each leader this node forwarded to.
    forwarders: Mutex<BTreeMap<i32, Vec<PeerConnection>>>,
    stop: watch::Sender<bool>,
    /// The fencing task and, if enabled, the leader rebalancing task.
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for QuorumController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuorumController")
            .field("node_id", &self.quorum.node_id())
            .finish_non_exhaustive()
    }
}

impl QuorumController {
    /// Starts the controller on `quorum` (and its fencing task, which fences brokers
    /// silent for `session_timeout`, i.e. `broker.session.timeout.ms`), with unclean
    /// leader election off and no automatic leader rebalancing.
    pub fn start(
        quorum: Arc<RaftQuorum>,
        defaults: TopicDefaults,
        session_timeout: Duration,
    ) -> Arc<QuorumController> {
        let options = ControllerOptions {
            session_timeout,
            ..ControllerOptions::default()
        };
        QuorumController::start_with(quorum, defaults, options)
    }

    /// Starts the controller on `quorum` with its background tasks: fencing silent
    /// brokers (and electing new leaders for what they led), and, with
    /// `auto_rebalance_interval`, preferred leader elections.
    pub fn start_with(
        quorum: Arc<RaftQuorum>,
        defaults: TopicDefaults,
        options: ControllerOptions,
    ) -> Arc<QuorumController> {
        QuorumController::start_on_clock(quorum, defaults, options, Arc::new(SystemClock))
    }

    /// Like [`QuorumController::start_with`], timing broker sessions by `clock`.
    pub fn start_on_clock(
        quorum: Arc<RaftQuorum>,
        defaults: TopicDefaults,
        options: ControllerOptions,
        clock: Arc<dyn Clock>,
    ) -> Arc<QuorumController> {
        let (stop, stop_rx) = watch::channel(false);
        let controller = Arc::new(QuorumController {
            peers: quorum.peers().clone(),
            cluster_id: quorum.cluster_id().to_owned(),
            quorum: Arc::clone(&quorum),
            defaults,
            options,
            clock,
            writer: tokio::sync::Mutex::new(None),
            sessions: Mutex::new(Sessions::default()),
            forwarders: Mutex::new(BTreeMap::new()),
            stop,
            tasks: Mutex::new(Vec::new()),
        });
        let handler: Arc<dyn ForwardHandler> = Arc::new(Handler(Arc::downgrade(&controller)));
        quorum.set_forward_handler(handler);
        let mut tasks = vec![tokio::spawn(fence_loop(
            Arc::downgrade(&controller),
            stop_rx.clone(),
            options.session_timeout,
        ))];
        if options.probe_departed_brokers {
            tasks.push(tokio::spawn(probe_loop(
                Arc::downgrade(&controller),
                stop_rx.clone(),
            )));
        }
        if let Some(interval) = options.auto_rebalance_interval {
            tasks.push(tokio::spawn(rebalance_loop(
                Arc::downgrade(&controller),
                stop_rx,
                interval,
            )));
        }
        *lock(&controller.tasks) = tasks;
        controller
    }

    pub fn options(&self) -> ControllerOptions {
        self.options
    }

    pub fn quorum(&self) -> &Arc<RaftQuorum> {
        &self.quorum
    }

    /// This voter's image (followers lag the leader by at most a heartbeat or so).
    pub fn image(&self) -> Arc<MetadataImage> {
        self.quorum.image()
    }

    /// Stops the background tasks. The quorum itself is shut down separately.
    pub async fn shutdown(&self) {
        self.stop.send_replace(true);
        let tasks = std::mem::take(&mut *lock(&self.tasks));
        for task in tasks {
            let _ = tokio::time::timeout(self.quorum.write_timeout(), task).await;
        }
    }

    super::api::controller_requests!();

    /// Runs `call` here, or on the leader when this node is not it.
    async fn call(&self, call: ForwardedCall) -> Result<ForwardReply, RequestError> {
        match self.execute(call.clone()).await {
            Err(RequestError::Quorum(QuorumError::NotController {
                leader: Some(leader),
            })) if leader != self.quorum.node_id() => self.forward(leader, call).await,
            other => other,
        }
    }

    async fn forward(
        &self,
        leader: i32,
        call: ForwardedCall,
    ) -> Result<ForwardReply, RequestError> {
        let not_controller = || {
            RequestError::Quorum(QuorumError::NotController {
                leader: Some(leader),
            })
        };
        let Some(addr) = self.peers.address(leader) else {
            return Err(not_controller());
        };
        // The leader may spend a write timeout confirming leadership and another
        // committing.
        let timeout = self.quorum.write_timeout() * 2 + Duration::from_secs(1);
        // Take a cached connection out (or open another) so concurrent forwards, e.g.
        // heartbeats behind a slow topic creation, do not queue behind each other.
        let cached = lock(&self.forwarders).get_mut(&leader).and_then(Vec::pop);
        let mut conn = cached.unwrap_or_else(|| {
            PeerConnection::new(
                self.quorum.transport(),
                addr.to_owned(),
                self.cluster_id.clone(),
                to_node_id(self.quorum.node_id()),
            )
        });
        let result = conn.call(RpcRequest::Forward(call), timeout).await;
        if result.is_ok() {
            let mut forwarders = lock(&self.forwarders);
            let idle = forwarders.entry(leader).or_default();
            if idle.len() < MAX_IDLE_FORWARD_CONNECTIONS {
                idle.push(conn);
            }
        }
        match result {
            Ok(RpcResponse::Forward(ForwardReply::Failed { code, message })) => {
                Err(RequestError::Remote { code, message })
            }
            Ok(RpcResponse::Forward(reply)) => Ok(reply),
            Ok(_) => Err(not_controller()),
            Err(CallError::Timeout { timeout, .. }) => {
                Err(RequestError::Quorum(QuorumError::Timeout(timeout)))
            }
            Err(e) => {
                tracing::debug!(leader, error = %e, "forwarding to the controller leader failed");
                Err(not_controller())
            }
        }
    }
}

impl Route for QuorumController {
    async fn route(&self, call: ForwardedCall) -> Result<ForwardReply, RequestError> {
        self.call(call).await
    }
}

/// Runs `tick` on the controller every `period` until `stop` turns true (or its sender
/// is gone) or the controller is dropped: the loop holds it only weakly, between ticks.
async fn run_every<F, Fut>(
    controller: Weak<QuorumController>,
    mut stop: watch::Receiver<bool>,
    period: Duration,
    mut tick: F,
) where
    F: FnMut(Arc<QuorumController>) -> Fut,
    Fut: Future<Output = ()>,
{
    loop {
        tokio::select! {
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
            }
            () = tokio::time::sleep(period) => {}
        }
        let Some(controller) = controller.upgrade() else {
            return;
        };
        tick(controller).await;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
