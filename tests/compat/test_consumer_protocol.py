"""KIP-848 consumer groups with confluent-kafka (librdkafka 2.16), `group.protocol=consumer`.

The broker computes the assignment and members reconcile incrementally: the tests count
what each member is given and asked to give back (its on_assign / on_revoke callbacks,
incremental under this protocol) and check that no partition is held by two members at
once. The broker heartbeats members every 300 ms and fences them after a 4 s session, so
groups settle quickly; every wait is bounded.
"""

import json
import os
import signal
import struct
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, TopicPartition
from confluent_kafka.admin import AdminClient

import kafka_wire
from compat_helpers import (
    DeliveryLog,
    create_topic,
    produce_all,
    producer,
    unique,
    wait_until,
)
from consumer_group_members import MEMBER_SCRIPT, Ownership, close_all, poll_all, settle

SESSION_MS = 4000
SETTINGS = {
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    # Kafka's bounds (45-60 s, 5-15 s) would refuse the short timings above.
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "100",
}


@pytest.fixture(scope="module")
def kip848_broker(tmp_path_factory):
    from broker_process import Broker

    broker = Broker(tmp_path_factory.mktemp("broker"), SETTINGS)
    broker.start()
    yield broker
    broker.cleanup()


def cli(broker, *args):
    done = subprocess.run([str(broker.binary), *args, "--bootstrap", broker.bootstrap],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done


def test_three_members_split_six_partitions_and_consume_each_record_once(kip848_broker):
    bootstrap = kip848_broker.bootstrap
    topic = create_topic(bootstrap, unique("kip848-split"), partitions=6)
    group = unique("g")
    own = Ownership()
    consumers = {n: own.member(n, bootstrap, group) for n in ("a", "b", "c")}
    try:
        for n, c in consumers.items():
            own.subscribe(n, c, topic)
        settle(own, consumers, {"a": 2, "b": 2, "c": 2})
        assert not own.violations
        prod = producer(bootstrap)
        log = DeliveryLog()
        produce_all(prod, topic, [(i, str(i).encode(), b"v", None, None) for i in range(60)], log)
        got = {}
        wait_until(
            lambda: poll_all(consumers, 0.3, got) or sum(len(v) for v in got.values()) >= 60,
            30,
            "60 records consumed",
        )
        everything = [r for v in got.values() for r in v]
        assert len(everything) == 60 and len(set(everything)) == 60
        for name, records in got.items():
            assert {p for p, _ in records} <= own.held[name]
        assert not own.violations

        # The admin client must outlive its futures.
        client = AdminClient({"bootstrap.servers": bootstrap})
        desc = client.describe_consumer_groups([group])[group].result(timeout=10)
        assert desc.type == ConsumerGroupType.CONSUMER
        assert desc.state == ConsumerGroupState.STABLE
        assert len(desc.members) == 3
        assigned = sorted(tp.partition for m in desc.members for tp in m.assignment.topic_partitions)
        assert assigned == list(range(6))

        listed = cli(kip848_broker, "group", "list").stdout.splitlines()
        assert f"{group}\tStable\tconsumer\tconsumer" in listed
        shown = json.loads(cli(kip848_broker, "group", "describe", group, "--window-ms", "200",
                               "--output", "json").stdout)
        assert shown["group_protocol"] == "consumer"
        assert shown["group_epoch"] == shown["assignment_epoch"] >= 3
        assert len(shown["members"]) == 3
        for m in shown["members"]:
            assert m["member_epoch"] == shown["group_epoch"]
            assert m["assignment"] == m["target_assignment"]
            assert len(m["assignment"][0]["partitions"]) == 2
    finally:
        close_all(consumers)


def test_fourth_member_on_twelve_partitions_moves_exactly_three(kip848_broker):
    bootstrap = kip848_broker.bootstrap
    topic = create_topic(bootstrap, unique("kip848-grow"), partitions=12)
    group = unique("g")
    own = Ownership()
    consumers = {n: own.member(n, bootstrap, group) for n in ("a", "b", "c")}
    try:
        for n, c in consumers.items():
            own.subscribe(n, c, topic)
        settle(own, consumers, {"a": 4, "b": 4, "c": 4})
        before = {n: set(own.held[n]) for n in consumers}
        for n in consumers:
            own.revoked[n].clear()
        consumers["d"] = own.member("d", bootstrap, group)
        own.subscribe("d", consumers["d"], topic)
        settle(own, consumers, {"a": 3, "b": 3, "c": 3, "d": 3})
        poll_all(consumers, 1.0)
        revoked = {n: list(own.revoked[n]) for n in ("a", "b", "c")}
        assert sum(len(r) for r in revoked.values()) == 3, revoked
        for n in ("a", "b", "c"):
            assert len(revoked[n]) == 1
            assert own.held[n] <= before[n], "old members keep what they had, minus one"
        assert own.held["d"] == {p for r in revoked.values() for p in r}
        assert not own.violations
    finally:
        close_all(consumers)


def test_restarted_static_member_gets_its_partitions_back(kip848_broker):
    bootstrap = kip848_broker.bootstrap
    topic = create_topic(bootstrap, unique("kip848-static"), partitions=6)
    group = unique("g")
    own = Ownership()
    consumers = {
        "a": own.member("a", bootstrap, group, **{"group.instance.id": "inst-a"}),
        "b": own.member("b", bootstrap, group, **{"group.instance.id": "inst-b"}),
    }
    try:
        for n, c in consumers.items():
            own.subscribe(n, c, topic)
        settle(own, consumers, {"a": 3, "b": 3})
        had = set(own.held["a"])
        b_events = (len(own.assigned["b"]), len(own.revoked["b"]))
        consumers.pop("a").close()
        own.owner = {p: n for p, n in own.owner.items() if n != "a"}
        consumers["a2"] = own.member("a2", bootstrap, group, **{"group.instance.id": "inst-a"})
        own.subscribe("a2", consumers["a2"], topic)
        settle(own, consumers, {"a2": 3, "b": 3})
        poll_all(consumers, 1.0)
        assert own.held["a2"] == had
        assert (len(own.assigned["b"]), len(own.revoked["b"])) == b_events
        assert not own.violations
    finally:
        close_all(consumers)


def test_killed_member_is_fenced_after_its_session_and_only_its_partitions_move(kip848_broker):
    bootstrap = kip848_broker.bootstrap
    topic = create_topic(bootstrap, unique("kip848-fence"), partitions=6)
    group = unique("g")
    own = Ownership()
    consumers = {n: own.member(n, bootstrap, group) for n in ("a", "b")}
    child = subprocess.Popen(
        [sys.executable, "-c", MEMBER_SCRIPT, bootstrap, group, topic],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        for n, c in consumers.items():
            own.subscribe(n, c, topic)
        settle(own, consumers, {"a": 2, "b": 2})
        before = {n: set(own.held[n]) for n in consumers}
        for n in consumers:
            own.revoked[n].clear()
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        killed_at = time.monotonic()
        settle(own, consumers, {"a": 3, "b": 3}, timeout=SESSION_MS / 1000 + 20)
        took = time.monotonic() - killed_at
        assert took >= SESSION_MS / 1000 * 0.8, f"fenced after {took:.1f} s, before its session"
        for n in consumers:
            assert own.revoked[n] == [], "only the dead member's partitions move"
            assert before[n] <= own.held[n]
        assert not own.violations
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=10)
        close_all(consumers)


def test_committed_offsets_and_the_group_survive_a_broker_restart(broker_factory):
    broker = broker_factory(SETTINGS)
    bootstrap = broker.bootstrap
    topic = create_topic(bootstrap, unique("kip848-restart"), partitions=2)
    group = unique("g")
    prod = producer(bootstrap)
    produce_all(prod, topic, [(i, str(i).encode(), b"v", None, None) for i in range(20)], DeliveryLog())
    own = Ownership()
    consumers = {"a": own.member("a", bootstrap, group)}
    own.subscribe("a", consumers["a"], topic)
    got = {}
    wait_until(
        lambda: poll_all(consumers, 0.3, got) or len(got.get("a", [])) >= 20,
        30,
        "20 records consumed",
    )
    consumers["a"].commit(asynchronous=False)
    positions = {
        tp.partition: tp.offset
        for tp in consumers["a"].committed([TopicPartition(topic, p) for p in (0, 1)], timeout=10)
    }
    assert sum(positions.values()) == 20
    consumers["a"].close()

    broker.stop()
    broker.start()
    again = own.member("a2", bootstrap, group)
    try:
        committed = wait_until(
            lambda: again.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=10),
            30,
            "committed offsets after the restart",
        )
        assert {tp.partition: tp.offset for tp in committed} == positions
        own.subscribe("a2", again, topic)
        settle(own, {"a2": again}, {"a2": 2})
        assert again.poll(1.0) is None, "nothing consumed twice"
    finally:
        again.close()


def test_regex_subscription_is_resolved_by_the_broker_and_follows_new_topics(kip848_broker):
    bootstrap = kip848_broker.bootstrap
    prefix = unique("kip848-re")
    first = create_topic(bootstrap, f"{prefix}-one", partitions=2)
    create_topic(bootstrap, unique("kip848-other"), partitions=1)
    group = unique("g")
    seen = set()

    def on_assign(consumer, partitions):
        seen.update((tp.topic, tp.partition) for tp in partitions)

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                  "enable.auto.commit": False})
    try:
        c.subscribe([f"^{prefix}-.*"], on_assign=on_assign)
        wait_until(lambda: c.poll(0.1) is None and len(seen) == 2, 20, "the matching topic assigned")
        assert seen == {(first, 0), (first, 1)}
        second = create_topic(bootstrap, f"{prefix}-two", partitions=1)
        wait_until(lambda: c.poll(0.1) is None and (second, 0) in seen, 30, "the new matching topic assigned")
        assert all(t.startswith(prefix) for t, _ in seen)
    finally:
        c.close()


def _offset_fetch_v9(bootstrap, group, member_id, member_epoch):
    """OffsetFetch v9 for all of `group`'s offsets, naming a member (KIP-848) -> the
    group's error code."""
    member = b"\x00" if member_id is None else kafka_wire.compact_string(member_id)
    body = (kafka_wire.uvarint(2) + kafka_wire.compact_string(group) + member
            + struct.pack(">i", member_epoch) + b"\x00"  # topics: null (all)
            + b"\x00"  # the group's tagged fields
            + b"\x00")  # require_stable
    with kafka_wire.Connection.to(bootstrap) as conn:
        r = conn.flexible_call(9, 9, body)
    r.i32()  # throttle_time_ms

    def group_error():
        r.compact_string()
        r.compact_array(lambda: _skip_topic(r))
        code = r.i16()
        r.skip_tags()
        return code

    (code,) = r.compact_array(group_error)
    return code


def _skip_topic(r):
    def partition():
        r.i32(), r.i64(), r.i32(), r.compact_string(), r.i16()
        r.skip_tags()

    r.compact_string()
    r.compact_array(partition)
    r.skip_tags()


def _describe_groups_v6(bootstrap, group):
    """DescribeGroups v6 (the classic describe) -> (error code, error message, state)."""
    body = kafka_wire.compact_array([kafka_wire.compact_string(group)]) + b"\x00"
    with kafka_wire.Connection.to(bootstrap) as conn:
        r = conn.flexible_call(15, 6, body)
    r.i32()  # throttle_time_ms
    r.uvarint()  # one group
    code, message = r.i16(), r.compact_string()
    r.compact_string()  # group id
    return code, message, r.compact_string()


def test_offset_fetch_checks_the_member_it_names(kip848_broker):
    UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH = 25, 113
    bootstrap = kip848_broker.bootstrap
    topic = create_topic(bootstrap, unique("kip848-fetch"), partitions=2)
    group = unique("g")
    own = Ownership()
    consumers = {"a": own.member("a", bootstrap, group)}
    try:
        own.subscribe("a", consumers["a"], topic)
        settle(own, consumers, {"a": 2})
        shown = json.loads(cli(kip848_broker, "group", "describe", group, "--window-ms", "200",
                               "--output", "json").stdout)
        (member,) = shown["members"]
        epoch = member["member_epoch"]
        assert _offset_fetch_v9(bootstrap, group, member["member_id"], epoch) == 0
        assert _offset_fetch_v9(bootstrap, group, member["member_id"], epoch + 7) == STALE_MEMBER_EPOCH
        assert _offset_fetch_v9(bootstrap, group, "not-a-member", epoch) == UNKNOWN_MEMBER_ID
        # An admin client names no member.
        assert _offset_fetch_v9(bootstrap, group, None, -1) == 0
        # The classic describe answers as Kafka does for a group that is not classic.
        assert _describe_groups_v6(bootstrap, group) == (
            69, f"Group {group} is not a classic group.", "Dead")
    finally:
        close_all(consumers)
