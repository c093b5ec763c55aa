//! A cluster of real `tidelog serve` processes on loopback: every node a broker and a
//! controller voter (or the roles a test gives each), free ports, one temp directory,
//! every process killed on drop.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::http_status;

pub struct ClusterNode {
    pub node_id: i32,
    pub kafka: SocketAddr,
    pub admin: SocketAddr,
    pub controller: SocketAddr,
    pub data_dir: PathBuf,
    /// `--roles` (None: the default, broker and controller for a voter).
    pub roles: Option<String>,
    child: Option<Child>,
}

impl ClusterNode {
    fn is_voter(&self) -> bool {
        self.roles
            .as_deref()
            .is_none_or(|r| r.contains("controller"))
    }
}

pub struct Cluster {
    pub nodes: Vec<ClusterNode>,
    quorum: String,
    settings: Vec<String>,
    _temp: tempfile::TempDir,
}

impl Cluster {
    /// Starts `size` nodes (ids 1..=size) with `--set` settings and waits until every
    /// one answers /readyz (registered, metadata caught up) within `timeout`. A node
    /// that exits during start-up (a port taken meanwhile by another process) makes the
    /// whole cluster start again on fresh ports, at most three times.
    pub fn start(size: i32, settings: &[&str], timeout: Duration) -> Cluster {
        let roles: Vec<(i32, Option<&str>)> = (1..=size).map(|id| (id, None)).collect();
        Cluster::start_with_roles(&roles, settings, timeout)
    }

    /// Like [`Cluster::start`], with each node's id and `--roles`; the voters (nodes
    /// with the controller role) make up `--quorum`.
    pub fn start_with_roles(
        roles: &[(i32, Option<&str>)],
        settings: &[&str],
        timeout: Duration,
    ) -> Cluster {
        let mut attempt = 1;
        loop {
            let mut cluster = Cluster::spawn_all(roles, settings);
            match roles
                .iter()
                .try_for_each(|(id, _)| cluster.wait_ready(*id, timeout))
            {
                Ok(()) => return cluster,
                Err(e) if attempt < 3 => {
                    eprintln!("cluster start-up failed ({e}); starting again on fresh ports");
                    attempt += 1;
                }
                Err(e) => panic!("{e}"),
            }
        }
    }

    fn spawn_all(roles: &[(i32, Option<&str>)], settings: &[&str]) -> Cluster {
        let temp = tempfile::tempdir().expect("temp dir");
        let nodes: Vec<ClusterNode> = roles
            .iter()
            .map(|&(node_id, roles)| ClusterNode {
                node_id,
                roles: roles.map(str::to_string),
                kafka: loopback(free_port()),
                admin: loopback(free_port()),
                controller: loopback(free_port()),
                data_dir: temp.path().join(format!("n{node_id}")),
                child: None,
            })
            .collect();
        let quorum = nodes
            .iter()
            .filter(|n| n.is_voter())
            .map(|n| format!("{}@{}", n.node_id, n.controller))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = Cluster {
            nodes,
            quorum,
            settings: settings.iter().map(|s| s.to_string()).collect(),
            _temp: temp,
        };
        for (id, _) in roles {
            cluster.spawn(*id);
        }
        cluster
    }

    pub fn node(&self, node_id: i32) -> &ClusterNode {
        self.nodes
            .iter()
            .find(|n| n.node_id == node_id)
            .expect("no such node")
    }

    fn node_mut(&mut self, node_id: i32) -> &mut ClusterNode {
        self.nodes
            .iter_mut()
            .find(|n| n.node_id == node_id)
            .expect("no such node")
    }

    /// The `--quorum` value every node was started with.
    pub fn quorum(&self) -> &str {
        &self.quorum
    }

    fn spawn(&mut self, node_id: i32) {
        let quorum = self.quorum.clone();
        let settings = self.settings.clone();
        let node = self.node_mut(node_id);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tidelog"));
        cmd.arg("serve")
            .arg("--node-id")
            .arg(node_id.to_string())
            .arg("--listen")
            .arg(node.kafka.to_string())
            .arg("--admin-listen")
            .arg(node.admin.to_string())
            .arg("--quorum")
            .arg(&quorum)
            .arg("--data-dir")
            .arg(&node.data_dir)
            .env("TIDELOG_LOG", "warn")
            .stdin(Stdio::null());
        if node.is_voter() {
            cmd.arg("--controller-listen")
                .arg(node.controller.to_string());
        }
        if let Some(roles) = &node.roles {
            cmd.arg("--roles").arg(roles);
        }
        for s in &settings {
            cmd.arg("--set").arg(s);
        }
        node.child = Some(cmd.spawn().expect("spawn tidelog"));
    }

    /// Waits until the node answers /readyz; an error if it exits first or the time
    /// runs out.
    pub fn wait_ready(&mut self, node_id: i32, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let node = self.node_mut(node_id);
        while Instant::now() < deadline {
            if let Some(child) = node.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!("node {node_id} exited during start-up: {status}"));
                }
            }
            if http_status(node.admin, "/readyz") == Some(200) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!("node {node_id} not ready within {timeout:?}"))
    }

    pub fn kill9(&mut self, node_id: i32) {
        if let Some(mut child) = self.node_mut(node_id).child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait (bounded) for the exit; whether it exited successfully.
    pub fn stop(&mut self, node_id: i32, timeout: Duration) -> bool {
        let Some(mut child) = self.node_mut(node_id).child.take() else {
            return true;
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// Starts a stopped node again (same id, ports and data) and waits until it is ready.
    pub fn restart(&mut self, node_id: i32, timeout: Duration) {
        self.spawn(node_id);
        if let Err(e) = self.wait_ready(node_id, timeout) {
            panic!("{e}");
        }
    }

    pub fn is_running(&mut self, node_id: i32) -> bool {
        let node = self.node_mut(node_id);
        matches!(node.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let ids: Vec<i32> = self.nodes.iter().map(|n| n.node_id).collect();
        for id in ids {
            self.kill9(id);
        }
    }
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A free loopback port below Linux's ephemeral range (32768 and up), so no outgoing
/// connection can take it between this check and the node's bind.
fn free_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    for _ in 0..1000 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let port = 20_000 + (h.finish() % 12_000) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in 20000..32000");
}
