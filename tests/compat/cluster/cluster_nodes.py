"""A cluster of real `tidelog serve` processes for the cluster tests.

Each node has its own data directory and log file under the test's tmp dir, its own
free loopback ports (or, in a network-namespace lab, its own address with fixed ports),
and the shared `--quorum` voter list. Nodes are killed, stopped, resumed and restarted
on the same directory and ports. Every wait is bounded; `Cluster.cleanup` SIGKILLs
everything still running (stopped processes included) and runs even when a test fails.
"""

import atexit
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from broker_process import tidelog_bin
from compat_helpers import free_port

READY_TIMEOUT_S = 40.0
STOP_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 40
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")

# Fast failure detection for tests: fenced 2 s after the last heartbeat, out of the ISR
# 2 s after the last catch-up. Tests override single settings as they need.
TEST_SETTINGS = {
    "broker.session.timeout.ms": "2000",
    "broker.heartbeat.interval.ms": "250",
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.backoff.ms": "200",
    "group.initial.rebalance.delay.ms": "300",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.num.partitions": "5",
    "share.coordinator.state.topic.num.partitions": "5",
}

LIVE_CLUSTERS = []


class NodeError(Exception):
    """A node did not start, become ready or stop in time."""


def node_environment():
    """This process's environment minus TIDELOG_* variables: `tidelog serve` reads those as
    settings (TIDELOG_LOG_RETENTION_MS=...), and a node gets its settings from flags only."""
    return {k: v for k, v in os.environ.items() if not k.startswith("TIDELOG_")}


class Node:
    """One `tidelog serve --node-id N ... --quorum ...` process."""

    def __init__(self, cluster, node_id, workdir, settings, roles=None):
        self.cluster = cluster
        self.node_id = node_id
        self.workdir = Path(workdir)
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / "node.log"
        self.settings = dict(settings)
        self.roles = roles
        lab = cluster.lab
        if lab is None:
            self.host = "127.0.0.1"
            self.port, self.admin_port = free_port(), free_port()
            self.controller_port = free_port() if node_id in cluster.voter_ids else None
        else:
            self.host = lab.address(node_id)
            self.port, self.admin_port = 9092, 9644
            self.controller_port = 9093 if node_id in cluster.voter_ids else None
        self.proc = None
        self.paused = False
        self.starts = 0

    def __repr__(self):
        return f"node {self.node_id}"

    @property
    def bootstrap(self):
        return f"{self.host}:{self.port}"

    @property
    def controller_address(self):
        return f"{self.host}:{self.controller_port}"

    def command(self):
        prefix = [] if self.cluster.lab is None else self.cluster.lab.exec_prefix(self.node_id)
        cmd = prefix + [str(self.cluster.binary), "serve", "--node-id", str(self.node_id)]
        # A node given Kafka's `listeners` (its `port` among them) has no --listen.
        if "listeners" not in self.settings:
            cmd += ["--listen", self.bootstrap]
        cmd += [
            "--admin-listen", f"{self.host}:{self.admin_port}",
            "--data-dir", str(self.data_dir),
            "--quorum", self.cluster.quorum,
        ]
        if self.controller_port is not None:
            cmd += ["--controller-listen", self.controller_address]
        if self.roles:
            cmd += ["--roles", self.roles]
        for name, value in self.settings.items():
            cmd += ["--set", f"{name}={value}"]
        return cmd

    def launch(self):
        """Start the process without waiting for readiness (a quorum needs its peers up)."""
        if self.alive():
            raise NodeError(f"{self} already running")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        self.paused = False
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts}: {' '.join(self.command())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.workdir, start_new_session=True, env=node_environment(),
            )
        return self

    def start(self, timeout=READY_TIMEOUT_S):
        self.launch()
        self.wait_ready(timeout)
        return self

    def restart(self, timeout=READY_TIMEOUT_S):
        if self.alive():
            self.terminate()
        return self.start(timeout)

    @property
    def readyz_url(self):
        return f"http://{self.host}:{self.admin_port}/readyz"

    def is_ready(self):
        try:
            with urllib.request.urlopen(self.readyz_url, timeout=1.0) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout=READY_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                raise NodeError(f"{self} exited with {code} before ready\n{self.log_tail()}")
            if self.is_ready():
                return
            time.sleep(0.1)
        raise NodeError(f"{self} not ready after {timeout} s\n{self.log_tail()}")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def serving(self):
        """Running and not stopped: it can answer requests."""
        return self.alive() and not self.paused

    def kill9(self):
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        self.paused = False

    def terminate(self, timeout=STOP_TIMEOUT_S):
        """SIGTERM (controlled shutdown) and wait; returns the exit code. SIGKILL and fail if it hangs."""
        if not self.alive():
            return self.proc.returncode if self.proc else None
        if self.paused:
            self.resume()
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT_S)
            raise NodeError(f"{self} did not exit within {timeout} s of SIGTERM\n{self.log_tail()}")

    def pause(self):
        """SIGSTOP: the process keeps its sockets but answers nothing, as if hung."""
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def metrics(self):
        """The node's /metrics as {series line name with labels: value}."""
        url = f"http://{self.host}:{self.admin_port}/metrics"
        with urllib.request.urlopen(url, timeout=5.0) as resp:
            text = resp.read().decode()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                try:
                    out[name] = float(value)
                except ValueError:
                    pass
        return out

    def log_text(self):
        try:
            return ANSI_ESCAPE.sub("", self.log_path.read_text(errors="replace"))
        except OSError:
            return ""

    def log_tail(self, lines=LOG_TAIL_LINES):
        tail = self.log_text().splitlines()[-lines:]
        return f"--- last {len(tail)} lines of {self.log_path}\n" + "\n".join(tail)

    def cleanup(self):
        if self.alive():
            self.proc.kill()  # SIGKILL ends a stopped process too
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pass


class Cluster:
    """Nodes 1..size, the first `voters` of them controller voters (all broker too)."""

    def __init__(self, workdir, size=3, voters=3, settings=None, lab=None):
        self.workdir = Path(workdir)
        self.binary = tidelog_bin()
        self.lab = lab
        self.voter_ids = list(range(1, voters + 1))
        self.settings = {**TEST_SETTINGS, **(settings or {})}
        self.nodes = {}
        for node_id in range(1, size + 1):
            self.add_node(node_id)
        self.quorum = ",".join(f"{n}@{self.nodes[n].controller_address}" for n in self.voter_ids)
        LIVE_CLUSTERS.append(self)

    def add_node(self, node_id, roles=None, settings=None):
        """A new node (not started); one that is not a voter runs as a broker only."""
        node = Node(self, node_id, self.workdir / f"node{node_id}", {**self.settings, **(settings or {})}, roles)
        self.nodes[node_id] = node
        return node

    def start(self, timeout=READY_TIMEOUT_S):
        for node in self.nodes.values():
            node.launch()
        for node in self.nodes.values():
            node.wait_ready(timeout)
        return self

    @property
    def bootstrap(self):
        return ",".join(n.bootstrap for n in self.nodes.values())

    def serving(self, exclude=()):
        return [n for n in self.nodes.values() if n.serving() and n.node_id not in exclude]

    def node(self, node_id):
        return self.nodes[node_id]

    def cleanup(self):
        for node in self.nodes.values():
            node.cleanup()
        if self in LIVE_CLUSTERS:
            LIVE_CLUSTERS.remove(self)

    def report(self):
        """Log tails of every node, for a failed test's report."""
        sections = []
        for node in self.nodes.values():
            if node.proc is None:
                state = "never started"
            elif node.alive():
                state = "stopped (SIGSTOP)" if node.paused else "running"
            else:
                state = f"exited {node.proc.returncode}"
            sections.append((f"tidelog {node} {node.bootstrap} ({state})", node.log_tail()))
        return sections


@atexit.register
def _kill_leftovers():
    for cluster in list(LIVE_CLUSTERS):
        cluster.cleanup()
