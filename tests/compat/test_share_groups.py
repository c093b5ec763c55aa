"""KIP-932 share groups with confluent-kafka 2.16's ShareConsumer (librdkafka 2.16).

Share partitions start at the log end (`share.auto.offset.reset=latest`), so every test
first produces warm-up records until each of its consumers has received one: from then
on every record produced reaches the group. Every wait is bounded.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request

import pytest
from confluent_kafka import AcknowledgeType

from compat_helpers import create_topic, producer, share_consumer, unique, wait_until

# The judged scenario uses 20,000 records; CI uses fewer (SHARE_RECORDS overrides).
RECORDS = int(os.environ.get("SHARE_RECORDS", "4000"))
WARMUP = b"warm-up"
SHORT_LOCK_MS = 2000
# Heartbeats every 0.5 s so members join quickly; Kafka holds the interval to its
# bounds, so the lower bound comes down with it.
FAST_HEARTBEATS = {"group.share.heartbeat.interval.ms": "500", "group.share.min.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def default_broker(tmp_path_factory):
    from broker_process import Broker

    broker = Broker(tmp_path_factory.mktemp("broker"), FAST_HEARTBEATS)
    broker.start()
    yield broker
    broker.cleanup()


@pytest.fixture(scope="module")
def short_lock_broker(tmp_path_factory):
    from broker_process import Broker

    broker = Broker(
        tmp_path_factory.mktemp("broker"),
        {
            **FAST_HEARTBEATS,
            "group.share.record.lock.duration.ms": str(SHORT_LOCK_MS),
            "group.share.min.record.lock.duration.ms": str(SHORT_LOCK_MS),
        },
    )
    broker.start()
    yield broker
    broker.cleanup()


def records_of(batch):
    out = []
    for m in batch:
        assert m.error() is None, m.error()
        out.append(m)
    return out


def warm_up(bootstrap, topic, consumers, explicit=False, timeout=30):
    """Produces warm-up records until every consumer got one (acknowledging them)."""
    prod = producer(bootstrap)
    seen = set()
    deadline = time.monotonic() + timeout
    while len(seen) < len(consumers):
        assert time.monotonic() < deadline, f"only {len(seen)} of {len(consumers)} consumers warmed up"
        prod.produce(topic, value=WARMUP)
        prod.flush(10)
        for i, c in enumerate(consumers):
            for m in records_of(c.poll(0.3)):
                assert m.value() == WARMUP, "a record before the warm-up ended"
                seen.add(i)
                if explicit:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
    if explicit:
        for c in consumers:
            c.commit_sync(10)


def produce_values(bootstrap, topic, values):
    prod = producer(bootstrap)
    for v in values:
        while True:
            try:
                prod.produce(topic, value=v)
                break
            except BufferError:
                prod.poll(0.05)
    assert prod.flush(60) == 0


def test_four_consumers_share_one_partition_exactly_once(default_broker):
    bootstrap = default_broker.bootstrap
    topic, group = unique("share-four"), unique("sg")
    create_topic(bootstrap, topic, partitions=1)
    consumers = [share_consumer(bootstrap, group, topic) for _ in range(4)]
    warm_up(bootstrap, topic, consumers)
    values = [b"r%06d" % i for i in range(RECORDS)]
    got = [[] for _ in consumers]
    stop = threading.Event()

    def run(i):
        c = consumers[i]
        while not stop.is_set():
            for m in records_of(c.poll(0.5)):
                if m.value() != WARMUP:
                    got[i].append((m.offset(), m.value()))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        produce_values(bootstrap, topic, values)
        wait_until(lambda: sum(len(g) for g in got) >= RECORDS, 60, f"{RECORDS} records shared out")
        # Anything delivered twice would arrive now.
        time.sleep(1.5)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        for c in consumers:
            c.close()
    everything = [v for g in got for _, v in g]
    assert sorted(everything) == values, "every record exactly once across the group"
    offsets = [set(o for o, _ in g) for g in got]
    for i in range(4):
        assert offsets[i], f"consumer {i} got no share: {[len(g) for g in got]}"
        for j in range(i + 1, 4):
            assert not offsets[i] & offsets[j], f"consumers {i} and {j} got the same records"


def test_released_record_comes_back_with_delivery_count_two(short_lock_broker):
    bootstrap = short_lock_broker.bootstrap
    topic, group = unique("share-release"), unique("sg")
    create_topic(bootstrap, topic, partitions=1)
    c = share_consumer(bootstrap, group, topic, explicit=True)
    try:
        warm_up(bootstrap, topic, [c], explicit=True)
        produce_values(bootstrap, topic, [b"release-me", b"keep"])
        first = []
        wait_until(lambda: first.extend(records_of(c.poll(0.5))) or len(first) >= 2, 20, "two records")
        by_value = {m.value(): m for m in first}
        assert by_value[b"release-me"].delivery_count() == 1
        c.acknowledge(by_value[b"release-me"], AcknowledgeType.RELEASE)
        c.acknowledge(by_value[b"keep"], AcknowledgeType.ACCEPT)
        again = []
        wait_until(lambda: again.extend(records_of(c.poll(0.5))) or again, 10, "the released record again")
        assert [m.value() for m in again] == [b"release-me"]
        assert again[0].offset() == by_value[b"release-me"].offset()
        assert again[0].delivery_count() == 2
        c.acknowledge(again[0], AcknowledgeType.ACCEPT)
        c.commit_sync(10)
        # Accepted: never again, even after a lock duration.
        deadline = time.monotonic() + SHORT_LOCK_MS / 1000 + 1
        while time.monotonic() < deadline:
            assert not records_of(c.poll(0.3))
    finally:
        c.close()


STALLED_CONSUMER = textwrap.dedent(
    """
    import json, sys, time
    from confluent_kafka import ShareConsumer
    bootstrap, group, topic, warmup = sys.argv[1:5]
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = [m for m in c.poll(0.5) if m.error() is None]
        if got:
            print(json.dumps([[m.offset(), m.value().decode()] for m in got]), flush=True)
            break
    time.sleep(600)
    """
)


def test_records_of_a_killed_consumer_go_to_the_others_after_the_lock(short_lock_broker, tmp_path):
    bootstrap = short_lock_broker.bootstrap
    topic, group = unique("share-stall"), unique("sg")
    create_topic(bootstrap, topic, partitions=1)
    other = share_consumer(bootstrap, group, topic)
    warm_up(bootstrap, topic, [other])
    script = tmp_path / "stalled.py"
    script.write_text(STALLED_CONSUMER)
    stalled = subprocess.Popen(
        [sys.executable, str(script), bootstrap, group, topic, WARMUP.decode()],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        # Only the stalled consumer polls until it holds records.
        values = [b"s%03d" % i for i in range(20)]
        line = [None]
        reader = threading.Thread(target=lambda: line.__setitem__(0, stalled.stdout.readline()))
        reader.start()
        deadline = time.monotonic() + 30
        while reader.is_alive() and time.monotonic() < deadline:
            produce_values(bootstrap, topic, values)
            reader.join(1.0)
        assert line[0], "the stalled consumer received nothing"
        held = {o: v for o, v in json.loads(line[0])}
        stalled.send_signal(signal.SIGKILL)
        stalled.wait(10)
        seen = {}
        wait_until(
            lambda: [seen.setdefault(m.offset(), m) for m in records_of(other.poll(0.5))] is not None
            and set(held) <= set(seen),
            SHORT_LOCK_MS / 1000 + 20,
            "the killed consumer's records at another consumer",
        )
        for o in held:
            assert seen[o].delivery_count() == 2, f"offset {o} delivered again after its lock ran out"
            assert seen[o].value().decode() == held[o]
    finally:
        if stalled.poll() is None:
            stalled.kill()
            stalled.wait(10)
        other.close()


def test_rejected_record_never_comes_back(short_lock_broker):
    bootstrap = short_lock_broker.bootstrap
    topic, group = unique("share-reject"), unique("sg")
    create_topic(bootstrap, topic, partitions=1)
    a = share_consumer(bootstrap, group, topic, explicit=True)
    try:
        warm_up(bootstrap, topic, [a], explicit=True)
        produce_values(bootstrap, topic, [b"poison", b"fine"])
        got = []
        wait_until(lambda: got.extend(records_of(a.poll(0.5))) or len(got) >= 2, 20, "two records")
        for m in got:
            a.acknowledge(m, AcknowledgeType.REJECT if m.value() == b"poison" else AcknowledgeType.ACCEPT)
        a.commit_sync(10)
        b = share_consumer(bootstrap, group, topic)
        try:
            # Past a lock duration, with two members fetching: nothing comes back.
            deadline = time.monotonic() + SHORT_LOCK_MS / 1000 + 1.5
            while time.monotonic() < deadline:
                assert not records_of(a.poll(0.2)), "a rejected or accepted record came back"
                assert not records_of(b.poll(0.2)), "a rejected or accepted record came back"
        finally:
            b.close()
    finally:
        a.close()


def test_accepted_records_are_not_delivered_again_after_a_kill_9(broker_factory):
    broker = broker_factory(FAST_HEARTBEATS)
    bootstrap = broker.bootstrap
    topic, group = unique("share-durable"), unique("sg")
    create_topic(bootstrap, topic, partitions=1)
    c = share_consumer(bootstrap, group, topic, explicit=True)
    values = [b"d%02d" % i for i in range(20)]
    try:
        warm_up(bootstrap, topic, [c], explicit=True)
        produce_values(bootstrap, topic, values)
        got = []
        wait_until(lambda: got.extend(records_of(c.poll(0.5))) or len(got) >= 20, 20, "20 records")
        accepted = {m.value() for m in got if m.value() < b"d10"}
        for m in got:
            if m.value() in accepted:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
        # commit_sync returns once the broker answered, which it does only after the
        # share coordinator's write is replicated.
        results = c.commit_sync(10)
        assert all(e is None for e in results.values()), results
    finally:
        broker.kill9()
        c.close()
    broker.start()
    c = share_consumer(broker.bootstrap, group, topic)
    try:
        after = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(after) < 10:
            after.extend(m.value() for m in records_of(c.poll(0.5)))
        # Then anything accepted before the kill would show up now.
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            after.extend(m.value() for m in records_of(c.poll(0.3)))
        assert not accepted & set(after), "a record accepted before the kill came back"
        assert sorted(after) == [v for v in values if v not in accepted]
    finally:
        c.close()


def list_groups_of_type(bootstrap, group_type):
    """ListGroups v5 filtered by type: [(group id, protocol type, state, type)]."""
    import kafka_wire

    body = kafka_wire.compact_array([]) + kafka_wire.compact_array([kafka_wire.compact_string(group_type)])
    with kafka_wire.Connection.to(bootstrap) as conn:
        r = conn.flexible_call(16, 5, body)
    r.i32()
    assert r.i16() == 0

    def group():
        listed = (r.compact_string(), r.compact_string(), r.compact_string(), r.compact_string())
        r.skip_tags()
        return listed

    return r.compact_array(group)


def test_a_share_group_reads_its_own_configs_and_is_listed_as_share(broker_factory):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    broker = broker_factory(FAST_HEARTBEATS)
    bootstrap = broker.bootstrap
    topic, group = unique("share-configs"), unique("sg")
    create_topic(bootstrap, topic, partitions=1)
    # Before any member: with the broker's `latest` these would never be delivered.
    produce_values(bootstrap, topic, [b"old-0", b"old-1", b"old-2"])
    configs = [
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("share.delivery.count.limit", "2", incremental_operation=AlterConfigOpType.SET),
    ]
    client = AdminClient({"bootstrap.servers": bootstrap})
    futures = client.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=configs)], request_timeout=15)
    for f in futures.values():
        f.result(timeout=20)
    c = share_consumer(bootstrap, group, topic, explicit=True)
    try:
        got = []
        wait_until(lambda: got.extend(records_of(c.poll(0.5))) or len(got) >= 3, 30,
                   "the records written before the group existed (earliest)")
        assert [m.value() for m in got] == [b"old-0", b"old-1", b"old-2"]
        assert [m.offset() for m in got] == [0, 1, 2]
        listed = list_groups_of_type(bootstrap, "share")
        assert (group, "share", "Stable", "share") in listed, listed
        assert all(g[3] == "share" for g in listed)
        assert group not in [g[0] for g in list_groups_of_type(bootstrap, "consumer")]
        # The admin API (and the console's groups view) show it too, published on the
        # coordinator's one-second tick.
        def on_admin_port():
            url = f"http://127.0.0.1:{broker.admin_port}/v1/groups"
            with urllib.request.urlopen(url, timeout=5) as resp:
                groups = json.load(resp)["groups"]
            return next((g for g in groups if g["group"] == group), None)

        shown = wait_until(on_admin_port, 5, "the share group in /v1/groups")
        assert (shown["group_type"], shown["state"], shown["members"]) == ("share", "Stable", 1)
        # Its member holds the partition, and what it has not acknowledged is its lag.
        (member,) = shown["member_details"]
        assert member["member_epoch"] >= 1 and member["assigned"] == [{"topic": topic, "partitions": [0]}], member
        (row,) = wait_until(lambda: (on_admin_port() or {}).get("partitions"), 5, "the share partition's lag")
        assert (row["topic"], row["committed_offset"], row["high_watermark"], row["lag_messages"]) == (topic, 0, 3, 3), row
        for m in got:
            c.acknowledge(m, AcknowledgeType.RELEASE if m.value() == b"old-0" else AcknowledgeType.ACCEPT)
        c.commit_sync(10)
        again = []
        wait_until(lambda: again.extend(records_of(c.poll(0.5))) or again, 20, "old-0 released once")
        assert [(m.value(), m.delivery_count()) for m in again] == [(b"old-0", 2)]
        c.acknowledge(again[0], AcknowledgeType.RELEASE)
        c.commit_sync(10)
        # The group's delivery limit is 2 (the broker's is 5): released a second time,
        # old-0 is archived and never delivered a third time.
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            assert not records_of(c.poll(0.3)), "delivered beyond the group's delivery limit"
        # Everything is accepted or archived: the share partition starts past it, no lag.
        wait_until(lambda: [(r["committed_offset"], r["lag_messages"]) for r in on_admin_port()["partitions"]] == [(3, 0)],
                   5, "no lag once every record is done")
    finally:
        c.close()
