//! The node's own state as the scrape-time gauges and the JSON views read it. Built by
//! the server once the node's parts exist and handed to the admin port; nothing here
//! points back into the broker context.

use std::sync::Arc;
use std::time::Duration;

use crate::config::BrokerConfig;
use crate::group::GroupCoordinator;
use crate::metadata::MetadataManager;
use crate::replica::{Peer, ReplicaManager};
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

impl NodeView {
    /// A connection to node `to`'s inter-broker listener, secured as it requires,
    /// named `tidelog-<purpose>-<this node>` in the other node's logs.
    pub(crate) async fn connect(
        &self,
        to: i32,
        purpose: &str,
        timeout: Duration,
    ) -> Result<Peer, String> {
        connect_to_node(
            &self.metadata,
            &self.replicas,
            self.node_id,
            to,
            purpose,
            timeout,
        )
        .await
    }
}

/// A connection from node `from` to node `to`'s inter-broker listener, secured as it
/// requires, named `tidelog-<purpose>-<from>` in the other node's logs (the request
/// handlers that ask another leader use it too, without a `NodeView`).
pub(crate) async fn connect_to_node(
    metadata: &MetadataManager,
    replicas: &ReplicaManager,
    from: i32,
    to: i32,
    purpose: &str,
    timeout: Duration,
) -> Result<Peer, String> {
    let (host, port) = metadata
        .image()
        .inter_broker_endpoint(to)
        .ok_or_else(|| "it is not a registered broker".to_owned())?;
    let client_id = format!("tidelog-{purpose}-{from}");
    Peer::connect(
        replicas.inter_broker_transport(),
        &host,
        port,
        client_id,
        timeout,
    )
    .await
    .map_err(|e| e.to_string())
}
