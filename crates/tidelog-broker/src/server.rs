//! Start-up, background tasks and shutdown of one node.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tidelog_controller::quorum::QuorumController;
use tidelog_controller::{Endpoint, MetadataImage, TopicDefaults};
use tidelog_storage::BackgroundFlusher;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::admin_http::AdminState;
use crate::config::BrokerConfig;
use crate::context::{now_ms, BrokerContext, Ctx};
use crate::coordinator::{LogSource, PartitionLogs};
use crate::group::{GroupConfig, GroupCoordinator};
use crate::listeners::SecurityProtocol;
use crate::metadata::MetadataManager;
use crate::metrics::{Metrics, NodeView};
use crate::readiness::Readiness;
use crate::replica::{isr, ReplicaManager};
use crate::settings;
use crate::txn::{TxnConfig, TxnCoordinator};
use crate::{admin_http, net};
use tidelog_env::clock::{Clock, SystemClock};
use tidelog_env::net::{TcpTransport, Transport};

mod controller_security;
mod quorum;
mod tasks;

use quorum::join_quorum;
pub use quorum::{ClusterOptions, ControllerNode};
use tasks::Tasks;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot use data directory {path}: {source}")]
    DataDir {
        path: String,
        source: std::io::Error,
    },
    #[error("data directory {0} is in use by another tidelog process")]
    Locked(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("metadata: {0}")]
    Metadata(String),
    #[error("recovering partition logs: {0}")]
    Storage(#[from] tidelog_storage::StorageError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    #[error(transparent)]
    Sasl(#[from] crate::sasl::SaslConfigError),
}

/// The world a node runs in: how it reaches other nodes and what time it is.
#[derive(Clone)]
pub struct Environment {
    pub transport: Arc<dyn Transport>,
    pub clock: Arc<dyn Clock>,
}

impl Environment {
    /// TCP and the machine's clocks.
    pub fn real() -> Environment {
        Environment {
            transport: Arc::new(TcpTransport),
            clock: Arc::new(SystemClock),
        }
    }
}

/// Why a node stops by itself.
#[derive(Debug)]
pub enum NodeFailure {
    /// Its controller voter could not write its metadata log or vote: the node stops
    /// (its logs closed cleanly) so that a supervisor restarts it.
    ControllerVoter(String),
    /// A log directory's disk failed: the node halts at once, as Kafka does, and its
    /// logs are recovered when it is restarted.
    LogDir(crate::replica::LogDirFailure),
}

/// A running node. Dropping it without `shutdown` leaves logs to crash recovery.
pub struct Broker {
    ctx: Ctx,
    /// Turns true when shutdown starts: requests waiting (long polls, joins) end.
    stopping: watch::Sender<bool>,
    tasks: Tasks,
    /// The logs' background fsyncs; stopped after the logs are closed.
    flusher: BackgroundFlusher,
    kafka_addr: SocketAddr,
    admin_addr: SocketAddr,
    /// This node's controller voter, stopped after the broker.
    voter: Option<Arc<QuorumController>>,
    _lock: std::fs::File,
    /// The locks on the further log directories (`log.dirs`), held likewise.
    _extra_locks: Vec<std::fs::File>,
}

impl Broker {
    /// Opens the data directory (recovering logs if the last run crashed), binds the
    /// listeners and starts serving as a cluster of one (its own one-voter quorum).
    pub async fn start(config: BrokerConfig) -> Result<Broker, StartError> {
        Broker::start_with(config, None).await
    }

    /// Like [`Broker::start`]; with `cluster`, a node of that cluster. Either way it
    /// starts its controller voter (if it runs one), then registers with the quorum and
    /// follows its metadata in the background (`/readyz` answers 200 once it has caught
    /// up). A single node waits for that before it accepts Kafka connections.
    pub async fn start_with(
        config: BrokerConfig,
        cluster: Option<ClusterOptions>,
    ) -> Result<Broker, StartError> {
        Broker::start_in(config, cluster, Environment::real()).await
    }

    /// Like [`Broker::start_with`], in `env`: the Kafka listener, the follower fetchers
    /// and the controller quorum use its transport, the controller and coordinators its
    /// clock. A test runs several nodes in one process this way, on one in-memory
    /// network. (The admin port is always TCP: it is for operators, not other nodes.)
    pub async fn start_in(
        config: BrokerConfig,
        cluster: Option<ClusterOptions>,
        env: Environment,
    ) -> Result<Broker, StartError> {
        let data_dir = config.data_dir.clone();
        let lock = claim_data_dir(&data_dir)?;
        let extra_locks = config
            .extra_log_dirs
            .iter()
            .map(|dir| claim_data_dir(dir))
            .collect::<Result<Vec<_>, _>>()?;
        let (stopping_tx, stopping) = watch::channel(false);
        let ready = Readiness::new();
        let metrics = Arc::new(Metrics::new());
        let mut tasks = Tasks::default();

        // The admin port comes first, so `/healthz` answers while logs recover; it
        // gets the node's view once the node has one.
        let (admin_listener, admin_addr) = bind(config.admin_listen).await?;
        let (node_view_tx, node_view) = watch::channel(None);
        // One authorizer (one ACL index) for the Kafka listeners and the admin port.
        let authorizer = crate::auth::Authorizer::from_config(&config).map(Arc::new);
        let admin = AdminState::new(
            &config,
            ready.clone(),
            Arc::clone(&metrics),
            node_view,
            authorizer.clone(),
        )
        .await?;
        tasks.start("admin port", |stop| {
            admin_http::serve(admin_listener, admin, stop)
        });

        let specs = config.listener_specs()?;
        let inter_broker = config.inter_broker_listener(&specs, cluster.is_some())?;
        let ssl_names: Vec<String> = specs
            .iter()
            .filter(|s| {
                matches!(
                    s.protocol,
                    SecurityProtocol::Ssl | SecurityProtocol::SaslSsl
                )
            })
            .map(|s| s.name.clone())
            .collect();
        if !ssl_names.is_empty() {
            // What an operator weighing TLS cost wants to know (docs/performance.md).
            net::ktls::log_availability().await;
        }
        let mut tls_servers = crate::tls::load_servers(&config, ssl_names).await?;
        let mut kafka_listeners = Vec::with_capacity(specs.len());
        let mut outbound = net::OutboundSecurity::default();
        for spec in &specs {
            let listener =
                env.transport
                    .listen(&spec.bind.to_string())
                    .await
                    .map_err(|source| StartError::Bind {
                        addr: spec.bind,
                        source,
                    })?;
            let position = tls_servers.iter().position(|(name, _)| *name == spec.name);
            let tls = position.map(|i| tls_servers.swap_remove(i).1);
            let sasl = match spec.protocol {
                SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl => {
                    let sasl = crate::sasl::SaslListener::from_config(&config, &spec.name)?;
                    sasl.prepare(&spec.name).await?;
                    Some(Arc::new(sasl))
                }
                SecurityProtocol::Plaintext | SecurityProtocol::Ssl => None,
            };
            if cluster.is_some() && spec.name == inter_broker {
                // Other brokers ask of this node what it will ask of them.
                if tls.is_some() {
                    outbound.tls = Some(crate::tls::load_client(&config, &spec.name).await?);
                }
                if let Some(served) = &sasl {
                    outbound.sasl = Some(crate::sasl::SaslLogin::inter_broker(
                        &config, &spec.name, served,
                    )?);
                }
            }
            kafka_listeners.push((spec.name.clone(), listener, tls, sasl));
        }
        let kafka_addrs: Vec<(String, SocketAddr)> = kafka_listeners
            .iter()
            .map(|(name, listener, _, _)| (name.clone(), listener.local_addr()))
            .collect();
        let kafka_addr = kafka_addrs
            .first()
            .map(|(_, addr)| *addr)
            .unwrap_or(config.listen);

        let defaults = topic_defaults(&config);
        let node_id = config.node_id;
        let bound: Vec<u16> = kafka_addrs.iter().map(|(_, addr)| addr.port()).collect();
        // The inter-broker listener first: other brokers' followers and marker
        // writers connect to a broker's first endpoint.
        let mut endpoints: Vec<Endpoint> = config
            .advertised_endpoints(&specs, &bound)?
            .into_iter()
            .map(|(name, host, port)| Endpoint { name, host, port })
            .collect();
        endpoints.sort_by_key(|e| e.name != inter_broker);
        let rack = Some(config.get(settings::BROKER_RACK)).filter(|r| !r.is_empty());
        let flusher_threads = usize::try_from(config.get(settings::BACKGROUND_THREADS))
            .unwrap_or(1)
            .clamp(1, MAX_FLUSHER_THREADS);
        let max_open_files = max_open_segment_files(config.get(settings::LOG_MAX_OPEN_FILES));
        tidelog_storage::set_max_open_segment_files(max_open_files);
        tracing::info!(max_open_files, "segment files kept open at most");
        let flusher = BackgroundFlusher::start(flusher_threads)?;
        let replicas = Arc::new(ReplicaManager::new(
            node_id,
            config.log_dirs(),
            Arc::clone(&metrics.storage),
            Arc::clone(&metrics.replication),
            net::SecureTransport::wrap(Arc::clone(&env.transport), outbound),
            flusher.clone(),
        ));

        let (link, voter, image) = join_quorum(&config, cluster.as_ref(), defaults, &env).await?;
        bind_extra_log_dirs(&config, image.cluster_id()).await?;
        if voter.is_some() {
            // A voter has its image from disk: open the logs it names now (on a
            // blocking thread: opening reads files and may recover a crashed log). A
            // broker-only node waits for its first fetch.
            // Under the dynamic configs the image already holds (a restart).
            let broker = crate::dynamic_config::resolve(&config, &image);
            let (opener, image) = (Arc::clone(&replicas), image.clone());
            tokio::task::spawn_blocking(move || open_logs(&opener, &image, &broker))
                .await
                .map_err(|e| StartError::Metadata(format!("opening the logs panicked: {e}")))??;
        }
        let metadata = Arc::new(MetadataManager::new(Arc::clone(&link), image));
        let clock = Arc::clone(&env.clock);
        let logs: Arc<dyn LogSource> = Arc::new(PartitionLogs(Arc::clone(&replicas)));
        let groups = Arc::new(GroupCoordinator::new(
            GroupConfig::from_broker(&config),
            node_id,
            metadata.images(),
            Arc::clone(&logs),
            Arc::clone(&clock),
        ));
        let share_state = Arc::new(crate::share::state::ShareStateCoordinator::new(
            node_id,
            metadata.images(),
            Arc::clone(&logs),
            Arc::clone(&clock),
            Arc::clone(&replicas),
        ));
        let txns = Arc::new(TxnCoordinator::new(
            TxnConfig::from_broker(&config),
            node_id,
            metadata.images(),
            logs,
            clock,
            Arc::clone(&metadata),
            Arc::clone(&replicas),
            Arc::clone(&groups),
        ));
        let shares = Arc::new(crate::share::ShareManager::new(
            usize::try_from(config.get(settings::GROUP_SHARE_MAX_SHARE_SESSIONS)).unwrap_or(1),
        ));
        let node_view = Arc::new(NodeView {
            node_id,
            config: config.clone(),
            metadata: Arc::clone(&metadata),
            replicas: Arc::clone(&replicas),
            groups: Arc::clone(&groups),
            txns: Arc::clone(&txns),
            shares: Arc::clone(&shares),
        });
        node_view_tx.send_replace(Some(Arc::clone(&node_view)));
        let effective = Arc::new(crate::dynamic_config::resolve(&config, &metadata.image()));
        let quotas = crate::quota::QuotaManager::new(&config);
        let ctx: Ctx = Arc::new(BrokerContext {
            shares,
            share_state: Arc::clone(&share_state),
            authorizer,
            effective: std::sync::RwLock::new(effective),
            quotas,
            config,
            metadata,
            replicas,
            groups: Arc::clone(&groups),
            txns: Arc::clone(&txns),
            metrics,
            shutdown: stopping,
        });

        // Everything the Kafka listener's requests use is running before it accepts.
        tasks.start("metadata follower", |stop| {
            crate::metadata::follow_image(Arc::clone(&ctx), Arc::clone(&link), stop)
        });
        tasks.start("broker heartbeat", |stop| {
            let (ctx, ready) = (Arc::clone(&ctx), ready.clone());
            crate::metadata::heartbeat_loop(ctx, link, endpoints, rack, ready, stop)
        });
        tasks.start("log housekeeping", |stop| {
            housekeeping(Arc::clone(&ctx), stop)
        });
        tasks.start("log cleaner", |stop| cleaner(Arc::clone(&ctx), stop));
        tasks.start("directory deletion", |stop| {
            delete_renamed_dirs(Arc::clone(&ctx), stop)
        });
        tasks.start("ISR checks", |stop| isr::run(Arc::clone(&ctx), stop));
        tasks.start("group coordinator", |stop| groups.run(stop));
        let interval = settings::Setting::as_duration(
            ctx.config
                .get(settings::ADMIN_CONSOLE_LAG_HISTORY_INTERVAL_MS),
        );
        let (probe, history) = (
            Arc::clone(&ctx.metrics.groups),
            Arc::clone(&ctx.metrics.lag_history),
        );
        tasks.start("lag history", |stop| {
            crate::metrics::lag_history::run(node_view, probe, history, interval, stop)
        });
        tasks.start("transaction coordinator", |stop| txns.run(stop));
        tasks.start("share coordinator", |stop| share_state.run(stop));
        tasks.start("share dead-letter writer", |stop| {
            crate::share::dead_letter::run(Arc::clone(&ctx), stop)
        });
        if cluster.is_none() {
            // Nobody else needs to answer: a client of a single node finds it registered
            // and its metadata in place from its first request.
            wait_until_ready(&ready).await;
        }
        let open_connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for (name, listener, tls, sasl) in kafka_listeners {
            let endpoint = net::ListenerContext {
                name: Arc::from(name.as_str()),
                tls,
                sasl,
            };
            let open = Arc::clone(&open_connections);
            let (ctx, ready, in_cluster) = (Arc::clone(&ctx), ready.clone(), cluster.is_some());
            tasks.start("Kafka listener", |mut stop| async move {
                // As Kafka enables request processing only after the broker's initial
                // metadata catch-up: until then this node's partitions hold the roles
                // its own copy of the metadata log gave them when it stopped, and as
                // the leader of an epoch that has since ended it would acknowledge
                // writes that the new leader's log then truncates away. Connections
                // wait in the listen backlog meanwhile.
                if in_cluster && !until_first_ready(&ready, &mut stop).await {
                    return;
                }
                net::serve_listener(listener, endpoint, open, ctx, stop).await
            });
        }
        if ready.is_ready() {
            tracing::info!(node_id, %kafka_addr, %admin_addr, listeners = ?kafka_addrs, "tidelog is ready");
        } else {
            tracing::info!(node_id, %kafka_addr, %admin_addr, listeners = ?kafka_addrs, "tidelog started; joining the cluster");
        }
        Ok(Broker {
            ctx,
            stopping: stopping_tx,
            tasks,
            flusher,
            kafka_addr,
            admin_addr,
            voter,
            _lock: lock,
            _extra_locks: extra_locks,
        })
    }

    pub fn kafka_addr(&self) -> SocketAddr {
        self.kafka_addr
    }

    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// Moves leaderships away (in a cluster, `controlled.shutdown.enable`), tells
    /// waiting requests the node is stopping, stops the background tasks in reverse
    /// order of start (the Kafka listener first), closes every log cleanly, then stops
    /// this node's controller voter.
    /// Resolves if this node can no longer run: its controller voter stopped on its
    /// own (see `RaftQuorum::failed`), or the disk of a log directory failed.
    pub async fn failed(&self) -> NodeFailure {
        let voter = async {
            match &self.voter {
                Some(voter) => voter.quorum().failed().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            why = voter => NodeFailure::ControllerVoter(why),
            dir = self.ctx.replicas.dir_failures().first() => NodeFailure::LogDir(dir),
        }
    }

    pub async fn shutdown(self) {
        crate::metadata::controlled_shutdown(&self.ctx).await;
        self.stop().await;
    }

    /// Stops at once, without handing leaderships over first: for a node whose own
    /// controller voter failed, which cannot take part in a controlled shutdown (Kafka
    /// halts on a failed metadata log directory). The controller fences it once its
    /// listeners refuse connections, and its logs are still closed cleanly.
    pub async fn shutdown_failed(self) {
        self.stop().await;
    }

    async fn stop(self) {
        let _ = self.stopping.send(true);
        self.tasks.stop_all().await;
        let ctx = self.ctx;
        let flusher = self.flusher;
        // Closing makes every log durable by itself; the flusher then finishes what is
        // queued (passes for closed logs write nothing) and its threads end.
        let _ = tokio::task::spawn_blocking(move || {
            ctx.replicas.shutdown();
            flusher.shutdown();
        })
        .await;
        if let Some(voter) = self.voter {
            quorum::stop_voter(&voter).await;
        }
        tracing::info!("tidelog stopped cleanly");
    }
}

/// `log.max.open.files`: the setting when positive, else half the open-file limit (the
/// rest is for connections, index files while they are mapped, the metadata log), at
/// least 1,024.
fn max_open_segment_files(setting: i64) -> usize {
    if let Ok(max) = usize::try_from(setting) {
        if max > 0 {
            return max;
        }
    }
    open_file_limit().map_or(1024, |limit| (limit / 2).max(1024))
}

/// The soft open-file limit of this process, from `/proc/self/limits`.
fn open_file_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.trim_start_matches("Max open files")
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Bound on `background.threads` for the log flusher.
const MAX_FLUSHER_THREADS: usize = 64;

/// How long a single node waits at start-up to be registered with its own controller
/// before it serves anyway (the heartbeat loop keeps trying; `/readyz` tells).
const SINGLE_NODE_READY_WITHIN: Duration = Duration::from_secs(10);

async fn wait_until_ready(ready: &Readiness) {
    if tokio::time::timeout(SINGLE_NODE_READY_WITHIN, ready.wait())
        .await
        .is_err()
    {
        tracing::warn!("not registered with this node's own controller yet; serving anyway");
    }
}

/// Waits until this node is first ready (registered, its metadata caught up with the
/// quorum's); false when told to stop first.
async fn until_first_ready(ready: &Readiness, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = ready.wait() => true,
        _ = stop.wait_for(|stopping| *stopping) => false,
    }
}

fn topic_defaults(config: &BrokerConfig) -> TopicDefaults {
    TopicDefaults {
        num_partitions: config.count(settings::NUM_PARTITIONS),
        replication_factor: config.count(settings::DEFAULT_REPLICATION_FACTOR),
    }
}

fn open_logs(
    replicas: &ReplicaManager,
    image: &MetadataImage,
    config: &BrokerConfig,
) -> Result<(), StartError> {
    let started = std::time::Instant::now();
    replicas.apply_image(image, config)?;
    tracing::info!(
        partitions = replicas.all().len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "logs opened"
    );
    Ok(())
}

/// A listener on `addr`, with the address it got (port 0 picks a free one).
pub(crate) async fn bind(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), StartError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| StartError::Bind { addr, source })?;
    Ok((listener, bound))
}

/// Binds each further log directory to this node and cluster before any partition in
/// it is opened (see `tidelog_controller::bind_log_dir`). The cluster id is the data
/// directory's, else the image's; a broker-only node on its very first start knows
/// neither yet and binds them at its next start.
async fn bind_extra_log_dirs(
    config: &BrokerConfig,
    image_cluster_id: &str,
) -> Result<(), StartError> {
    if config.extra_log_dirs.is_empty() {
        return Ok(());
    }
    let (data_dir, dirs, node_id) = (
        config.data_dir.clone(),
        config.extra_log_dirs.clone(),
        config.node_id,
    );
    let from_image = Some(image_cluster_id.to_owned()).filter(|id| !id.is_empty());
    tokio::task::spawn_blocking(move || {
        let stored = tidelog_controller::data_dir_cluster_id(&data_dir)
            .map_err(|e| StartError::Metadata(e.to_string()))?;
        let Some(cluster_id) = stored.or(from_image) else {
            return Ok(());
        };
        for dir in &dirs {
            tidelog_controller::bind_log_dir(dir, &cluster_id, node_id)
                .map_err(|e| StartError::Metadata(e.to_string()))?;
        }
        Ok(())
    })
    .await
    .map_err(|e| StartError::Metadata(format!("binding the log directories panicked: {e}")))?
}

/// Creates the data directory if it is missing and takes an exclusive advisory lock on
/// `<data-dir>/.lock`, held for the process's life, so two nodes can never write one
/// directory.
#[allow(unsafe_code)]
pub(crate) fn claim_data_dir(dir: &std::path::Path) -> Result<std::fs::File, StartError> {
    use std::os::fd::AsRawFd;
    std::fs::create_dir_all(dir).map_err(|source| StartError::DataDir {
        path: dir.display().to_string(),
        source,
    })?;
    let path = dir.join(".lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| StartError::DataDir {
            path: path.display().to_string(),
            source,
        })?;
    // SAFETY: flock on a file descriptor we own; no memory is shared with the kernel.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(StartError::Locked(dir.display().to_string()));
    }
    Ok(file)
}

/// Removes partition directories renamed aside for deletion once their delay passed;
/// those a previous run left wait `log.segment.delete.delay.ms` from start-up.
async fn delete_renamed_dirs(ctx: Ctx, shutdown: watch::Receiver<bool>) {
    let startup_delay = ctx.config.duration(settings::LOG_SEGMENT_DELETE_DELAY_MS);
    ctx.replicas.run_deletions(startup_delay, shutdown).await;
}

/// Rolls by segment.ms, flushes by flush.ms, and applies retention every
/// `log.retention.check.interval.ms`.
async fn housekeeping(ctx: Ctx, mut shutdown: watch::Receiver<bool>) {
    let floor = Duration::from_millis(10);
    let retention_every = ctx
        .config
        .duration(settings::LOG_RETENTION_CHECK_INTERVAL_MS)
        .max(floor);
    let tick = ctx
        .config
        .duration(settings::LOG_FLUSH_SCHEDULER_INTERVAL_MS)
        .max(floor)
        .min(retention_every);
    let mut last_retention = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = shutdown.changed() => return,
        }
        let retention_due = last_retention.elapsed() >= retention_every;
        if retention_due {
            last_retention = tokio::time::Instant::now();
        }
        let ctx = Arc::clone(&ctx);
        let _ = tokio::task::spawn_blocking(move || {
            ctx.replicas.housekeeping(
                now_ms(),
                retention_due,
                ctx.settings().get(settings::PRODUCER_ID_EXPIRATION_MS),
            )
        })
        .await;
    }
}

/// Compacts `cleanup.policy=compact` partitions every `log.cleaner.backoff.ms`.
async fn cleaner(ctx: Ctx, mut shutdown: watch::Receiver<bool>) {
    loop {
        // Read each pass: log.cleaner.backoff.ms is a dynamic config.
        let every = ctx
            .settings()
            .duration(settings::LOG_CLEANER_BACKOFF_MS)
            .max(Duration::from_millis(10));
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.changed() => return,
        }
        let ctx = Arc::clone(&ctx);
        let _ = tokio::task::spawn_blocking(move || ctx.replicas.clean(now_ms())).await;
    }
}
