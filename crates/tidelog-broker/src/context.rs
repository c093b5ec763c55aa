//! What every request handler can reach.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

use crate::config::BrokerConfig;
use crate::group::GroupCoordinator;
use crate::metadata::MetadataManager;
use crate::metrics::Metrics;
use crate::replica::ReplicaManager;
use crate::txn::TxnCoordinator;

pub(crate) struct BrokerContext {
    pub(crate) config: BrokerConfig,
    pub(crate) metadata: Arc<MetadataManager>,
    pub(crate) replicas: Arc<ReplicaManager>,
    /// Consumer groups and committed offsets (`__consumer_offsets`).
    pub(crate) groups: Arc<GroupCoordinator>,
    /// Transactions (`__transaction_state`).
    pub(crate) txns: Arc<TxnCoordinator>,
    /// Every probe of this node (served on the admin port's `/metrics`).
    pub(crate) metrics: Arc<Metrics>,
    /// `authorizer.class.name`'s authorizer; `None`: every request is allowed.
    pub(crate) authorizer: Option<crate::auth::Authorizer>,
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
}

/// Milliseconds since the Unix epoch, the unit of every Kafka timestamp.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
