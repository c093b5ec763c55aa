"""Rolling restart of all three nodes under continuous acks=all load.

Each node in turn gets SIGTERM (controlled shutdown), must exit cleanly, is started
again on the same data directory and rejoins every ISR before the next one goes. The
broker session timeout is long here (20 s): leadership leaving the stopping node within
a few seconds can only be the controlled shutdown's doing, not fencing. Afterwards every
acknowledged value is read back exactly once and a reader that followed the topic saw
offsets only move forward.
"""

import time

from cluster_load import ContinuousProducer, acked_ends, TailReader, check_acknowledged, check_reader, read_log
from cluster_meta import create_topic, leaders, view, wait_full_isr
from compat_helpers import unique, wait_until

PARTITIONS = 3
SESSION_TIMEOUT_MS = 20000
HANDOVER_S = 5.0  # leadership gone from a stopped node well before its session would expire


def test_rolling_restart_under_load_loses_nothing(cluster_factory):
    cluster = cluster_factory(settings={"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)})
    topic = create_topic(cluster, unique("rolling"), PARTITIONS, 3, {"min.insync.replicas": "2"})
    wait_full_isr(cluster, topic, PARTITIONS, 30)
    prod = ContinuousProducer(cluster.bootstrap, topic, "r").start()
    reader = TailReader(cluster.bootstrap, topic, PARTITIONS).start()
    try:
        prod.wait_acked(300, 30, "acks=all writes before the restarts")
        for node_id in sorted(cluster.nodes):
            node = cluster.node(node_id)
            code = node.terminate(timeout=40)
            assert code == 0, f"node {node_id} exited with {code} after SIGTERM"
            stopped_at = time.monotonic()

            def led_elsewhere():
                answer = view(cluster, [topic], exclude=(node_id,))
                if answer is None or topic not in answer.topics:
                    return False
                states = answer.topics[topic][1].values()
                return all(s.leader >= 0 and s.leader != node_id for s in states)

            wait_until(led_elsewhere, HANDOVER_S, f"every partition led by another node once node {node_id} stopped")
            assert time.monotonic() - stopped_at < SESSION_TIMEOUT_MS / 1000
            acked = len(prod.acked)
            prod.wait_acked(acked + 200, 30, f"acks=all writes while node {node_id} is down")
            node.start()
            wait_full_isr(cluster, topic, PARTITIONS, 45)
        prod.wait_acked(len(prod.acked) + 200, 30, "acks=all writes after the rolling restart")
        assert all(leader >= 0 for leader in leaders(cluster, topic, PARTITIONS).values())
    finally:
        prod.stop(flush_timeout=60)
        reader.stop()
    prod.check_finished()
    log = read_log(cluster.bootstrap, topic, PARTITIONS, at_least=acked_ends(prod))
    check_acknowledged(prod, log)
    check_reader(reader, log)
