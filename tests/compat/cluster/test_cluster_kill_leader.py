"""kill -9 rounds on a 3-node cluster under continuous idempotent acks=all load.

Topic RF 3, min.insync.replicas=2. Each round kill -9's the leader of partition 0,
restarts it, then kill -9's another node and restarts that. Afterwards every
acknowledged value is read back exactly once at its acknowledged offset, a reader that
followed the topic throughout never saw an offset go backwards nor a record the final
log does not hold, and after every kill each partition had a live leader within 10 s.

Ten rounds, as the issue asks (about two minutes on two cores); fewer for a quick look:
    CLUSTER_TEST_ROUNDS=3 .venv/bin/python -m pytest \
        tests/compat/cluster/test_cluster_kill_leader.py
"""

import os
import time

from cluster_load import ContinuousProducer, acked_ends, TailReader, check_acknowledged, check_reader, read_log
from cluster_meta import create_topic, leaders, wait_full_isr, wait_partition
from compat_helpers import unique

ROUNDS = int(os.environ.get("CLUSTER_TEST_ROUNDS", "10"))
PARTITIONS = 3
LEADER_DEADLINE_S = 10.0
REJOIN_TIMEOUT_S = 45.0


def kill_and_expect_leaders(cluster, topic, victim, prod):
    """kill -9 `victim`; every partition must be led by another node within 10 s, and
    acks=all writes must flow again."""
    acked_before = len(prod.acked)
    cluster.node(victim).kill9()
    killed_at = time.monotonic()
    for p in range(PARTITIONS):
        remaining = LEADER_DEADLINE_S - (time.monotonic() - killed_at)
        wait_partition(cluster, topic, p, lambda s: s.leader >= 0 and s.leader != victim, max(remaining, 0.1),
                       f"a leader other than killed node {victim} within {LEADER_DEADLINE_S} s of the kill",
                       exclude=(victim,))
    prod.wait_acked(acked_before + 200, 30, f"acks=all writes after killing node {victim}")


def restart_and_rejoin(cluster, topic, node_id):
    cluster.node(node_id).start()
    wait_full_isr(cluster, topic, PARTITIONS, REJOIN_TIMEOUT_S)


def test_kill9_leader_rounds_lose_nothing_acknowledged(cluster):
    topic = create_topic(cluster, unique("failover"), PARTITIONS, 3, {"min.insync.replicas": "2"})
    prod = ContinuousProducer(cluster.bootstrap, topic, "v").start()
    reader = TailReader(cluster.bootstrap, topic, PARTITIONS).start()
    try:
        prod.wait_acked(500, 30, "acks=all writes before the first kill")
        wait_full_isr(cluster, topic, PARTITIONS, REJOIN_TIMEOUT_S)
        for round_no in range(ROUNDS):
            leader = leaders(cluster, topic, PARTITIONS)[0]
            assert leader >= 0, f"round {round_no}: partition 0 has no leader"
            kill_and_expect_leaders(cluster, topic, leader, prod)
            restart_and_rejoin(cluster, topic, leader)

            # "Another node": alternately the current leader of partition 0 and one of its
            # followers, never the node just restarted.
            now_leading = leaders(cluster, topic, PARTITIONS)[0]
            others = sorted(set(cluster.nodes) - {leader})
            if round_no % 2 == 0 and now_leading in others:
                second = now_leading
            else:
                second = next(n for n in others if n != now_leading)
            kill_and_expect_leaders(cluster, topic, second, prod)
            restart_and_rejoin(cluster, topic, second)
        prod.wait_acked(len(prod.acked) + 200, 30, "acks=all writes after the last round")
    finally:
        prod.stop(flush_timeout=60)
        reader.stop()
    prod.check_finished()
    log = read_log(cluster.bootstrap, topic, PARTITIONS, at_least=acked_ends(prod))
    check_acknowledged(prod, log)
    check_reader(reader, log)
    assert reader.count() > 0, "the reader was served nothing"
