//! The node's own state as the scrape-time gauges and the JSON views read it. Built by
//! the server once the node's parts exist and handed to the admin port; nothing here
//! points back into the broker context.

use std::sync::Arc;

use crate::config::BrokerConfig;
use crate::group::GroupCoordinator;
use crate::metadata::MetadataManager;
use crate::replica::ReplicaManager;
use crate::share::ShareManager;
use crate::txn::TxnCoordinator;

pub(crate) struct NodeView {
    pub(crate) node_id: i32,
    /// Topic defaults (min.insync.replicas) for the health counts.
    pub(crate) config: BrokerConfig,
    pub(crate) metadata: Arc<MetadataManager>,
    pub(crate) replicas: Arc<ReplicaManager>,
    pub(crate) groups: Arc<GroupCoordinator>,
    pub(crate) txns: Arc<TxnCoordinator>,
    /// The share partitions this node leads (a share group's lag).
    pub(crate) shares: Arc<ShareManager>,
}
