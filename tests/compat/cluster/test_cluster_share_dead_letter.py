"""KIP-1191 dead-letter topics on a 3-node cluster (confluent-kafka's ShareConsumer).

The share partition is led by node 1 and the dead-letter partition by node 3, so node 1
produces each copy to node 3 over the inter-broker listener. While node 3 is down, a
rejected record waits in ARCHIVING (never delivered again); once node 3 is back its
copy is written: late, but once, and the earlier copy is not written again.
"""

import time

from confluent_kafka import AcknowledgeType

from cluster_meta import create_topic, leaders, wait_partition
from compat_helpers import producer, read_partition_zero, set_group_configs, share_consumer, unique, wait_until

FAST_HEARTBEATS = {"group.share.heartbeat.interval.ms": "500", "group.share.min.heartbeat.interval.ms": "500"}


def dead_letters(bootstrap, topic, want, settle=3.0, timeout=60):
    """(value, __dlq.errors.offset) of every record of partition 0 of `topic`, once
    `want` are there and `settle` seconds passed with no more."""
    got = read_partition_zero(bootstrap, topic, settle=settle, timeout=timeout, at_least=want)
    return [(m.value(), dict(m.headers())["__dlq.errors.offset"].decode()) for m in got]


def test_copies_go_to_another_nodes_leader_and_wait_for_it(cluster_factory):
    cluster = cluster_factory(settings=FAST_HEARTBEATS)
    topic, group = unique("share-dlq"), unique("sg")
    dlq = "dlq." + unique("dead")
    create_topic(cluster, topic, assignment=[[1]])
    create_topic(cluster, dlq, assignment=[[3]], config={"errors.deadletterqueue.group.enable": "true"})
    assert leaders(cluster, topic, 1) == {0: 1} and leaders(cluster, dlq, 1) == {0: 3}
    set_group_configs(cluster.bootstrap, group, {
        "share.auto.offset.reset": "earliest",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.copy.record.enable": "true",
    })
    prod = producer(cluster.bootstrap)
    for value in (b"first-poison", b"second-poison", b"fine"):
        prod.produce(topic, value=value, partition=0)
    assert prod.flush(30) == 0

    c = share_consumer(cluster.node(1).bootstrap, group, topic, explicit=True)
    try:
        got = []
        wait_until(lambda: got.extend(m for m in c.poll(0.5) if m.error() is None) or len(got) >= 3, 30,
                   "the three records")
        by_value = {m.value(): m for m in got}
        c.acknowledge(by_value[b"first-poison"], AcknowledgeType.REJECT)
        c.acknowledge(by_value[b"fine"], AcknowledgeType.ACCEPT)
        c.commit_sync(10)
        first = (b"first-poison", str(by_value[b"first-poison"].offset()))
        assert dead_letters(cluster.node(1).bootstrap, dlq, 1, settle=0) == [first]

        # The dead-letter partition's only replica goes away: the next copy waits.
        cluster.node(3).kill9()
        c.acknowledge(by_value[b"second-poison"], AcknowledgeType.REJECT)
        c.commit_sync(10)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            assert not [m for m in c.poll(0.3) if m.error() is None], "a rejected record came back"

        cluster.node(3).restart()
        wait_partition(cluster, dlq, 0, lambda s: s.leader == 3, 30, "node 3 leading the dead-letter topic again")
        second = (b"second-poison", str(by_value[b"second-poison"].offset()))
        # The share consumer keeps fetching meanwhile: a fetch is when a failed copy is
        # tried again.
        copies = []
        deadline = time.monotonic() + 60
        while len(copies) < 2:
            assert time.monotonic() < deadline, f"the second copy never came: {copies}"
            assert not [m for m in c.poll(0.5) if m.error() is None], "a rejected record came back"
            copies = dead_letters(cluster.node(1).bootstrap, dlq, 0, settle=1.0)
        assert sorted(dead_letters(cluster.node(1).bootstrap, dlq, 2)) == sorted([first, second])
    finally:
        c.close()


def test_a_new_leader_writes_the_copy_the_old_one_could_not(cluster_factory):
    """The share partition's leader stores the rejected record as ARCHIVING while the
    dead-letter partition is down, then is killed: the new leader never delivers the
    record, and writes its copy once the dead-letter partition is back."""
    cluster = cluster_factory(size=4, voters=3, settings=FAST_HEARTBEATS)
    topic, group = unique("share-dlq-failover"), unique("sg")
    dlq = "dlq." + unique("dead")
    create_topic(cluster, topic, assignment=[[1, 2]])
    create_topic(cluster, dlq, assignment=[[4]], config={"errors.deadletterqueue.group.enable": "true"})
    set_group_configs(cluster.bootstrap, group, {
        "share.auto.offset.reset": "earliest",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.copy.record.enable": "true",
    })
    prod = producer(cluster.bootstrap)
    for value in (b"poison", b"fine"):
        prod.produce(topic, value=value, partition=0)
    assert prod.flush(30) == 0
    wait_partition(cluster, topic, 0, lambda s: s.leader == 1 and len(s.isr) == 2, 30, "node 1 leading, both in sync")

    cluster.node(4).kill9()
    c = share_consumer(cluster.node(2).bootstrap, group, topic, explicit=True)
    try:
        got = []
        wait_until(lambda: got.extend(m for m in c.poll(0.5) if m.error() is None) or len(got) >= 2, 30,
                   "the two records")
        by_value = {m.value(): m for m in got}
        c.acknowledge(by_value[b"poison"], AcknowledgeType.REJECT)
        c.acknowledge(by_value[b"fine"], AcknowledgeType.ACCEPT)
        results = c.commit_sync(10)
        assert all(e is None for e in results.values()), results
        # Stored as ARCHIVING: the copy cannot be written with node 4 down.
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            assert not [m for m in c.poll(0.3) if m.error() is None], "the rejected record came back"
    finally:
        c.close()

    cluster.node(1).kill9()
    wait_partition(cluster, topic, 0, lambda s: s.leader == 2, 30, "node 2 leading", exclude=(1,))
    cluster.node(4).restart()
    wait_partition(cluster, dlq, 0, lambda s: s.leader == 4, 30, "node 4 leading the dead-letter topic again",
                   exclude=(1,))

    d = share_consumer(cluster.node(2).bootstrap, group, topic, explicit=True)
    try:
        copies = []
        deadline = time.monotonic() + 60
        while not copies:
            assert time.monotonic() < deadline, "the new leader never wrote the copy"
            assert not [m for m in d.poll(0.5) if m.error() is None], "the rejected record came back"
            copies = dead_letters(cluster.node(2).bootstrap, dlq, 0, settle=1.0)
        assert dead_letters(cluster.node(2).bootstrap, dlq, 1) == [(b"poison", str(by_value[b"poison"].offset()))]
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            assert not [m for m in d.poll(0.3) if m.error() is None], "a finished record came back"
    finally:
        d.close()
