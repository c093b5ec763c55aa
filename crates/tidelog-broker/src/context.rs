//! What every request handler can reach.

use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

use crate::config::BrokerConfig;
use crate::group::GroupCoordinator;
use crate::metadata::MetadataManager;
use crate::metrics::Metrics;
use crate::poison::RwLockTolerant;
use crate::replica::ReplicaManager;
use crate::txn::TxnCoordinator;

pub(crate) struct BrokerContext {
    /// The static settings (file, environment, `--set`, defaults). Code that reads a
    /// setting Kafka lets change at run time reads [`BrokerContext::settings`].
    pub(crate) config: BrokerConfig,
    /// `config` under the dynamic broker configs of the image last applied
    /// (`crate::dynamic_config::resolve`).
    pub(crate) effective: RwLock<Arc<BrokerConfig>>,
    pub(crate) metadata: Arc<MetadataManager>,
    pub(crate) replicas: Arc<ReplicaManager>,
    /// Consumer groups and committed offsets (`__consumer_offsets`).
    pub(crate) groups: Arc<GroupCoordinator>,
    /// Transactions (`__transaction_state`).
    pub(crate) txns: Arc<TxnCoordinator>,
    /// KIP-932 share partitions this node leads and their share sessions.
    pub(crate) shares: Arc<crate::share::ShareManager>,
    /// The share coordinator (`__share_group_state`).
    pub(crate) share_state: Arc<crate::share::state::ShareStateCoordinator>,
    /// Every probe of this node (served on the admin port's `/metrics`).
    pub(crate) metrics: Arc<Metrics>,
    /// `authorizer.class.name`'s authorizer; `None`: every request is allowed.
    pub(crate) authorizer: Option<Arc<crate::auth::Authorizer>>,
    /// Client quotas: the sensors that decide throttling (`crate::quota`).
    pub(crate) quotas: crate::quota::QuotaManager,
    /// Flips to true when the node begins shutting down; long polls end early on it.
    pub(crate) shutdown: watch::Receiver<bool>,
}

pub(crate) type Ctx = Arc<BrokerContext>;

impl BrokerContext {
    pub(crate) fn node_id(&self) -> i32 {
        self.config.node_id
    }

    /// The effective settings: static ones under the dynamic configs in force.
    pub(crate) fn settings(&self) -> Arc<BrokerConfig> {
        Arc::clone(&self.effective.read_locked())
    }

    /// Re-resolves the effective settings for `image` when its dynamic configs differ
    /// from `before`'s (cheap otherwise); returns them.
    pub(crate) fn refresh_settings(
        &self,
        before: &tidelog_controller::MetadataImage,
        image: &tidelog_controller::MetadataImage,
    ) -> Arc<BrokerConfig> {
        let me = self.node_id();
        let unchanged = before.cluster_configs() == image.cluster_configs()
            && before.broker_configs(me) == image.broker_configs(me);
        if unchanged {
            return self.settings();
        }
        let resolved = Arc::new(crate::dynamic_config::resolve(&self.config, image));
        tracing::info!("dynamic broker configs changed; effective settings re-resolved");
        *self.effective.write_locked() = Arc::clone(&resolved);
        resolved
    }
}

/// Milliseconds since the Unix epoch, the unit of every Kafka timestamp.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
