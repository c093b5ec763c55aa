"""Faults on a seeded schedule. `random.Random(seed)` picks every fault, its victim and
its length, so a seed names a schedule (the cluster's own timing still varies).

Each fault is recorded as `fault_start` (with what it hit) and `fault_end`, and is healed
before the next one starts: the next fault waits, bounded, until every node answers
/readyz again. Faults that need network namespaces are in the menu only when the cluster
runs in a NetnsLab.
"""

import subprocess
import threading
import time

import cluster_wire
from cluster_meta import elect_preferred, leaders, partition, wait_full_isr
from netns import VOID_MAC, _ip

from . import power

RECOVERY_TIMEOUT_S = 90.0
NODE_START_TIMEOUT_S = 90.0
REJOIN_TIMEOUT_S = 60.0


# What a node logs when it stops itself after one of its disk faults (exit status 1, so
# that a supervisor restarts it): on a failed write of its metadata log (EIO, or ENOSPC
# on a full disk), or when a log directory failed (any I/O error on a partition's log:
# it halts, as a Kafka broker does).
FAIL_STOP_MARKS = ("the controller voter failed", "halting: log directory")


class FaultError(Exception):
    """A fault could not be healed in time (a node did not come back)."""


class FaultScheduler:
    def __init__(self, cluster, history, rng, topic, partitions, txn_client=None, lab=None, full_disk=None,
                 shim=None, without=(), crashable_reader=None):
        self.cluster, self.history, self.rng = cluster, history, rng
        self.full_disk = full_disk  # a DataDirMount: the one node whose disk can fill
        self.shim = shim  # a NodeShim: the one node whose clock and disk misbehave
        self.topic, self.partitions = topic, partitions
        self.txn_client, self.lab = txn_client, lab
        self.crashable_reader = crashable_reader
        self.stopping = threading.Event()
        self.error = None
        self.done = []  # names of the faults that ran
        self.disk_faulted = set()  # nodes whose disk failed writes or filled up, ever
        self._next_id = 1
        self.menu = {
            "kill-partition-leader": self.kill_partition_leader,
            "kill-controller-leader": self.kill_controller_leader,
            "pause-node": self.pause_node,
            "rolling-restart": self.rolling_restart,
            "leadership-transfer": self.leadership_transfer,
            "reassign-under-load": self.reassign_under_load,
        }
        if txn_client is not None:
            self.menu["crash-transactional-client"] = self.crash_client
        if crashable_reader is not None:
            self.menu["crash-group-reader"] = self.crash_group_reader
        if lab is not None:
            self.menu["isolate-partition-leader"] = self.isolate_partition_leader
            self.menu["isolate-controller-leader"] = self.isolate_controller_leader
            self.menu["cut-clients-from-leader"] = self.cut_clients_from_leader
            if len(cluster.nodes) >= 5:
                self.menu["split-majority-minority"] = self.split_majority_minority
        if full_disk is not None:
            self.menu["disk-full"] = self.disk_full
        if shim is not None:
            self.menu["clock-jump"] = self.clock_jump
            self.menu["slow-disk"] = self.slow_disk
            self.menu["disk-eio"] = self.disk_eio
            self.menu["disk-read-eio"] = self.disk_read_eio
            self.menu["power-cut"] = self.power_cut
        for name in without:
            self.menu.pop(name, None)
        self._thread = threading.Thread(target=self._guarded, daemon=True, name="faults")

    # --- the schedule

    def start(self, calm_s=(2.0, 5.0)):
        self.calm_s = calm_s
        self._thread.start()
        return self

    def stop(self, timeout=240):
        """Finish the fault under way (it heals itself) and stop."""
        self.stopping.set()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _guarded(self):
        try:
            while not self.stopping.wait(self.rng.uniform(*self.calm_s)):
                name = self.rng.choice(sorted(self.menu))
                self.menu[name]()
                self.done.append(name)
                self.wait_recovered()
        except Exception as err:  # noqa: BLE001 - the runner reports it
            self.error = f"{type(err).__name__}: {err}"
            self.history.record("fault_error", error=self.error)

    def _window(self, name, **detail):
        fault_id = self._next_id
        self._next_id += 1
        self.history.record("fault_start", fault=name, id=fault_id, **detail)
        return fault_id

    def _end(self, name, fault_id):
        self.history.record("fault_end", fault=name, id=fault_id)

    def _hold(self, low, high):
        time.sleep(self.rng.uniform(low, high))  # not cut short by stop(): the fault lasts as drawn

    def failed_stop(self, node):
        """Whether `node` is down because it stopped itself after one of its disk faults
        (a failed log directory, a failed write of its metadata log). That can come a
        while after the fault was cleared: a write that failed inside the fault surfaces
        at the next flush."""
        return (not node.alive() and node.node_id in self.disk_faulted and node.proc.returncode == 1
                and any(mark in node.log_tail(40) for mark in FAIL_STOP_MARKS))

    def restart_failed_stops(self, when):
        """Restart every node that fail-stopped (noted in the history), as its supervisor
        would; returns the nodes restarted."""
        restarted = [n for n in self.cluster.nodes.values() if self.failed_stop(n)]
        for node in restarted:
            self.history.record("fault_note", note=f"{node} stopped itself on a failed metadata write "
                                f"{when}; restarted")
            node.start(NODE_START_TIMEOUT_S)
        return restarted

    def wait_recovered(self):
        """Every node answering /readyz; a node that is not running exited by itself (each
        fault restarts what it killed), which ends the schedule as an error, unless it
        fail-stopped after a fault on its own disk (restarted)."""
        deadline = time.monotonic() + RECOVERY_TIMEOUT_S
        while not all(n.serving() and n.is_ready() for n in self.cluster.nodes.values()):
            self.restart_failed_stops("after its disk fault")
            dead = [n for n in self.cluster.nodes.values() if not n.alive()]
            if dead:
                raise FaultError(f"{dead[0]} exited by itself with code {dead[0].proc.returncode}\n"
                                 f"{dead[0].log_tail(15)}")
            if time.monotonic() > deadline:
                raise FaultError(f"the cluster did not recover within {RECOVERY_TIMEOUT_S} s")
            time.sleep(0.5)

    # --- who leads

    def partition_leader(self):
        partition = self.rng.randrange(self.partitions)
        try:
            leader = leaders(self.cluster, self.topic, self.partitions).get(partition, -1)
        except AssertionError:
            leader = -1
        return partition, (leader if leader in self.cluster.nodes else self.rng.choice(sorted(self.cluster.nodes)))

    def controller_leader(self):
        for node in self.cluster.serving():
            leader = cluster_wire.describe_quorum_leader(node.bootstrap)
            if leader in self.cluster.nodes:
                return leader
        return self.rng.choice(sorted(self.cluster.nodes))

    # --- the faults

    def _kill_and_restart(self, name, victim, **detail):
        fault_id = self._window(name, node=victim, **detail)
        self.cluster.node(victim).kill9()
        self._hold(2, 6)
        self.cluster.node(victim).start(NODE_START_TIMEOUT_S)
        self._end(name, fault_id)

    def kill_partition_leader(self):
        partition, leader = self.partition_leader()
        self._kill_and_restart("kill-partition-leader", leader, partition=partition)

    def kill_controller_leader(self):
        self._kill_and_restart("kill-controller-leader", self.controller_leader())

    def pause_node(self):
        victim = self.rng.choice(sorted(self.cluster.nodes))
        fault_id = self._window("pause-node", node=victim)
        node = self.cluster.node(victim)
        node.pause()
        try:
            self._hold(2, 6)
        finally:
            node.resume()
        self._end("pause-node", fault_id)

    def rolling_restart(self):
        """SIGTERM (controlled shutdown) each node in turn, leave it down a moment (the
        others carry the load), restart it; the next goes only once it is back in every ISR."""
        fault_id = self._window("rolling-restart")
        for node_id in sorted(self.cluster.nodes):
            node = self.cluster.node(node_id)
            node.terminate()
            self._hold(1, 3)
            node.start(NODE_START_TIMEOUT_S)
            wait_full_isr(self.cluster, self.topic, self.partitions, REJOIN_TIMEOUT_S)
        self._end("rolling-restart", fault_id)

    def leadership_transfer(self):
        """A preferred-leader election for one partition: its leader moves under load when
        an earlier fault left it elsewhere."""
        partition = self.rng.randrange(self.partitions)
        fault_id = self._window("leadership-transfer", partition=partition)
        try:
            elect_preferred(self.cluster, self.topic, partition)
        except AssertionError as err:
            self.history.record("fault_note", id=fault_id, note=str(err)[:300])
        self._end("leadership-transfer", fault_id)

    def reassign_under_load(self):
        """Move one partition's replica off a node and back while the writers run
        (`tidelog partition reassign --wait`, twice). The node is a follower, or one time
        in three the partition's leader itself, which then hands leadership to another
        in-sync replica before it deletes its copy. Either the replica is dropped and
        added again, so its node deletes its copy and then rebuilds it from offset 0, or,
        when some node holds no replica of the partition, the replica moves to that node
        (which builds a copy from offset 0 and joins the ISR) and then back."""
        index = self.rng.randrange(self.partitions)
        state = partition(self.cluster, self.topic, index)
        followers = [r for r in state.replicas if r != state.leader]
        if not followers:
            return
        moves_leader = state.leader in state.replicas and self.rng.random() < 1 / 3
        dropped = state.leader if moves_leader else self.rng.choice(followers)
        outsiders = sorted(set(self.cluster.nodes) - set(state.replicas))
        smaller = [r for r in state.replicas if r != dropped]
        detail = {"partition": index, "node": dropped, "leader": moves_leader}
        if outsiders and self.rng.random() < 0.5:
            newcomer = self.rng.choice(outsiders)
            fault_id = self._window("reassign-under-load", to=newcomer, **detail)
            steps = (smaller + [newcomer], smaller + [dropped])
        else:
            fault_id = self._window("reassign-under-load", **detail)
            steps = (smaller, smaller + [dropped])
        for replicas in steps:
            self._reassign(fault_id, index, replicas)
        self._end("reassign-under-load", fault_id)

    def _reassign(self, fault_id, index, replicas):
        """Refused while a target node is down or fenced: that is a node that stopped
        itself after a fault on its own disk (restarted here) or one still rejoining, so
        it is asked again, bounded."""
        deadline = time.monotonic() + REJOIN_TIMEOUT_S
        while True:
            move = subprocess.run(
                [str(self.cluster.binary), "partition", "reassign", "--topic", self.topic, "--partition",
                 str(index), "--replicas", ",".join(map(str, replicas)), "--wait", "--timeout",
                 str(int(REJOIN_TIMEOUT_S)), "--bootstrap", self.cluster.bootstrap],
                capture_output=True, text=True, timeout=REJOIN_TIMEOUT_S + 30)
            if move.returncode == 0:
                break
            refused = f"{move.stdout}{move.stderr}".strip()
            if "is not in metadata" not in refused or time.monotonic() > deadline:
                raise FaultError(f"reassigning {self.topic}-{index} to {replicas} failed: {refused}")
            self.history.record("fault_note", id=fault_id, note=f"reassignment refused, asked again: {refused[:200]}")
            self.restart_failed_stops("before a reassignment onto it")
            time.sleep(1.0)
        self.history.record("fault_note", id=fault_id, note=f"{self.topic}-{index} on {replicas}")

    def crash_client(self):
        fault_id = self._window("crash-transactional-client")
        self.txn_client.crash()
        self._end("crash-transactional-client", fault_id)

    def crash_group_reader(self):
        """SIGKILL a member of the readers' group: no LeaveGroup, its last commits' outcomes
        unknown; the others take its partitions once its session times out."""
        fault_id = self._window("crash-group-reader")
        self.crashable_reader.crash()
        self._hold(1, 3)  # its restart (a new member) comes after the supervisor's pause
        self._end("crash-group-reader", fault_id)

    def disk_full(self):
        """Fill one node's data directory, hold, free it. A node may stop on a failed write
        (as a Kafka broker with one log directory does): that is noted, and it is restarted
        once there is room again; what it acknowledged is still checked."""
        node = self.full_disk.node
        fault_id = self._window("disk-full", node=node.node_id)
        self.disk_faulted.add(node.node_id)
        self.full_disk.fill()
        try:
            self._hold(3, 6)
        finally:
            self.full_disk.free()
        self._restart_if_it_stopped(node, fault_id, "while its disk was full")
        self._end("disk-full", fault_id)

    def _restart_if_it_stopped(self, node, fault_id, when):
        """A node stops on a failed write of its metadata log (fail-stop, as Kafka halts
        on a failed metadata log directory), possibly a moment after the fault is cleared
        while it shuts down: wait until it is ready again or has exited, and restart it if
        it exited. One still neither after the timeout is left to `wait_recovered`."""
        deadline = time.monotonic() + RECOVERY_TIMEOUT_S
        while node.alive() and not (node.serving() and node.is_ready()):
            if time.monotonic() > deadline:
                return
            time.sleep(0.5)
        if not node.alive():
            self.history.record("fault_note", id=fault_id, note=f"{node} exited with {node.proc.returncode} "
                                f"{when}; restarted")
            node.start(NODE_START_TIMEOUT_S)

    def _shim_fault(self, name, low, high, **setting):
        """Hold a shim setting on its node, then clear it; a node that stopped on it (a
        failed write) is noted and restarted."""
        node = self.shim.node
        fault_id = self._window(name, node=node.node_id, **setting)
        if setting.get("eio"):
            self.disk_faulted.add(node.node_id)
        if setting.get("read_eio"):
            self.disk_faulted.add(node.node_id)
        self.shim.set(**setting)
        try:
            self._hold(low, high)
        finally:
            self.shim.set()
        self._restart_if_it_stopped(node, fault_id, f"during {name}")
        self._end(name, fault_id)

    def clock_jump(self):
        """The node's wall clock jumps forward by minutes to hours, or back by minutes to
        under an hour, then back. Further back, the producers' records would lie more
        than `message.timestamp.after.max.ms` (1 h) ahead of the node's clock, and the node
        rejects them with INVALID_TIMESTAMP as Kafka does (soak seed 4200: 303 sends),
        after which librdkafka bumps its producer epoch for every failed message (a
        chance of a duplicate that is the client's, librdkafka#4953)."""
        sign = self.rng.choice((-1, 1))
        offset_ms = sign * self.rng.randint(60, 3000 if sign < 0 else 7200) * 1000
        self._shim_fault("clock-jump", 4, 8, clock_offset_ms=offset_ms)

    def power_cut(self):
        """The shim node loses power: killed, and every segment file cut back to somewhere
        between what it last made durable and what it had written (power.py)."""
        node = self.shim.node
        fault_id = self._window("power-cut", node=node.node_id)
        node.kill9()
        cut, lost = power.cut_unsynced_tails(node.data_dir, self.shim.synced, self.rng)
        self.history.record("fault_note", id=fault_id,
                            note=f"{node}: {cut} segment files cut, {lost} unsynced bytes lost")
        self._hold(1, 3)
        node.start(NODE_START_TIMEOUT_S)
        self._end("power-cut", fault_id)

    def slow_disk(self):
        self._shim_fault("slow-disk", 4, 8, slow_ms=self.rng.randint(100, 500))

    def disk_eio(self):
        self._shim_fault("disk-eio", 3, 6, eio=True)

    def disk_read_eio(self):
        """Reads of the node's log files fail (fetches by followers and consumers, recovery
        of a segment); writes still work."""
        self._shim_fault("disk-read-eio", 3, 6, read_eio=True)

    def _isolate(self, name, victim, **detail):
        fault_id = self._window(name, node=victim, **detail)
        self.lab.isolate(victim)
        try:
            self._hold(4, 8)
        finally:
            self.lab.heal()
        self._end(name, fault_id)

    def isolate_partition_leader(self):
        partition, leader = self.partition_leader()
        self._isolate("isolate-partition-leader", leader, partition=partition)

    def isolate_controller_leader(self):
        self._isolate("isolate-controller-leader", self.controller_leader())

    def split_majority_minority(self):
        """Two nodes on one side, the rest on the other; the minority holds the controller
        leader or a partition leader (seeded), so the quorum or a partition must move to
        the majority while the minority's leaders refuse acks=all writes. The minority holds
        at most one controller voter, so the majority keeps a quorum."""
        first = self.controller_leader() if self.rng.random() < 0.5 else self.partition_leader()[1]
        voters = set(self.cluster.voter_ids)
        others = set(self.cluster.nodes) - {first} - (voters if first in voters else set())
        second = self.rng.choice(sorted(others))
        minority = {first, second}
        fault_id = self._window("split-majority-minority", nodes=sorted(minority))
        self.lab.split(minority)
        try:
            self._hold(5, 10)
        finally:
            self.lab.heal()
        self._end("split-majority-minority", fault_id)

    def cut_clients_from_leader(self):
        """The leader of a partition keeps its peers but loses its clients: its answers
        to the driver's address vanish (the nodes still see each other)."""
        partition, leader = self.partition_leader()
        fault_id = self._window("cut-clients-from-leader", node=leader, partition=partition)
        cut = ClientCut(self.lab, leader)
        try:
            self._hold(4, 8)
        finally:
            cut.heal()
        self._end("cut-clients-from-leader", fault_id)


class ClientCut:
    """In a node's namespace, packets to the driver (the bridge's address in the root
    namespace) go into the lab's `void0` pair and vanish, as NetnsLab does for peers."""

    def __init__(self, lab, node):
        self.namespace = lab.namespace(node)
        self.client = f"{lab.subnet}.254"
        _ip("-n", self.namespace, "neigh", "replace", self.client, "lladdr", VOID_MAC, "dev", "void0",
            "nud", "permanent")
        _ip("-n", self.namespace, "route", "add", f"{self.client}/32", "dev", "void0")

    def heal(self):
        _ip("-n", self.namespace, "route", "del", f"{self.client}/32", "dev", "void0", check=False)
        _ip("-n", self.namespace, "neigh", "del", self.client, "dev", "void0", check=False)
