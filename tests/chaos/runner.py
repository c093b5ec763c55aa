"""One chaos run: cluster, workload, seeded faults, healing, drain, final read, check.

Layout of a run's directory: `history.jsonl` (the driver's events), `txn-history.jsonl`
(the transactional worker's), `reader-history.jsonl` (the crashable group reader's),
`report.txt`, `cluster/node<N>/node.log`, `txn-worker.log`, `group-crashable.log`,
`clients.log` (librdkafka's own lines), `faultshim.so` and its control file.

Phases, each bounded:
  1. start the cluster (in network namespaces when they can be made), create the topics
  2. start the clients; wait for the first acknowledgements
  3. faults for `seconds`
  4. heal: end partitions, resume and restart nodes, wait for every replica in the ISR
  5. stop the senders and the transactional client (fencing its open transaction)
  6. drain: the readers keep reading until each acknowledged value was served (or 90 s)
  7. read every partition of both topics from 0 to its high watermark, then check
"""

import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from cluster_load import read_log
from cluster_meta import create_topic, wait_full_isr
from cluster_nodes import Cluster
from netns import NetnsLab, unavailable_reason

from . import checker
from .disk import DataDirMount
from .faults import FaultScheduler
from .history import History, load
from .reader_client import CrashableReader
from .shim import NodeShim, build
from .txn_client import TxnClient
from .workload import CommittedWatcher, Reader, Sender, client_logger

DATA_TOPIC, TXN_TOPIC = "chaos-data", "chaos-txn"
PARTITIONS = 3
READERS_GROUP, COPIER_GROUP = "chaos-readers", "chaos-copier"
CLUSTER_START_TIMEOUT_S = 120
WARMUP_TIMEOUT_S = 90
HEAL_TIMEOUT_S = 120
DRAIN_TIMEOUT_S = 90
FINAL_READ_TIMEOUT_S = 120
# librdkafka's consumer close() has been seen to take 30-75 s after leader kills (an open
# lead, docs/reliability.md): bounded well above that, and each close's time is reported.
READER_STOP_TIMEOUT_S = 120


@dataclass
class Options:
    seed: int
    seconds: float
    workdir: Path
    nodes: int = 3
    rate: float = 20.0  # sends per second per producer; low enough for a loaded 2-core box
    netns: bool = True  # use network namespaces when they can be made
    without: tuple = ()  # fault names left out of the menu


@dataclass
class Outcome:
    result: checker.Result
    events: list
    report: str
    workdir: Path
    errors: list = field(default_factory=list)  # the run itself failed (not an anomaly)
    notes: list = field(default_factory=list)


def run(options):
    workdir = Path(options.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    history = History(workdir / "history.jsonl")
    notes, errors = [], []
    lab = None
    reason = unavailable_reason() if options.netns else "disabled (--no-netns)"
    if reason is None:
        lab = NetnsLab(options.nodes)
        try:
            lab.setup()
        except BaseException:
            lab.teardown()  # what was made before the failure
            raise
    else:
        notes.append(f"network namespaces unavailable ({reason}): no partition faults")
    cluster = txn = faults = full_disk = crashable = None
    workers = []
    try:
        cluster = Cluster(workdir / "cluster", size=options.nodes, voters=min(3, options.nodes), lab=lab)
        # The node whose disk can fill: chosen by the seed, mounted before it first starts.
        full_disk = DataDirMount(cluster.node(1 + options.seed % options.nodes))
        reason = full_disk.try_mount()
        if reason is not None:
            notes.append(f"no disk-full fault: {reason}")
            full_disk = None
        # The same node's clock and disk misbehave through the LD_PRELOAD shim.
        library, reason = build(workdir)
        shim = None
        if library is None:
            notes.append(f"no clock or disk-error faults: {reason}")
        else:
            shim = NodeShim(cluster.node(1 + options.seed % options.nodes), library, workdir).attach()
        cluster.start(CLUSTER_START_TIMEOUT_S)
        config = {"min.insync.replicas": "2"}
        replicas = min(3, options.nodes)
        create_topic(cluster, DATA_TOPIC, PARTITIONS, replicas, config, timeout=60)
        create_topic(cluster, TXN_TOPIC, PARTITIONS, replicas, config, timeout=60)
        history.record("setup", seed=options.seed, nodes=options.nodes, netns=lab is not None, rate=options.rate)

        bootstrap = cluster.bootstrap
        senders = [Sender(history, bootstrap, DATA_TOPIC, PARTITIONS, name, idem, options.rate)
                   for name, idem in (("idem1", True), ("idem2", True), ("plain1", False))]
        readers = [Reader(history, bootstrap, DATA_TOPIC, PARTITIONS, "group1", READERS_GROUP),
                   Reader(history, bootstrap, DATA_TOPIC, PARTITIONS, "group2", READERS_GROUP),
                   Reader(history, bootstrap, DATA_TOPIC, PARTITIONS, "assigned1", isolation="read_uncommitted"),
                   Reader(history, bootstrap, TXN_TOPIC, PARTITIONS, "txn-reader1", isolation="read_committed")]
        watcher = CommittedWatcher(history, bootstrap, DATA_TOPIC, PARTITIONS, [READERS_GROUP, COPIER_GROUP])
        workers = senders + readers + [watcher]
        logger = client_logger(workdir / "clients.log")
        for worker in workers:
            worker.logger = logger
            worker.start()
        txn = TxnClient(history, workdir / "txn-history.jsonl", bootstrap, DATA_TOPIC, TXN_TOPIC, COPIER_GROUP,
                        "chaos-txn", options.seed, workdir / "txn-worker.log").start()
        # A third member of the readers' group, in a process of its own so a fault can kill it.
        crashable = CrashableReader(history, workdir / "reader-history.jsonl", bootstrap, DATA_TOPIC, PARTITIONS,
                                    READERS_GROUP, "group-crashable", workdir).start()
        _wait(lambda: all(s.acked for s in senders), WARMUP_TIMEOUT_S, "every sender acknowledged before faults")

        faults = FaultScheduler(cluster, history, random.Random(options.seed), DATA_TOPIC, PARTITIONS, txn, lab,
                                full_disk, shim, options.without, crashable)
        faults.start()
        time.sleep(options.seconds)
        if not faults.stop():
            errors.append("the fault scheduler did not stop in time")
        if faults.error:
            errors.append(f"fault scheduler: {faults.error}")
        notes.append(f"faults: {', '.join(faults.done) or 'none'}")

        # Every fault restarts what it killed: a node found dead now exited on its own,
        # unless it fail-stopped after a fault on its own disk (heal() restarts it).
        if faults.error is None:
            errors += [f"node {n.node_id} exited by itself with code {n.proc.returncode}\n{n.log_tail(15)}"
                       for n in cluster.nodes.values() if not n.alive() and not faults.failed_stop(n)]
        heal(cluster, lab, history, faults)
        for sender in senders:
            if not sender.stop(timeout=90):
                errors.append(f"{sender.name} did not stop")
        if not txn.stop():
            errors.append("the transactional client's last transaction could not be fenced")
        acked = set().union(*(s.acked for s in senders))
        drained = _wait(lambda: acked <= set().union(*(r.served for r in readers)), DRAIN_TIMEOUT_S, None)
        history.record("drained", complete=drained)
        for worker in readers + [watcher]:
            if worker.stop(timeout=READER_STOP_TIMEOUT_S):
                continue
            if isinstance(worker, Reader) and worker.coordinator_lost_while_closing():
                # librdkafka's own bug: recorded and shown, not a run error; the commits it
                # never sent count as possibly applied, as for a killed reader.
                history.record("client_stuck", client=worker.name, cause="librdkafka#5511")
            else:
                errors.append(f"{worker.name} did not stop")
        if not crashable.stop_running():
            errors.append("the crashable group reader did not stop")
        errors += [w.error for w in workers if w.error]

        for topic, isolation in ((DATA_TOPIC, "read_uncommitted"), (TXN_TOPIC, "read_uncommitted"),
                                 (TXN_TOPIC, "read_committed")):
            final_read(history, cluster.bootstrap, topic, isolation)
        errors += [f"node {n.node_id} exited by itself with code {n.proc.returncode} after healing\n"
                   f"{n.log_tail(15)}" for n in cluster.nodes.values() if not n.alive() and not faults.failed_stop(n)]
    except Exception as err:  # noqa: BLE001 - a run that could not finish is an error, reported below
        errors.append(f"run aborted: {type(err).__name__}: {err}")
    finally:
        for worker in workers:
            worker.stopping.set()
        if faults is not None:
            faults.stopping.set()
        if txn is not None:
            txn.cleanup()
        if crashable is not None:
            crashable.cleanup()
        if cluster is not None:
            cluster.cleanup()
        if full_disk is not None:
            full_disk.unmount()
        if lab is not None:
            lab.teardown()
        history.close()

    events = load(*sorted(workdir.glob("*history.jsonl")))
    result = checker.check(events)
    text = "\n".join([f"seed {options.seed}, {options.seconds} s, {options.nodes} nodes, workdir {workdir}"]
                     + notes + [f"RUN ERROR: {e}" for e in errors] + [checker.report(result, events)])
    (workdir / "report.txt").write_text(text + "\n")
    return Outcome(result, events, text, workdir, errors, notes)


def heal(cluster, lab, history, faults):
    """End every fault still in force and wait until every replica is back in sync. A
    node that fail-stops once more (a write that failed during its disk fault surfacing
    late) is restarted once more."""
    if lab is not None:
        lab.heal()
    for node in cluster.nodes.values():
        if node.alive() and node.paused:
            node.resume()
        elif not node.alive():
            node.launch()
    for node in cluster.nodes.values():
        try:
            node.wait_ready(HEAL_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - re-raised unless it is a fail-stop
            if not faults.failed_stop(node):
                raise
            faults.restart_failed_stops("while healing")
    wait_full_isr(cluster, DATA_TOPIC, PARTITIONS, HEAL_TIMEOUT_S)
    wait_full_isr(cluster, TXN_TOPIC, PARTITIONS, HEAL_TIMEOUT_S)
    history.record("healed")


def final_read(history, bootstrap, topic, isolation):
    log = read_log(bootstrap, topic, PARTITIONS, timeout=FINAL_READ_TIMEOUT_S, isolation=isolation)
    for partition, records in sorted(log.items()):
        for offset, value in sorted(records.items()):
            history.record("final_read", isolation=isolation, topic=topic, partition=partition, offset=offset,
                           value=value.decode())
        history.record("final_read_end", isolation=isolation, topic=topic, partition=partition,
                       records=len(records))


def _wait(predicate, timeout, what):
    """Poll until `predicate()`; raise (with `what`) or return False on timeout."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            if what:
                raise TimeoutError(f"not within {timeout} s: {what}")
            return False
        time.sleep(0.25)
    return True
