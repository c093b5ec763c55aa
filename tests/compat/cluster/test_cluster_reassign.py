"""Reassign a partition onto a fourth, empty broker under continuous acks=all load.

Three voter nodes hold the partition; node 4 joins as a broker only. The partition's
first replica is replaced by node 4 with `tidelog partition reassign` (confluent-kafka
has no AlterPartitionReassignments call) with --wait, which must return only once the
move is finished: node 4 caught up and in the ISR, the old replica dropped, and
ListPartitionReassignments (sent by hand) showing nothing in flight;
and with node 4 made leader (preferred election: it is first in the new list) every
acknowledged record is read back from it exactly once.
"""

import subprocess

from confluent_kafka import Producer

import cluster_wire
from cluster_load import ContinuousProducer, acked_ends, TailReader, check_acknowledged, check_reader, read_log
from cluster_meta import create_topic, elect_preferred, full_isr, partition, view, wait_full_isr, wait_partition
from compat_helpers import unique, wait_until

MOVE_TIMEOUT_S = 60


def test_reassign_partition_onto_a_fourth_broker_under_load(cluster_factory):
    cluster = cluster_factory(size=3, voters=3)
    topic = create_topic(cluster, unique("move"), 1, 3, {"min.insync.replicas": "2"})
    wait_full_isr(cluster, topic, 1, 30)
    prod = ContinuousProducer(cluster.bootstrap, topic, "m").start()
    reader = TailReader(cluster.bootstrap, topic, 1).start()
    try:
        prod.wait_acked(2000, 30, "acks=all writes before the new broker joins")
        newcomer = cluster.add_node(4).start()
        wait_until(lambda: (v := view(cluster)) is not None and 4 in v.brokers, 15, "broker 4 in the metadata")
        replicas = partition(cluster, topic, 0).replicas
        dropped = replicas[0]
        target = [4] + replicas[1:]

        move = subprocess.run(
            [str(cluster.binary), "partition", "reassign", "--topic", topic, "--partition", "0",
             "--replicas", ",".join(map(str, target)), "--wait", "--timeout", str(MOVE_TIMEOUT_S),
             "--bootstrap", cluster.bootstrap],
            capture_output=True, text=True, timeout=MOVE_TIMEOUT_S + 30)
        assert move.returncode == 0, f"tidelog partition reassign failed: {move.stdout}{move.stderr}"
        assert f"reassignment of {topic}-0 to {','.join(map(str, target))} complete" in move.stdout, move.stdout

        # --wait returned: the move is done, not merely accepted (metadata may take a
        # moment to reach every broker).
        wait_partition(cluster, topic, 0, lambda s: s.replicas == target and full_isr(s), 10,
                       f"replicas {target} all in sync, {dropped} dropped")
        in_flight = cluster_wire.list_reassignments(cluster.node(1).bootstrap)
        assert (topic, 0) not in in_flight, f"the move is still listed as in flight: {in_flight}"
        prod.wait_acked(len(prod.acked) + 200, 30, "acks=all writes after the move")

        elect_preferred(cluster, topic, 0)
        wait_partition(cluster, topic, 0, lambda s: s.leader == 4, 20, "node 4 (first replica) leading")
        prod.wait_acked(len(prod.acked) + 200, 30, "acks=all writes with node 4 leading")
    finally:
        prod.stop(flush_timeout=60)
        reader.stop()
    prod.check_finished()
    assert partition(cluster, topic, 0).leader == 4
    log = read_log(newcomer.bootstrap, topic, 1, at_least=acked_ends(prod))
    check_acknowledged(prod, log)
    check_reader(reader, log)


def test_add_broker_execute_wait_returns_once_the_new_broker_holds_its_share(cluster_factory):
    """`cluster add-broker --execute --wait` submits the balancing moves onto a new broker
    and returns only when every move is finished: the new broker then holds its planned
    replicas, in sync, with the data (read back from it as leader)."""
    cluster = cluster_factory(size=3, voters=3)
    topic = create_topic(cluster, unique("spread"), 6, 2)
    wait_full_isr(cluster, topic, 6, 30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    payloads = {p: [f"{p}-{i}".encode() * 50 for i in range(300)] for p in range(6)}
    for p, values in payloads.items():
        for value in values:
            producer.produce(topic, value, partition=p)
        producer.poll(0)
    assert producer.flush(30) == 0, "records left unacknowledged"

    cluster.add_node(4).start()
    wait_until(lambda: (v := view(cluster)) is not None and 4 in v.brokers, 15, "broker 4 in the metadata")
    run = subprocess.run(
        [str(cluster.binary), "cluster", "add-broker", "--broker-id", "4", "--execute", "--wait",
         "--timeout", str(MOVE_TIMEOUT_S), "--bootstrap", cluster.bootstrap],
        capture_output=True, text=True, timeout=MOVE_TIMEOUT_S + 30)
    assert run.returncode == 0, f"add-broker --execute --wait failed: {run.stdout}{run.stderr}"
    assert "complete after" in run.stdout, run.stdout

    # Nothing is left in flight, and broker 4 holds replicas, every one in sync.
    assert not cluster_wire.list_reassignments(cluster.node(1).bootstrap)
    moved = [p for p in range(6)
             if 4 in wait_partition(cluster, topic, p, lambda s: s.leader >= 0, 10, f"{topic}-{p} led").replicas]
    assert moved, f"no replica moved onto broker 4: {run.stdout}"
    for p in moved:
        wait_partition(cluster, topic, p, full_isr, 10, f"{topic}-{p} in sync after the move")
        elect_leader(cluster, topic, p, 4)
    # Every record of the moved partitions, served by broker 4 as their leader.
    log = read_log(cluster.bootstrap, topic, 6, at_least={p: 300 for p in range(6)})
    for p in moved:
        assert [log[p][o] for o in sorted(log[p])] == payloads[p], f"{topic}-{p} as served by broker 4"


def elect_leader(cluster, topic, index, node_id):
    """Makes `node_id` (a replica in sync) the leader: moved first in the replica list
    unless it is there already, then a preferred election."""
    replicas = partition(cluster, topic, index).replicas
    if replicas[0] != node_id:
        reorder = [node_id] + [r for r in replicas if r != node_id]
        run = subprocess.run(
            [str(cluster.binary), "partition", "reassign", "--topic", topic, "--partition", str(index),
             "--replicas", ",".join(map(str, reorder)), "--wait", "--timeout", "30",
             "--bootstrap", cluster.bootstrap],
            capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, f"reordering {topic}-{index}: {run.stdout}{run.stderr}"
    elect_preferred(cluster, topic, index)
    wait_partition(cluster, topic, index, lambda s: s.leader == node_id, 20, f"{node_id} leading {topic}-{index}")
