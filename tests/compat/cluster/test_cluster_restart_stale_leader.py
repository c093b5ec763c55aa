"""A node restarting after kill -9 must not act on the metadata it had when it died.

Its own copy of the metadata log says it leads the partition; while it was down the
leadership moved on. Kafka's broker takes no client request until its metadata has
caught up with the quorum (the initial catch-up before request processing is enabled),
so it never answers as the leader of an epoch that has ended. Here a client hammers the
restarting node with acks=1 Produce requests for that partition from the moment it
accepts connections: none may be acknowledged, because a write acknowledged by a stale
leader is truncated away once the node learns the new leader.
"""

import time

import cluster_wire
from cluster_meta import create_topic, leaders, wait_full_isr, wait_partition
from compat_helpers import unique

NONE, NOT_LEADER_OR_FOLLOWER = 0, 6
WIRE_ERRORS = (OSError, TimeoutError, EOFError, cluster_wire.kafka_wire.ConnectionClosed)
CATCH_UP_WITHIN_S = 60.0


def test_a_restarted_leader_acknowledges_nothing_in_its_ended_epoch(cluster):
    topic = create_topic(cluster, unique("stale-leader"), 1, 3, {"min.insync.replicas": "2"})
    wait_full_isr(cluster, topic, 1, 45)
    old = leaders(cluster, topic, 1)[0]
    assert cluster_wire.produce(cluster.node(old).bootstrap, topic, 0, [b"before"])[0] == NONE
    cluster.node(old).kill9()
    new = wait_partition(cluster, topic, 0, lambda s: s.leader >= 0 and s.leader != old, 30,
                         "a new leader after the kill", exclude=(old,)).leader
    for i in range(5):
        assert cluster_wire.produce(cluster.node(new).bootstrap, topic, 0, [f"moved-{i}".encode()])[0] == NONE

    node = cluster.node(old)
    node.launch()
    answers = []
    deadline = time.monotonic() + CATCH_UP_WITHIN_S
    while time.monotonic() < deadline:
        try:
            code, offset = cluster_wire.produce(node.bootstrap, topic, 0, [b"stale"], acks=1, timeout_ms=1000)
        except WIRE_ERRORS:
            time.sleep(0.005)
            continue
        answers.append((code, offset))
        if code == NOT_LEADER_OR_FOLLOWER and node.is_ready():
            break
    acknowledged = [a for a in answers if a[0] == NONE]
    assert not acknowledged, (f"the restarted node acknowledged {len(acknowledged)} acks=1 writes as leader of "
                              f"an ended epoch, e.g. at offset {acknowledged[0][1]}")
    assert answers and answers[-1][0] == NOT_LEADER_OR_FOLLOWER, f"never answered as a follower: {answers[-5:]}"
    node.wait_ready(CATCH_UP_WITHIN_S)
