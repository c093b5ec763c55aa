//! The set of follower fetcher tasks: exactly one per broker this node follows some
//! partition from, re-planned after every metadata image.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tidelog_controller::MetadataImage;
use tidelog_env::net::Transport;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::fetcher::{self, FetchTarget, FetcherSettings, SourceAssignment, Throttle};
use super::partition::Partition;
use super::state::Role;
use crate::config::BrokerConfig;
use crate::metrics::ReplicationProbe;
use crate::poison::LockTolerant;
use crate::settings;

struct Running {
    assignment: watch::Sender<Arc<SourceAssignment>>,
    task: JoinHandle<()>,
}

pub(crate) struct Fetchers {
    /// How fetchers reach leaders.
    transport: Arc<dyn Transport>,
    /// Told of truncations.
    replication: Arc<ReplicationProbe>,
    running: Mutex<HashMap<i32, Running>>,
    stopped: AtomicBool,
    /// follower.replication.throttled.rate across all fetchers (set at the first plan).
    throttle: std::sync::OnceLock<Arc<Throttle>>,
}

impl Fetchers {
    pub(crate) fn new(transport: Arc<dyn Transport>, replication: Arc<ReplicationProbe>) -> Self {
        Fetchers {
            transport,
            replication,
            running: Mutex::new(HashMap::new()),
            stopped: AtomicBool::new(false),
            throttle: std::sync::OnceLock::new(),
        }
    }

    /// Starts, re-targets or stops fetchers so that every partition this node follows
    /// is fetched from its leader, and nothing else is.
    pub(crate) fn reconcile(
        &self,
        image: &MetadataImage,
        partitions: &[Arc<Partition>],
        config: &BrokerConfig,
        node_id: i32,
    ) {
        let mut by_source: HashMap<i32, Vec<FetchTarget>> = HashMap::new();
        for p in partitions {
            if let Role::Follower { leader } = p.role() {
                by_source.entry(leader).or_default().push(FetchTarget {
                    partition: Arc::clone(p),
                });
            }
        }
        let mut running = self.running.locked();
        if self.stopped.load(Ordering::Acquire) {
            return;
        }
        if let Some(throttle) = self.throttle.get() {
            throttle.set_rate(config.get(settings::FOLLOWER_REPLICATION_THROTTLED_RATE));
        }
        running.retain(|source, r| {
            let keep = by_source.contains_key(source) && !r.task.is_finished();
            if !keep {
                r.task.abort();
            }
            keep
        });
        for (source, targets) in by_source {
            let Some((host, port)) = image.inter_broker_endpoint(source) else {
                tracing::warn!(
                    source,
                    "leader has no registered listener; not fetching from it"
                );
                if let Some(r) = running.remove(&source) {
                    r.task.abort();
                }
                continue;
            };
            let assignment = Arc::new(SourceAssignment {
                host,
                port,
                targets,
            });
            if let Some(r) = running.get(&source) {
                r.assignment.send_replace(assignment);
                continue;
            }
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                tracing::warn!(source, "no async runtime: follower fetcher not started");
                continue;
            };
            let (tx, rx) = watch::channel(assignment);
            let settings = FetcherSettings::from_config(node_id, config);
            let throttle = Arc::clone(self.throttle.get_or_init(|| {
                let rate = config.get(settings::FOLLOWER_REPLICATION_THROTTLED_RATE);
                Arc::new(Throttle::new(rate))
            }));
            let task = runtime.spawn(fetcher::run(
                source,
                settings,
                rx,
                Arc::clone(&self.transport),
                Arc::clone(&self.replication),
                throttle,
            ));
            tracing::info!(source, "follower fetcher started");
            running.insert(
                source,
                Running {
                    assignment: tx,
                    task,
                },
            );
        }
    }

    /// Stops every fetcher for good (node shutdown).
    pub(crate) fn stop_all(&self) {
        self.stopped.store(true, Ordering::Release);
        let mut running = self.running.locked();
        for (_, r) in running.drain() {
            r.task.abort();
        }
    }
}
