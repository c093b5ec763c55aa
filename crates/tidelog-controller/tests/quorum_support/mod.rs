//! In-process controller quorums for the quorum tests: on 127.0.0.1 ephemeral ports,
//! or on an in-memory network whose links a test cuts and heals.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tempfile::TempDir;
use tidelog_controller::quorum::{
    ControllerOptions, MetadataQuorum, QuorumConfig, QuorumController, QuorumPeers, QuorumRole,
    RaftQuorum,
};
use tidelog_controller::{CreateTopic, Endpoint, TopicDefaults, Uuid};
use tidelog_env::clock::{Clock, SystemClock};
use tidelog_env::net::MemoryNetwork;
use tokio::net::TcpListener;

pub const DEFAULTS: TopicDefaults = TopicDefaults {
    num_partitions: 2,
    replication_factor: 1,
};

pub struct Node {
    pub quorum: Arc<RaftQuorum>,
    pub controller: Arc<QuorumController>,
}

/// Tunables a test may change before starting its cluster.
#[derive(Clone)]
pub struct Tuning {
    pub snapshot_every_entries: u64,
    pub entries_kept_after_snapshot: u64,
    pub session_timeout: Duration,
    pub write_timeout: Duration,
    /// Register one broker per voter (same ids) once a leader is elected, so topics
    /// can be placed.
    pub register_brokers: bool,
    pub unclean_leader_election_default: bool,
    pub auto_rebalance_interval: Option<Duration>,
    /// The controllers' clock (broker sessions).
    pub clock: Arc<dyn Clock>,
    /// Fence a departed broker when nothing listens at its address (off by default:
    /// the brokers these tests register are names with no listener behind them, so the
    /// probe would fence every one; sessions then end only by their timeout).
    pub probe_departed_brokers: bool,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            snapshot_every_entries: 10_000,
            entries_kept_after_snapshot: 1_000,
            session_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(2),
            register_brokers: true,
            unclean_leader_election_default: false,
            auto_rebalance_interval: None,
            clock: Arc::new(SystemClock),
            probe_departed_brokers: false,
        }
    }
}

pub struct Cluster {
    pub peers: QuorumPeers,
    pub addrs: BTreeMap<i32, SocketAddr>,
    pub dirs: BTreeMap<i32, TempDir>,
    pub nodes: BTreeMap<i32, Node>,
    pub tuning: Tuning,
    /// The in-memory network the voters talk over; `None`: TCP on loopback.
    pub network: Option<MemoryNetwork>,
}

/// The in-memory host of voter `id`.
pub fn host(id: i32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, u8::try_from(id).unwrap()))
}

impl Cluster {
    pub async fn start(voters: i32, tuning: Tuning) -> Cluster {
        let mut listeners = BTreeMap::new();
        let mut addrs = BTreeMap::new();
        for id in 1..=voters {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            addrs.insert(id, listener.local_addr().unwrap());
            listeners.insert(id, listener);
        }
        let text: Vec<String> = addrs.iter().map(|(id, a)| format!("{id}@{a}")).collect();
        let peers = QuorumPeers::parse(&text.join(",")).unwrap();
        let mut cluster = Cluster {
            peers,
            addrs,
            dirs: (1..=voters)
                .map(|id| (id, tempfile::tempdir().unwrap()))
                .collect(),
            nodes: BTreeMap::new(),
            tuning,
            network: None,
        };
        for (id, listener) in listeners {
            let node = cluster.start_node(id, Some(listener)).await;
            cluster.nodes.insert(id, node);
        }
        cluster.register_brokers().await;
        cluster
    }

    /// A quorum of `voters` on an in-memory network: voter `id` is host 10.0.0.`id`.
    pub async fn start_in_memory(voters: i32, tuning: Tuning) -> Cluster {
        let addrs: BTreeMap<i32, SocketAddr> = (1..=voters)
            .map(|id| (id, SocketAddr::new(host(id), 9093)))
            .collect();
        let text: Vec<String> = addrs.iter().map(|(id, a)| format!("{id}@{a}")).collect();
        let mut cluster = Cluster {
            peers: QuorumPeers::parse(&text.join(",")).unwrap(),
            addrs,
            dirs: (1..=voters)
                .map(|id| (id, tempfile::tempdir().unwrap()))
                .collect(),
            nodes: BTreeMap::new(),
            tuning,
            network: Some(MemoryNetwork::new()),
        };
        for id in 1..=voters {
            let node = cluster.start_node(id, None).await;
            cluster.nodes.insert(id, node);
        }
        cluster.register_brokers().await;
        cluster
    }

    async fn register_brokers(&self) {
        let cluster = self;
        if cluster.tuning.register_brokers {
            let leader = cluster.leader(Duration::from_secs(5)).await;
            for id in cluster.addrs.keys().copied() {
                let port = 9000 + u16::try_from(id).unwrap();
                let incarnation = Uuid::from_u128(u128::try_from(id).unwrap());
                cluster.nodes[&leader]
                    .controller
                    .register_broker(id, incarnation, endpoint(port), None)
                    .await
                    .unwrap();
            }
        }
    }

    pub fn dir(&self, id: i32) -> PathBuf {
        self.dirs[&id].path().join("quorum")
    }

    fn config(&self, id: i32) -> QuorumConfig {
        let mut config = QuorumConfig::new(id, self.peers.clone(), self.dir(id));
        config.heartbeat_interval = Duration::from_millis(50);
        config.election_timeout_min = Duration::from_millis(300);
        config.election_timeout_max = Duration::from_millis(600);
        config.write_timeout = self.tuning.write_timeout;
        config.snapshot_every_entries = self.tuning.snapshot_every_entries;
        config.entries_kept_after_snapshot = self.tuning.entries_kept_after_snapshot;
        if let Some(network) = &self.network {
            config.transport = Arc::new(network.host(host(id)));
        }
        config
    }

    async fn start_node(&self, id: i32, listener: Option<TcpListener>) -> Node {
        let config = self.config(id);
        let started = match listener {
            Some(listener) => RaftQuorum::start_on(config.clone(), listener).await,
            None => RaftQuorum::start(config.clone()).await,
        };
        let quorum = Arc::new(started.unwrap());
        let options = ControllerOptions {
            session_timeout: self.tuning.session_timeout,
            unclean_leader_election_default: self.tuning.unclean_leader_election_default,
            auto_rebalance_interval: self.tuning.auto_rebalance_interval,
            probe_departed_brokers: self.tuning.probe_departed_brokers,
            ..ControllerOptions::default()
        };
        let controller = QuorumController::start_on_clock(
            Arc::clone(&quorum),
            DEFAULTS,
            options,
            Arc::clone(&self.tuning.clock),
        );
        Node { quorum, controller }
    }

    /// Stops a node as a crash would, minus the lost page cache: its sockets close.
    pub async fn kill(&mut self, id: i32) {
        let node = self.nodes.remove(&id).expect("node is running");
        node.controller.shutdown().await;
        node.quorum.shutdown().await.unwrap();
    }

    /// Starts a stopped node again on its old port and directory.
    pub async fn restart(&mut self, id: i32) {
        if self.network.is_some() {
            let node = self.start_node(id, None).await;
            self.nodes.insert(id, node);
            return;
        }
        let addr = self.addrs[&id];
        let listener = within(Duration::from_secs(5), "rebind the old port", async {
            loop {
                match TcpListener::bind(addr).await {
                    Ok(listener) => return listener,
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        })
        .await;
        let node = self.start_node(id, Some(listener)).await;
        self.nodes.insert(id, node);
    }

    pub fn node(&self, id: i32) -> &Node {
        &self.nodes[&id]
    }

    /// Waits until every running node agrees on one running leader; returns it.
    pub async fn leader(&self, timeout: Duration) -> i32 {
        let mut found = None;
        wait_until(timeout, "all running nodes agree on a leader", || {
            let statuses: Vec<_> = self.nodes.values().map(|n| n.quorum.status()).collect();
            let leader = statuses[0].leader;
            let agreed = leader.is_some_and(|l| self.nodes.contains_key(&l))
                && statuses.iter().all(|s| s.leader == leader)
                && statuses
                    .iter()
                    .any(|s| s.role == QuorumRole::Leader && Some(s.node_id) == leader);
            if agreed {
                found = leader;
            }
            agreed
        })
        .await;
        found.unwrap()
    }

    /// Waits until every running node's image equals the given node's.
    pub async fn converged_on(&self, id: i32, timeout: Duration) {
        wait_until(timeout, "all images equal", || {
            let want = self.nodes[&id].quorum.image();
            self.nodes.values().all(|n| *n.quorum.image() == *want)
        })
        .await;
    }

    pub fn followers(&self, leader: i32) -> Vec<i32> {
        self.nodes
            .keys()
            .copied()
            .filter(|id| *id != leader)
            .collect()
    }
}

pub fn topic(name: &str) -> CreateTopic {
    CreateTopic {
        name: name.into(),
        num_partitions: -1,
        replication_factor: -1,
        assignments: vec![],
        configs: vec![],
    }
}

pub fn endpoint(port: u16) -> Vec<Endpoint> {
    vec![Endpoint {
        name: "PLAINTEXT".into(),
        host: "127.0.0.1".into(),
        port,
    }]
}

/// Polls `condition` every 20 ms; fails the test after `timeout`.
pub async fn wait_until(timeout: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `future`, failing the test if it takes longer than `timeout`.
pub async fn within<T>(timeout: Duration, what: &str, future: impl Future<Output = T>) -> T {
    match tokio::time::timeout(timeout, future).await {
        Ok(value) => value,
        Err(_) => panic!("timed out after {timeout:?}: {what}"),
    }
}
