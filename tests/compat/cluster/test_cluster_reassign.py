"""Reassign a partition onto a fourth, empty broker under continuous acks=all load.

Three voter nodes hold the partition; node 4 joins as a broker only. The partition's
first replica is replaced by node 4 with `tidelog partition reassign` (confluent-kafka
has no AlterPartitionReassignments call); ListPartitionReassignments is sent by hand. Node 4 must catch up and join the ISR,
the old replica must be dropped, ListPartitionReassignments must show nothing in flight,
and with node 4 made leader (preferred election: it is first in the new list) every
acknowledged record is read back from it exactly once.
"""

import subprocess


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
             "--replicas", ",".join(map(str, target)), "--bootstrap", cluster.bootstrap],
            capture_output=True, text=True, timeout=60)
        assert move.returncode == 0, f"tidelog partition reassign failed: {move.stdout}{move.stderr}"

        wait_partition(cluster, topic, 0, lambda s: sorted(s.replicas) == sorted(target) and full_isr(s),
                       MOVE_TIMEOUT_S, f"replicas {target} all in sync, {dropped} dropped")
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
