//! T10's cluster: three `tidelog serve --quorum` nodes on loopback, each a broker and a
//! controller voter, with temporary data dirs, pinned like the single `--spawn` broker.
//! Every node is killed when the handle drops, so no node outlives the bench.

use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::broker::{http_status, log_tail, spawn_serve, SpawnOptions};
use crate::procfs;

/// Ports are picked below this, outside Linux's default ephemeral range (32768–60999),
/// so an outgoing connection cannot take a port between the pick and the node's bind.
const PORT_CEILING: u16 = 32_000;
const PORT_FLOOR: u16 = 10_000;

struct Node {
    id: u32,
    listen: SocketAddr,
    controller: SocketAddr,
    admin: SocketAddr,
    child: Option<Child>,
}

/// Three running nodes.
pub(crate) struct SpawnedCluster {
    nodes: Vec<Node>,
    root: tempfile::TempDir,
}

impl SpawnedCluster {
    /// Starts `size` nodes and waits (up to `timeout`) until every `/readyz` answers 200.
    pub(crate) fn start(
        options: &SpawnOptions,
        size: u32,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let root = tempfile::Builder::new()
            .prefix("tidelog-bench-cluster-")
            .tempdir_in(&options.work_root)
            .with_context(|| format!("temp dir in {}", options.work_root.display()))?;
        let ports = free_low_ports(3 * size as usize)?;
        let nodes: Vec<Node> = (1..=size)
            .zip(ports.chunks_exact(3))
            .map(|(id, p)| Node {
                id,
                listen: p[0],
                controller: p[1],
                admin: p[2],
                child: None,
            })
            .collect();
        let quorum = nodes
            .iter()
            .map(|n| format!("{}@{}", n.id, n.controller))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = Self { nodes, root };
        for index in 0..cluster.nodes.len() {
            cluster.launch(index, options, &quorum)?;
        }
        cluster.wait_ready(timeout)?;
        Ok(cluster)
    }

    fn launch(&mut self, index: usize, options: &SpawnOptions, quorum: &str) -> anyhow::Result<()> {
        let node = &self.nodes[index];
        let data = self.root.path().join(format!("node{}", node.id));
        std::fs::create_dir_all(&data)?;
        let args = [
            "--node-id".to_string(),
            node.id.to_string(),
            "--listen".to_string(),
            node.listen.to_string(),
            "--controller-listen".to_string(),
            node.controller.to_string(),
            "--admin-listen".to_string(),
            node.admin.to_string(),
            "--data-dir".to_string(),
            data.display().to_string(),
            "--quorum".to_string(),
            quorum.to_string(),
        ];
        let log = self.root.path().join(format!("node{}.log", node.id));
        self.nodes[index].child = Some(spawn_serve(options, &args, &log)?);
        Ok(())
    }

    /// Polls every node's `/readyz`; fails early if a node exits (e.g. a port taken by
    /// someone else, whose own `/readyz` must not be mistaken for ours).
    fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<Duration> {
        let start = Instant::now();
        let mut ready = BTreeSet::new();
        while start.elapsed() < timeout {
            self.check_alive()?;
            for node in &self.nodes {
                if !ready.contains(&node.id)
                    && http_status(node.admin, "/readyz").is_some_and(|code| code == 200)
                {
                    ready.insert(node.id);
                }
            }
            if ready.len() == self.nodes.len() {
                self.check_alive()?;
                return Ok(start.elapsed());
            }
            thread::sleep(Duration::from_millis(20));
        }
        bail!(
            "cluster not ready after {timeout:?} (ready: {ready:?}); node 1 log: {}",
            self.log_tail(1)
        )
    }

    fn check_alive(&mut self) -> anyhow::Result<()> {
        let mut dead = None;
        for node in &mut self.nodes {
            if let Some(child) = node.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    dead = Some((node.id, status));
                    break;
                }
            }
        }
        if let Some((id, status)) = dead {
            bail!("node {id} exited with {status}; log: {}", self.log_tail(id));
        }
        Ok(())
    }

    /// Every node's Kafka listener, for `bootstrap.servers`.
    pub(crate) fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(|n| n.listen.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// CPU seconds used so far by each node, in node order (NaN where /proc cannot tell).
    pub(crate) fn cpu_seconds(&self) -> Vec<f64> {
        self.nodes
            .iter()
            .map(|n| {
                n.child
                    .as_ref()
                    .and_then(|c| procfs::cpu_seconds(c.id()))
                    .unwrap_or(f64::NAN)
            })
            .collect()
    }

    /// SIGTERM to every node at once, then up to `timeout` for them all to exit; nodes
    /// still running after that are killed. Returns how long it took and how many were
    /// killed. (The last nodes cannot hand leadership to anyone, so they wait out
    /// `controlled.shutdown.max.wait.ms`.)
    pub(crate) fn stop(&mut self, timeout: Duration) -> anyhow::Result<(Duration, usize)> {
        let start = Instant::now();
        for node in &self.nodes {
            if let Some(child) = &node.child {
                // A node that already exited makes kill fail; the wait below reaps it.
                let _ = Command::new("kill")
                    .arg("-TERM")
                    .arg(child.id().to_string())
                    .stderr(Stdio::null())
                    .status();
            }
        }
        let mut killed = 0;
        for node in &mut self.nodes {
            let Some(mut child) = node.child.take() else {
                continue;
            };
            loop {
                if child.try_wait()?.is_some() {
                    break;
                }
                if start.elapsed() >= timeout {
                    let _ = child.kill();
                    child.wait()?;
                    killed += 1;
                    break;
                }
                thread::sleep(Duration::from_millis(10));
            }
        }
        Ok((start.elapsed(), killed))
    }

    fn log_tail(&self, id: u32) -> String {
        log_tail(&self.root.path().join(format!("node{id}.log")))
    }
}

impl Drop for SpawnedCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// `count` distinct loopback ports in [PORT_FLOOR, PORT_CEILING) that bind right now,
/// starting from a pseudo-random point so parallel benches rarely collide. All are held
/// until every one is found, then released for the nodes to bind.
fn free_low_ports(count: usize) -> anyhow::Result<Vec<SocketAddr>> {
    let span = u32::from(PORT_CEILING - PORT_FLOOR);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
        ^ std::process::id().wrapping_mul(2_654_435_761);
    let mut held = Vec::with_capacity(count);
    for step in 0..span {
        if held.len() == count {
            break;
        }
        let offset = (seed.wrapping_add(step)) % span;
        let port = PORT_FLOOR + u16::try_from(offset).unwrap_or(0);
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) {
            held.push(listener);
        }
    }
    if held.len() < count {
        bail!(
            "found only {} free loopback ports below {PORT_CEILING}",
            held.len()
        );
    }
    held.iter()
        .map(|l| l.local_addr().context("local_addr"))
        .collect()
}
