//! The controller quorum side of a node: joining it as a voter or as a client
//! (`join_quorum`; a node started without `--quorum` is the one voter of its own
//! quorum), and a node that runs only a controller voter (`ControllerNode`,
//! `--roles controller`).

use std::sync::Arc;
use std::time::Duration;

use tidelog_controller::quorum::{
    start_voter as start_raft_voter, ControllerClient, ControllerHandle, ControllerOptions,
    MetadataQuorum, QuorumConfig, QuorumController, QuorumPeers, DEFAULT_LEADER_IMBALANCE_PERCENT,
};
use tidelog_controller::{MetadataImage, TopicDefaults};
use tokio::sync::watch;

use super::controller_security::controller_transport;
use super::tasks::Tasks;
use super::{bind, claim_data_dir, Environment, StartError};
use crate::admin_http::{self, AdminState};
use crate::config::BrokerConfig;
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use crate::settings;

/// How a node joins a cluster (`--quorum`). Without it a node is a cluster of one: the
/// one voter of its own quorum, with no controller listener.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Every controller voter (`--quorum 1@host:port,...`).
    pub peers: QuorumPeers,
    /// Where this node's voter listens (`--controller-listen`); `None`: its entry in
    /// `peers`.
    pub controller_listen: Option<String>,
    /// Whether this node runs a controller voter (`--roles ...,controller`). A node
    /// without one reaches the quorum over the voters' controller port.
    pub controller: bool,
}

/// Starts this node's controller voter (when it runs one) or a client of the voters;
/// returns the handle, the voter, and the image to start from. `None`: a single node.
pub(super) async fn join_quorum(
    config: &BrokerConfig,
    options: Option<&ClusterOptions>,
    defaults: TopicDefaults,
    env: &Environment,
) -> Result<
    (
        Arc<ControllerHandle>,
        Option<Arc<QuorumController>>,
        Arc<MetadataImage>,
    ),
    StartError,
> {
    let quorum_config = match options {
        None => QuorumConfig::single_node(&config.data_dir, config.node_id).map_err(voter_error)?,
        Some(options) if !options.controller => {
            let quorum_config = QuorumConfig::new(config.node_id, options.peers.clone(), "");
            // The voter may spend a write timeout confirming its leadership and another
            // committing, on top of the request's own time on the wire.
            let timeout = config
                .duration(settings::CONTROLLER_QUORUM_REQUEST_TIMEOUT_MS)
                .max(Duration::from_millis(1))
                + quorum_config.write_timeout * 2;
            let cluster_id = options.peers.derived_cluster_id();
            let transport = controller_transport(config, &env.transport, false).await?;
            let client = ControllerClient::new(&options.peers, cluster_id.clone(), timeout)
                .with_transport(transport);
            let handle = Arc::new(ControllerHandle::Remote(Arc::new(client)));
            return Ok((handle, None, Arc::new(MetadataImage::new(cluster_id))));
        }
        Some(options) => voter_config(config, options)?,
    };
    let single = quorum_config.is_single_node();
    let controller = start_voter(config, quorum_config, defaults, env).await?;
    if single {
        // Its own vote elects it: wait for that (bounded) so the node registers at once.
        let elected = controller
            .quorum()
            .wait_until_leader(Duration::from_secs(10))
            .await;
        if !elected {
            tracing::warn!("this node's one-voter controller has not elected itself yet");
        }
    }
    let image = controller.image();
    let handle = Arc::new(ControllerHandle::Voter(Arc::clone(&controller)));
    Ok((handle, Some(controller), image))
}

/// The voter of a node started with `--quorum` that runs one.
fn voter_config(
    config: &BrokerConfig,
    options: &ClusterOptions,
) -> Result<QuorumConfig, StartError> {
    let mut quorum_config =
        QuorumConfig::in_data_dir(&config.data_dir, config.node_id, options.peers.clone())
            .map_err(voter_error)?;
    if let Some(listen) = &options.controller_listen {
        quorum_config.listen = Some(listen.clone());
    }
    Ok(quorum_config)
}

fn voter_error(e: impl std::fmt::Display) -> StartError {
    StartError::Metadata(format!("starting the controller voter: {e}"))
}

/// Starts this node's voter (migrating or refusing what its data directory holds, see
/// `tidelog_controller::quorum::start_voter`) and its controller.
async fn start_voter(
    config: &BrokerConfig,
    mut quorum_config: QuorumConfig,
    defaults: TopicDefaults,
    env: &Environment,
) -> Result<Arc<QuorumController>, StartError> {
    quorum_config.transport = if quorum_config.is_single_node() {
        Arc::clone(&env.transport)
    } else {
        controller_transport(config, &env.transport, true).await?
    };
    let quorum = start_raft_voter(quorum_config).await.map_err(voter_error)?;
    let check_every = config
        .count::<u64>(settings::LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS)
        .max(1);
    let options = ControllerOptions {
        session_timeout: config
            .duration(settings::BROKER_SESSION_TIMEOUT_MS)
            .max(Duration::from_millis(1)),
        unclean_leader_election_default: config.get(settings::UNCLEAN_LEADER_ELECTION_ENABLE),
        auto_rebalance_interval: config
            .get(settings::AUTO_LEADER_REBALANCE_ENABLE)
            .then(|| Duration::from_secs(check_every)),
        leader_imbalance_percent: u32::try_from(
            config
                .get(settings::LEADER_IMBALANCE_PER_BROKER_PERCENTAGE)
                .clamp(0, 100),
        )
        .unwrap_or(DEFAULT_LEADER_IMBALANCE_PERCENT),
        // A killed broker is fenced within about a second, not a session timeout.
        probe_departed_brokers: true,
    };
    Ok(QuorumController::start_on_clock(
        Arc::new(quorum),
        defaults,
        options,
        Arc::clone(&env.clock),
    ))
}

/// A node that runs a controller voter and no broker (`--roles controller`): the
/// quorum, and the admin port (`/readyz` answers 200 while a quorum leader is known).
pub struct ControllerNode {
    controller: Arc<QuorumController>,
    tasks: Tasks,
    admin_addr: std::net::SocketAddr,
    _lock: std::fs::File,
}

impl ControllerNode {
    pub async fn start(
        config: BrokerConfig,
        options: ClusterOptions,
    ) -> Result<ControllerNode, StartError> {
        let lock = claim_data_dir(&config.data_dir)?;
        let ready = Readiness::new();
        let (admin_listener, admin_addr) = bind(config.admin_listen).await?;
        let defaults = super::topic_defaults(&config);
        let env = Environment::real();
        let controller =
            start_voter(&config, voter_config(&config, &options)?, defaults, &env).await?;
        let mut tasks = Tasks::default();
        // No broker here: the admin port has the event metrics and no node view.
        let admin = AdminState::new(
            &config,
            ready.clone(),
            Arc::new(Metrics::new()),
            watch::channel(None).1,
            crate::auth::Authorizer::from_config(&config).map(Arc::new),
        )
        .await?;
        tasks.start("admin port", |stop| {
            admin_http::serve(admin_listener, admin, stop)
        });
        let leader_of = Arc::clone(&controller);
        tasks.start("leader tracking", |stop| {
            track_leader(leader_of, ready, stop)
        });
        tracing::info!(node_id = config.node_id, %admin_addr, "controller voter started");
        Ok(ControllerNode {
            controller,
            tasks,
            admin_addr,
            _lock: lock,
        })
    }

    pub fn admin_addr(&self) -> std::net::SocketAddr {
        self.admin_addr
    }

    /// Resolves with the reason if this node's controller voter stopped on its own
    /// (see `RaftQuorum::failed`); the process should then stop.
    pub async fn failed(&self) -> String {
        self.controller.quorum().failed().await
    }

    pub async fn shutdown(self) {
        self.tasks.stop_all().await;
        stop_voter(&self.controller).await;
        tracing::info!("tidelog stopped cleanly");
    }
}

/// Keeps `ready` true while this voter knows a quorum leader.
async fn track_leader(
    controller: Arc<QuorumController>,
    ready: Readiness,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let leader = controller.quorum().status().leader;
        ready.set(leader.is_some());
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// A clean stop of this node's voter: a leader hands its leadership over first.
pub(super) async fn stop_voter(controller: &QuorumController) {
    controller.shutdown().await;
    if let Err(e) = controller.quorum().stop().await {
        tracing::warn!(error = %e, "stopping the controller voter failed");
    }
}
