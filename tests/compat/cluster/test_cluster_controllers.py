"""Losing controllers: three nodes, each broker and controller voter.

- One lost (the quorum's leader when DescribeQuorum names it): topics are still created
  and served.
- Two lost: a metadata change fails with a clear error (an error code and message in the
  CreateTopics answer, within a bounded time — not a hang, not a success), while the
  surviving node keeps serving produce and fetch for the partition it leads.
- Both back: metadata changes work again.
"""

import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic

import cluster_wire
from cluster_load import produce_batch, read_log, values_of
from cluster_meta import create_topic, view, wait_partition
from compat_helpers import admin, unique, wait_until

CONTROLLER_UNAVAILABLE = {
    7,  # REQUEST_TIMED_OUT: no majority to commit the write
    41,  # NOT_CONTROLLER: no leader known
}


def batch(tag, n=50):
    return [f"{tag}-{i:04d}".encode() for i in range(n)]


def quorum_leader(cluster):
    for node in cluster.serving():
        leader = cluster_wire.describe_quorum_leader(node.bootstrap)
        if leader is not None:
            return leader
    return None


def test_one_controller_lost_then_two(cluster):
    first_victim = quorum_leader(cluster) or 1
    second_victim = next(n for n in (1, 2, 3) if n != first_victim)
    survivor = next(n for n in (1, 2, 3) if n not in (first_victim, second_victim))
    # A partition only the survivor holds, to show it keeps serving without a quorum.
    solo = create_topic(cluster, unique("solo"), assignment=[[survivor]])
    early = batch("early")
    acked, failed = produce_batch(cluster.bootstrap, solo, early)
    assert not failed and len(acked) == len(early), failed

    cluster.node(first_victim).kill9()
    wait_until(lambda: (v := view(cluster)) is not None and first_victim not in v.brokers, 15,
               f"killed node {first_victim} fenced")
    created = create_topic(cluster, unique("after-one-lost"), partitions=2, replication_factor=2)
    for p in range(2):
        wait_partition(cluster, created, p, lambda s: first_victim not in s.replicas and len(s.replicas) == 2, 5,
                       "two live replicas")
    values = batch("one-lost")
    acked, failed = produce_batch(cluster.bootstrap, created, values, partition=1)
    assert not failed and len(acked) == len(values), failed
    assert values_of(read_log(cluster.bootstrap, created, 2), 1) == values

    cluster.node(second_victim).kill9()
    time.sleep(1.0)  # let the survivor notice; nothing below may depend on more
    only = cluster.node(survivor).bootstrap
    started = time.monotonic()
    error, message = cluster_wire.create_topic(only, unique("no-quorum"), 1, 1, timeout_ms=10000)
    took = time.monotonic() - started
    assert error in CONTROLLER_UNAVAILABLE, f"CreateTopics without a controller majority answered {error} {message!r}"
    assert message, "the refusal carries no error message"
    assert took < 30, f"the refusal took {took:.1f} s"
    futures = admin(only).create_topics([NewTopic(unique("no-quorum-admin"), 1, 1)],
                                        operation_timeout=10, request_timeout=30)
    try:
        for future in futures.values():
            future.result(timeout=45)
        raise AssertionError("a topic was created with two of three controllers down")
    except KafkaException:
        pass

    late = batch("late")
    acked, failed = produce_batch(only, solo, late, timeout=20)
    assert not failed and len(acked) == len(late), f"the surviving leader stopped serving: {failed}"
    assert values_of(read_log(only, solo, 1)) == early + late

    cluster.node(first_victim).start()
    cluster.node(second_victim).start()
    again = create_topic(cluster, unique("quorum-back"), partitions=1, replication_factor=3)
    acked, failed = produce_batch(cluster.bootstrap, again, batch("back"))
    assert not failed, failed
