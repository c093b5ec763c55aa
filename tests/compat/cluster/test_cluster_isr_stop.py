"""SIGSTOP followers: the ISR shrinks after replica.lag.time.max.ms, acks=all keeps
working while min.insync.replicas holds and is refused with NOT_ENOUGH_REPLICAS once it
does not; after SIGCONT the followers catch up and rejoin.

Layout: node 1 is the only controller voter (and a broker); nodes 2 and 3 are brokers
only. Stopping both followers must not take the controller majority with them, or the
ISR could not shrink at all. The broker session timeout is long (30 s) so that the
followers leave the ISR through the leader's lag check, not through being fenced.
"""

import time

from confluent_kafka import KafkaError

from cluster_load import produce_batch, read_log, values_of
from cluster_meta import create_topic, wait_partition
from compat_helpers import unique

LAG_MS = 2000
SHRINK_TIMEOUT_S = LAG_MS / 1000 + 10  # well under the 30 s session timeout
REJOIN_TIMEOUT_S = 30


def isr_is(expected):
    return lambda s: sorted(s.isr) == sorted(expected)


def under_replicated(node):
    return node.metrics().get("tidelog_under_replicated_partitions", -1.0)


def wait_under_replicated(node, want, timeout=10):
    """The leader's under-replicated gauge (what operators alert on) reaches `want`."""
    deadline = time.monotonic() + timeout
    seen = under_replicated(node)
    while seen != want and time.monotonic() < deadline:
        time.sleep(0.2)
        seen = under_replicated(node)
    assert seen == want, f"tidelog_under_replicated_partitions on node {node.node_id} is {seen}, expected {want}"


def batch(tag, n=100):
    return [f"{tag}-{i:04d}".encode() for i in range(n)]


def test_stopped_followers_leave_isr_then_not_enough_replicas_then_rejoin(cluster_factory):
    cluster = cluster_factory(size=3, voters=1, settings={
        "replica.lag.time.max.ms": str(LAG_MS),
        "broker.session.timeout.ms": "30000",
    })
    topic = create_topic(cluster, unique("isr"), config={"min.insync.replicas": "2"}, assignment=[[1, 2, 3]])
    wait_partition(cluster, topic, 0, lambda s: s.leader == 1 and isr_is([1, 2, 3])(s), REJOIN_TIMEOUT_S,
                   "leader 1 (the first replica) and the full ISR", via=1)
    expected = []
    leader = cluster.node(1).bootstrap  # the clients never wait on a stopped node's answers

    first = batch("all-in")
    acked, failed = produce_batch(leader, topic, first)
    assert not failed and len(acked) == len(first), f"with the full ISR: {failed}"
    expected += first

    cluster.node(2).pause()
    stopped_at = time.monotonic()
    wait_partition(cluster, topic, 0, isr_is([1, 3]), SHRINK_TIMEOUT_S,
                   f"stopped follower 2 out of the ISR after replica.lag.time.max.ms={LAG_MS}", via=1)
    assert time.monotonic() - stopped_at >= LAG_MS / 1000 * 0.9, "follower 2 left the ISR before it lagged"
    wait_under_replicated(cluster.node(1), 1.0)
    second = batch("one-stopped")
    acked, failed = produce_batch(leader, topic, second)
    assert not failed and len(acked) == len(second), f"with ISR [1, 3] and min.insync.replicas=2: {failed}"
    expected += second

    cluster.node(3).pause()
    wait_partition(cluster, topic, 0, isr_is([1]), SHRINK_TIMEOUT_S, "stopped follower 3 out of the ISR", via=1)
    refused = batch("refused", 10)
    acked, failed = produce_batch(leader, topic, refused, timeout=15)
    assert not acked, f"acks=all acknowledged {len(acked)} records with ISR [1] and min.insync.replicas=2"
    codes = {err.code() for err in failed.values()}
    assert codes == {KafkaError.NOT_ENOUGH_REPLICAS}, f"expected NOT_ENOUGH_REPLICAS, got {sorted(map(str, failed.values()))[:3]}"

    cluster.node(2).resume()
    cluster.node(3).resume()
    wait_partition(cluster, topic, 0, isr_is([1, 2, 3]), REJOIN_TIMEOUT_S, "both followers back in the ISR", via=1)
    wait_under_replicated(cluster.node(1), 0.0)
    last = batch("rejoined")
    acked, failed = produce_batch(leader, topic, last)
    assert not failed and len(acked) == len(last), f"after the rejoin: {failed}"
    expected += last

    # NOT_ENOUGH_REPLICAS is answered before the append: the refused records are nowhere.
    assert values_of(read_log(leader, topic, 1)) == expected
