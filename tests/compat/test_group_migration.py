"""KIP-848's online migration with confluent-kafka (librdkafka 2.16): classic members
(JoinGroup / SyncGroup / Heartbeat) and consumer-protocol members in one group.

- A classic member joins a consumer group that has members: the broker assigns it like
  any other member, it reconciles by rejoining (eager `range` and `cooperative-sticky`),
  no partition has two owners, every record is consumed once, and its LeaveGroup hands
  its partitions back.
- A consumer-protocol member joins a classic group with members: the group becomes a
  consumer group with the classic members in it, holding what they held, and the new
  member gets its share once they give it up.
- The last consumer-protocol member leaves a group whose other members are classic:
  the group becomes a classic group again, its members rejoin it and share every
  partition, and every record is still consumed once.
- A classic static member takes over the instance of the last consumer-protocol member
  (which closed, keeping its slot): the group becomes classic with it holding what the
  closed member held.
"""

import pytest
from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient

from compat_helpers import DeliveryLog, create_topic, produce_all, producer, unique, wait_until
from consumer_group_members import Ownership, close_all, poll_all, settle

SETTINGS = {
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.initial.rebalance.delay.ms": "0",
}


def classic(assignor):
    return {
        "group.protocol": "classic",
        "partition.assignment.strategy": assignor,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
    }


@pytest.fixture(scope="module")
def migration_broker(tmp_path_factory):
    from broker_process import Broker

    broker = Broker(tmp_path_factory.mktemp("broker"), SETTINGS)
    broker.start()
    yield broker
    broker.cleanup()


def describe(bootstrap, group):
    client = AdminClient({"bootstrap.servers": bootstrap})
    return client.describe_consumer_groups([group])[group].result(timeout=10)


def consume_all_once(bootstrap, topic, own, consumers, count):
    log = DeliveryLog()
    produce_all(producer(bootstrap), topic, [(i, str(i).encode(), b"v", None, None) for i in range(count)], log)
    assert len(log.acked) == count
    got = {}
    wait_until(
        lambda: poll_all(consumers, 0.3, got) or sum(len(v) for v in got.values()) >= count,
        30,
        f"{count} records consumed",
    )
    everything = [r for v in got.values() for r in v]
    assert len(everything) == count and len(set(everything)) == count, "a record consumed twice"
    for name, records in got.items():
        assert {p for p, _ in records} <= own.held[name], f"{name} read a partition it did not hold"


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_a_classic_member_joins_a_consumer_group_and_leaves_it(migration_broker, assignor):
    bootstrap = migration_broker.bootstrap
    topic = create_topic(bootstrap, unique("migrate-in"), partitions=4)
    group = unique("g")
    own = Ownership()
    consumers = {"new": own.member("new", bootstrap, group)}
    try:
        own.subscribe("new", consumers["new"], topic)
        settle(own, consumers, {"new": 4})
        consumers["old"] = own.member("old", bootstrap, group, **classic(assignor))
        own.subscribe("old", consumers["old"], topic)
        settle(own, consumers, {"new": 2, "old": 2})
        assert not own.violations, f"partitions with two owners: {own.violations}"

        desc = describe(bootstrap, group)
        assert desc.type == ConsumerGroupType.CONSUMER
        assert len(desc.members) == 2
        assigned = sorted(tp.partition for m in desc.members for tp in m.assignment.topic_partitions)
        assert assigned == [0, 1, 2, 3]

        consume_all_once(bootstrap, topic, own, consumers, 40)
        assert not own.violations

        consumers.pop("old").close()
        settle(own, consumers, {"new": 4})
        assert len(describe(bootstrap, group).members) == 1
    finally:
        close_all(consumers)


def test_a_consumer_member_upgrades_a_classic_group(migration_broker):
    bootstrap = migration_broker.bootstrap
    topic = create_topic(bootstrap, unique("migrate-up"), partitions=4)
    group = unique("g")
    own = Ownership()
    consumers = {}
    try:
        for name in ("c1", "c2"):
            consumers[name] = own.member(name, bootstrap, group, **classic("cooperative-sticky"))
            own.subscribe(name, consumers[name], topic)
        settle(own, consumers, {"c1": 2, "c2": 2})
        assert describe(bootstrap, group).type == ConsumerGroupType.CLASSIC

        consumers["new"] = own.member("new", bootstrap, group)
        own.subscribe("new", consumers["new"], topic)

        def spread():
            poll_all(consumers, 0.2)
            held = {n: len(own.held[n]) for n in consumers}
            return sum(held.values()) == 4 and all(k >= 1 for k in held.values())

        wait_until(spread, 30, "the three members sharing the four partitions")
        assert not own.violations, f"partitions with two owners: {own.violations}"
        desc = describe(bootstrap, group)
        assert desc.type == ConsumerGroupType.CONSUMER
        assert len(desc.members) == 3
        consume_all_once(bootstrap, topic, own, consumers, 40)
        assert not own.violations
    finally:
        close_all(consumers)


def test_the_last_consumer_member_leaving_downgrades_the_group(migration_broker):
    bootstrap = migration_broker.bootstrap
    topic = create_topic(bootstrap, unique("migrate-down"), partitions=4)
    group = unique("g")
    own = Ownership()
    consumers = {"new": own.member("new", bootstrap, group)}
    try:
        own.subscribe("new", consumers["new"], topic)
        settle(own, consumers, {"new": 4})
        for name in ("c1", "c2"):
            consumers[name] = own.member(name, bootstrap, group, **classic("range"))
            own.subscribe(name, consumers[name], topic)
        wait_until(
            lambda: poll_all(consumers, 0.2) or sum(len(own.held[n]) for n in consumers) == 4
            and all(own.held[n] for n in consumers),
            30,
            "the three members sharing the four partitions",
        )
        assert describe(bootstrap, group).type == ConsumerGroupType.CONSUMER

        consumers.pop("new").close()
        settle(own, consumers, {"c1": 2, "c2": 2})
        assert not own.violations, f"partitions with two owners: {own.violations}"
        desc = describe(bootstrap, group)
        assert desc.type == ConsumerGroupType.CLASSIC, "the group is classic again"
        assert sorted(m.member_id for m in desc.members) == sorted(
            c.memberid() for c in consumers.values()
        )
        consume_all_once(bootstrap, topic, own, consumers, 40)
        assert not own.violations
    finally:
        close_all(consumers)


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades(migration_broker):
    bootstrap = migration_broker.bootstrap
    topic = create_topic(bootstrap, unique("migrate-static"), partitions=4)
    group = unique("g")
    instance = unique("instance")
    own = Ownership()
    consumers = {"new": own.member("new", bootstrap, group, **{"group.instance.id": instance})}
    try:
        own.subscribe("new", consumers["new"], topic)
        settle(own, consumers, {"new": 4})
        consumers["c1"] = own.member("c1", bootstrap, group, **classic("cooperative-sticky"))
        own.subscribe("c1", consumers["c1"], topic)
        settle(own, consumers, {"new": 2, "c1": 2})
        held_by_new = set(own.held["new"])

        # A static member's close keeps its slot (epoch -2) for its session.
        consumers.pop("new").close()
        own.held["new"] = set()
        for p in held_by_new:
            own.owner.pop(p, None)
        replacement = classic("cooperative-sticky")
        replacement["group.instance.id"] = instance
        consumers["old"] = own.member("old", bootstrap, group, **replacement)
        own.subscribe("old", consumers["old"], topic)
        settle(own, consumers, {"c1": 2, "old": 2})
        assert own.held["old"] == held_by_new, "it holds what the member it replaced held"
        assert not own.violations, f"partitions with two owners: {own.violations}"
        desc = describe(bootstrap, group)
        assert desc.type == ConsumerGroupType.CLASSIC, "the group is classic again"
        assert len(desc.members) == 2
        consume_all_once(bootstrap, topic, own, consumers, 40)
    finally:
        close_all(consumers)
