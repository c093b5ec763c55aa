"""KIP-932 share state across a leader's kill -9 on a 3-node cluster (confluent-kafka's
ShareConsumer).

A 3-partition topic, RF 3, led by three different nodes. A share group (starting at
`earliest`, a group config) accepts about half the records, each batch acknowledged
and committed before the next poll. Then the leader of a partition whose share
coordinator (the `__share_group_state` partition its key hashes to) is another node is
killed: its share state was written to that node with WriteShareGroupState, and the new
leader must read it back (ReadShareGroupState, or in-process if it is the coordinator).
Afterwards every record not accepted before the kill is delivered, and no accepted one
is delivered again.
"""

import time

from confluent_kafka import AcknowledgeType
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from cluster_meta import coordinator_partition, create_topic, leaders, view, wait_partition
from compat_helpers import admin, producer, share_consumer, unique, wait_until

PARTITIONS = 3
PER_PARTITION = 100
SHARE_STATE_TOPIC = "__share_group_state"


def topic_id(cluster, topic):
    client = admin(cluster.bootstrap)
    from confluent_kafka import TopicCollection

    (future,) = client.describe_topics(TopicCollection([topic]), request_timeout=15).values()
    return str(future.result(timeout=20).topic_id)


def start_earliest(cluster, group):
    client = admin(cluster.bootstrap)
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    futures = client.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])], request_timeout=15)
    for f in futures.values():
        f.result(timeout=20)


def state_leaders(cluster):
    """{partition: leader} of the share-state topic, once every partition has one."""
    def ask():
        v = view(cluster, [SHARE_STATE_TOPIC])
        found = v and v.topics.get(SHARE_STATE_TOPIC)
        if not found or not found[1] or any(s.leader < 0 for s in found[1].values()):
            return None
        return {index: s.leader for index, s in found[1].items()}

    return wait_until(ask, 30, f"{SHARE_STATE_TOPIC} with a leader for every partition")


def create_state_topic(cluster, topic):
    """A throwaway share group's first fetch creates the share-state topic."""
    c = share_consumer(cluster.bootstrap, unique("sg-first"), topic, explicit=True)
    try:
        wait_until(lambda: c.poll(0.5) is not None and view(cluster, [SHARE_STATE_TOPIC])
                   and SHARE_STATE_TOPIC in view(cluster, [SHARE_STATE_TOPIC]).topics, 30,
                   f"{SHARE_STATE_TOPIC} created by a share fetch")
    finally:
        c.close()


def group_with_a_remote_coordinator(cluster, tid, led):
    """A group name one of whose share partitions has its coordinator on a node other
    than the partition's leader: (group, that partition)."""
    states = state_leaders(cluster)
    for _ in range(200):
        group = unique("sg")
        for p, leader in enumerate(led):
            if states[coordinator_partition(f"{group}:{tid}:{p}", len(states))] != leader:
                return group, p
    raise AssertionError("no group name puts a share coordinator away from its partition's leader")


def accept_some(c, want, seen, accepted, timeout):
    """Polls, accepting every record and committing each batch, until `want` are accepted."""
    deadline = time.monotonic() + timeout
    while len(accepted) < want:
        assert time.monotonic() < deadline, f"only {len(accepted)} of {want} accepted"
        batch = [m for m in c.poll(0.5) if m.error() is None]
        for m in batch:
            seen.append((m.partition(), m.offset()))
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        if batch:
            results = c.commit_sync(10)
            if all(e is None for e in results.values()):
                accepted.update((m.partition(), m.offset()) for m in batch)


def test_accepted_records_stay_accepted_across_a_leaders_kill_9(cluster_factory):
    cluster = cluster_factory(settings={"group.share.heartbeat.interval.ms": "500",
                                        "group.share.min.heartbeat.interval.ms": "500"})
    topic = unique("share-failover")
    create_topic(cluster, topic, assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]],
                 config={"min.insync.replicas": "2"})
    create_state_topic(cluster, topic)
    led = leaders(cluster, topic, PARTITIONS)
    group, remote = group_with_a_remote_coordinator(cluster, topic_id(cluster, topic), led)
    start_earliest(cluster, group)
    prod = producer(cluster.bootstrap, **{"enable.idempotence": True, "acks": "all"})
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            prod.produce(topic, value=b"p%d-%03d" % (p, i), partition=p)
    assert prod.flush(60) == 0
    everything = {(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)}

    c = share_consumer(cluster.bootstrap, group, topic, explicit=True)
    seen, accepted = [], set()
    try:
        accept_some(c, len(everything) // 2, seen, accepted, 60)
    finally:
        c.close()

    victim = led[remote]
    cluster.node(victim).kill9()
    for p in range(PARTITIONS):
        wait_partition(cluster, topic, p, lambda s: s.leader >= 0 and s.leader != victim, 15,
                       f"a leader other than killed node {victim}", exclude=(victim,))

    c = share_consumer(cluster.serving(exclude=(victim,))[0].bootstrap, group, topic, explicit=True)
    after, after_accepted = [], set()
    try:
        rest = len(everything - accepted)
        accept_some(c, rest, after, after_accepted, 90)
        # Anything accepted before the kill would show up now if its state was lost.
        end = time.monotonic() + 2
        while time.monotonic() < end:
            after.extend((m.partition(), m.offset()) for m in c.poll(0.3) if m.error() is None)
    finally:
        c.close()
    again = accepted & set(after)
    assert not again, f"{len(again)} records accepted before the kill were delivered again: {sorted(again)[:10]}"
    assert accepted | after_accepted == everything, "every record accepted exactly once across the kill"


def test_share_group_offsets_reset_where_the_share_coordinator_is_another_node(cluster_factory):
    """AlterShareGroupOffsets, DescribeShareGroupOffsets and DeleteShareGroupOffsets at
    the group's coordinator, for share partitions whose state is kept by other nodes
    (InitializeShareGroupState, ReadShareGroupStateSummary, DeleteShareGroupState between
    nodes): a new member starts exactly at the reset offsets. DescribeShareGroupOffsets
    v1's lag (KIP-1226) takes the high watermark of partitions led by other nodes from
    their leaders, and the delivery-complete count from the state's coordinator."""
    import share_offsets_wire as wire
    from cluster_wire import find_coordinator

    cluster = cluster_factory(settings={"group.share.heartbeat.interval.ms": "500",
                                        "group.share.min.heartbeat.interval.ms": "500"})
    topic = unique("share-reset")
    create_topic(cluster, topic, assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    create_state_topic(cluster, topic)
    tid, states = topic_id(cluster, topic), state_leaders(cluster)
    any_node = cluster.serving()[0].bootstrap
    for _ in range(200):
        group = unique("sg")
        error, coordinator = find_coordinator(any_node, group, 0)
        assert error == 0
        homes = [states[coordinator_partition(f"{group}:{tid}:{p}", len(states))] for p in range(PARTITIONS)]
        if any(home != coordinator for home in homes):
            break
    else:
        raise AssertionError("no group name keeps a share partition's state away from its group coordinator")
    at = cluster.node(coordinator).bootstrap
    start_earliest(cluster, group)
    prod = producer(cluster.bootstrap, **{"enable.idempotence": True, "acks": "all"})
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            prod.produce(topic, value=b"p%d-%03d" % (p, i), partition=p)
    assert prod.flush(60) == 0

    c = share_consumer(cluster.bootstrap, group, topic, explicit=True)
    try:
        accept_some(c, PARTITIONS * PER_PARTITION, [], set(), 60)
    finally:
        c.close()
    described = wire.describe(at, group)
    assert {p: v[0] for p, v in described["topics"][topic].items()} == {p: PER_PARTITION for p in range(PARTITIONS)}
    # Everything accepted: no lag, wherever the partition's leader is.
    described = wire.describe(at, group, version=1)
    assert {p: (v[0], v[3]) for p, v in described["topics"][topic].items()} == \
        {p: (PER_PARTITION, 0) for p in range(PARTITIONS)}, described

    reset = {p: 60 + 10 * p for p in range(PARTITIONS)}

    def altered():
        result = wire.alter(at, group, {topic: reset})
        return result if result[0] != 68 else None  # NON_EMPTY_GROUP: the leave is trailing

    error, message, partitions = wait_until(altered, 15, "the group empty")
    assert (error, partitions) == (0, {topic: {p: 0 for p in range(PARTITIONS)}}), message
    assert {p: v[0] for p, v in wire.describe(at, group)["topics"][topic].items()} == reset
    # From a reset start offset nothing is done yet: lag = high watermark - start.
    described = wire.describe(at, group, version=1)
    assert {p: v[3] for p, v in described["topics"][topic].items()} == \
        {p: PER_PARTITION - start for p, start in reset.items()}, described

    c = share_consumer(cluster.bootstrap, group, topic, explicit=True)
    seen, accepted = [], set()
    want = {(p, o) for p, start in reset.items() for o in range(start, PER_PARTITION)}
    try:
        accept_some(c, len(want), seen, accepted, 60)
        end = time.monotonic() + 2
        while time.monotonic() < end:
            seen.extend((m.partition(), m.offset()) for m in c.poll(0.3) if m.error() is None)
    finally:
        c.close()
    assert sorted(seen) == sorted(want), "exactly the records from the reset offsets on, once each"

    error, message, topics = wait_until(lambda: (lambda r: r if r[0] != 68 else None)(wire.delete(at, group, [topic])),
                                        15, "the group empty again")
    assert (error, topics) == (0, {topic: 0}), message
    assert wire.describe(at, group)["topics"] == {}
    after = wire.describe(at, group, {topic: list(range(PARTITIONS))})["topics"][topic]
    assert all(v == (-1, -1, 0) for v in after.values()), after


def test_share_lag_where_the_state_and_the_partitions_are_on_other_nodes(cluster_factory):
    """DescribeShareGroupOffsets v1 (KIP-1226) at the group's coordinator on a 3-node
    cluster: each leader writes its delivery-complete count to the share-state
    coordinator (WriteShareGroupState v1 for the partition whose coordinator is another
    node), the group coordinator reads it (ReadShareGroupStateSummary v1 where the state
    is elsewhere) and asks the other leaders for their high watermarks. The lag is
    exactly the records neither accepted nor rejected."""
    import share_offsets_wire as wire
    from cluster_wire import find_coordinator

    cluster = cluster_factory(settings={"group.share.heartbeat.interval.ms": "500",
                                        "group.share.min.heartbeat.interval.ms": "500"})
    topic = unique("share-lag")
    create_topic(cluster, topic, assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    create_state_topic(cluster, topic)
    led = leaders(cluster, topic, PARTITIONS)
    group, _remote = group_with_a_remote_coordinator(cluster, topic_id(cluster, topic), led)
    error, coordinator = find_coordinator(cluster.serving()[0].bootstrap, group, 0)
    assert error == 0
    start_earliest(cluster, group)
    per_partition, accept, reject = 10, {0, 1, 2, 5, 6}, {7}
    prod = producer(cluster.bootstrap, **{"enable.idempotence": True, "acks": "all"})
    for p in range(PARTITIONS):
        for i in range(per_partition):
            prod.produce(topic, value=b"p%d-%02d" % (p, i), partition=p)
    assert prod.flush(60) == 0

    everything = {(p, o) for p in range(PARTITIONS) for o in range(per_partition)}
    chosen = {(p, o) for p in range(PARTITIONS) for o in accept | reject}
    seen, done = set(), set()
    c = share_consumer(cluster.bootstrap, group, topic, explicit=True)
    try:
        def take():
            for m in c.poll(0.5):
                if m.error() is not None:
                    continue
                at = (m.partition(), m.offset())
                seen.add(at)
                kind = (AcknowledgeType.ACCEPT if m.offset() in accept else
                        AcknowledgeType.REJECT if m.offset() in reject else AcknowledgeType.RELEASE)
                c.acknowledge(m, kind)
                if kind != AcknowledgeType.RELEASE:
                    done.add(at)
            c.commit_sync(10)
            return seen == everything and done == chosen

        wait_until(take, 60, "every record seen and the chosen ones accepted or rejected")
    finally:
        c.close()

    at = cluster.node(coordinator).bootstrap
    want = {p: (3, 4) for p in range(PARTITIONS)}  # start 3; 3, 4, 8 and 9 not done
    got = None
    deadline = time.monotonic() + 20
    while got != want and time.monotonic() < deadline:
        described = wire.describe(at, group, version=1)
        got = {p: (v[0], v[3]) for p, v in described["topics"][topic].items()}
        time.sleep(0.2)
    assert got == want, described
