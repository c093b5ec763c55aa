"""Consumer groups against real clients: rebalances, committed offsets, static members.

Every broker here runs with a short initial rebalance delay so groups form quickly;
consumers use the smallest session timeout the broker allows (6 s). Every wait is
bounded.
"""

import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from kafka import KafkaConsumer

from compat_helpers import (
    TRANSIENT_CONSUMER_ERRORS,
    DeliveryLog,
    create_topic,
    produce_all,
    producer,
    unique,
    wait_until,
)
import kafka_wire

GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": "300"}


def group_consumer(bootstrap, group, **extra):
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "max.poll.interval.ms": 60000,
    }
    conf.update(extra)
    return Consumer(conf)


def fill(bootstrap, topic, count, prefix="r"):
    log = DeliveryLog()
    records = [(i, None, f"{prefix}{i}".encode(), None, None) for i in range(count)]
    produce_all(producer(bootstrap, **{"linger.ms": 20}), topic, records, log)
    assert not log.failed
    return log.acked


class Member:
    """One group member driven from the test thread; remembers what it consumed."""

    def __init__(self, bootstrap, group, topic, name, seen, strategy):
        self.name = name
        self.seen = seen
        self.owned = set()
        self.expected_start = {}
        self.bad_starts = []
        self.assignments = 0
        self.closed = False
        self.consumer = group_consumer(
            bootstrap, group, **{"partition.assignment.strategy": strategy, "client.id": name}
        )
        self.consumer.subscribe([topic], on_assign=self.on_assign, on_revoke=self.on_revoke)

    def on_assign(self, consumer, partitions):
        self.assignments += 1
        committed = consumer.committed(partitions, timeout=10)
        for tp in committed:
            self.expected_start[tp.partition] = max(tp.offset, 0)
            self.owned.add(tp.partition)

    def on_revoke(self, consumer, partitions):
        self.commit()
        for tp in partitions:
            self.owned.discard(tp.partition)
            self.expected_start.pop(tp.partition, None)

    def commit(self):
        try:
            self.consumer.commit(asynchronous=False)
        except KafkaException:
            pass  # nothing new to commit, or the generation moved on: redelivered later

    def poll(self):
        messages = self.consumer.consume(num_messages=500, timeout=0.1)
        got = 0
        for msg in messages:
            err = msg.error()
            if err is not None:
                if err.fatal() or err.code() not in TRANSIENT_CONSUMER_ERRORS:
                    raise KafkaException(err)
                continue
            p, o = msg.partition(), msg.offset()
            start = self.expected_start.pop(p, None)
            if start is not None and start != o:
                self.bad_starts.append((self.name, p, start, o))
            self.seen[(p, o)] += 1
            got += 1
        if got:
            self.commit()
        return got

    def close(self):
        # Also on the way out of a failed test: a consumer left open is destroyed by the
        # garbage collector later, inside another test, where librdkafka's destroy can
        # hang for good.
        if not self.closed:
            self.closed = True
            self.consumer.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_members_join_and_leave_mid_stream_and_everything_is_consumed(broker_factory, strategy):
    broker = broker_factory(GROUP_SETTINGS)
    topic = create_topic(broker.bootstrap, unique("groups"), partitions=6)
    acked = fill(broker.bootstrap, topic, 60_000)
    expected = {(p, o) for (p, o, _) in acked.values()}
    assert len(expected) == 60_000
    group = unique("g")
    seen = Counter()
    members = [Member(broker.bootstrap, group, topic, f"m{i}", seen, strategy) for i in range(3)]
    overlaps = []
    deadline = time.monotonic() + 120
    joined = left = False
    try:
        while len(seen) < 60_000 and time.monotonic() < deadline:
            for m in members:
                m.poll()
            owners = Counter(p for m in members for p in m.owned)
            overlaps += [p for p, n in owners.items() if n > 1]
            if not joined and len(seen) >= 15_000:
                members.append(Member(broker.bootstrap, group, topic, "m3", seen, strategy))
                joined = True
            elif joined and not left and len(seen) >= 30_000:
                leaving = members.pop(0)
                leaving.commit()
                leaving.close()
                left = True
    finally:
        for m in members:
            m.close()
    assert joined and left
    assert set(seen) == expected, f"{len(expected - set(seen))} records never consumed"
    assert not overlaps, f"partitions owned by two members at once: {sorted(set(overlaps))}"
    bad = [b for m in members for b in m.bad_starts]
    assert not bad, f"a new owner did not start at the committed offset: {bad[:5]}"
    assert all(m.assignments >= 1 for m in members)


def first_offset(bootstrap, group, topic, timeout=30):
    c = group_consumer(bootstrap, group)
    c.subscribe([topic])
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                return msg.offset()
        raise AssertionError("no message within timeout")
    finally:
        c.close()


def committed(bootstrap, group, topic, partition=0):
    c = group_consumer(bootstrap, group)
    try:
        return c.committed([TopicPartition(topic, partition)], timeout=10)[0].offset
    finally:
        c.close()


def test_commit_close_resume_exactly_and_offsets_survive_kill9(broker_factory):
    broker = broker_factory(GROUP_SETTINGS)
    topic = create_topic(broker.bootstrap, unique("resume"))
    fill(broker.bootstrap, topic, 1000)
    group = unique("g")
    c = group_consumer(broker.bootstrap, group)
    c.subscribe([topic])
    wait_until(lambda: (lambda m: m is not None and m.error() is None)(c.poll(0.2)), 30, "first record")
    c.commit(offsets=[TopicPartition(topic, 0, 400)], asynchronous=False)
    c.close()
    assert first_offset(broker.bootstrap, group, topic) == 400

    simple = group_consumer(broker.bootstrap, group)
    simple.commit(offsets=[TopicPartition(topic, 0, 700)], asynchronous=False)
    simple.close()
    broker.kill9()
    broker.start()
    # Asked at once: while the coordinator loads it must answer "loading" (the client
    # retries), never "no offset".
    assert committed(broker.bootstrap, group, topic) == 700
    assert first_offset(broker.bootstrap, group, topic) == 700


STATIC_MEMBER = textwrap.dedent(
    """
    import json, sys
    from confluent_kafka import Consumer
    bootstrap, group, topic, instance, session_ms = sys.argv[1:6]
    conf = {"bootstrap.servers": bootstrap, "group.id": group,
            "session.timeout.ms": int(session_ms), "heartbeat.interval.ms": 500,
            "enable.auto.commit": False, "partition.assignment.strategy": "range"}
    if instance:
        conf["group.instance.id"] = instance
    c = Consumer(conf)
    def event(kind, parts):
        print(json.dumps([kind, sorted(p.partition for p in parts)]), flush=True)
    c.subscribe([topic], on_assign=lambda _c, p: event("assign", p),
                on_revoke=lambda _c, p: event("revoke", p))
    while True:
        c.poll(0.2)
    """
)


class StaticMember:
    def __init__(self, tmp_path, bootstrap, group, topic, instance, session_ms=15000):
        script = tmp_path / "static_member.py"
        script.write_text(STATIC_MEMBER)
        self.out = tmp_path / f"{instance or 'dynamic'}-{time.monotonic_ns()}.jsonl"
        self.proc = subprocess.Popen(
            [sys.executable, str(script), bootstrap, group, topic, instance, str(session_ms)],
            stdout=open(self.out, "w"), stderr=subprocess.DEVNULL, start_new_session=True,
        )

    def events(self):
        text = self.out.read_text()
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def assigned(self):
        assigns = [e[1] for e in self.events() if e[0] == "assign"]
        return assigns[-1] if assigns else None

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def test_static_member_restarted_within_session_timeout_keeps_assignment_without_rebalance(
    broker_factory, tmp_path
):
    broker = broker_factory(GROUP_SETTINGS)
    topic = create_topic(broker.bootstrap, unique("static"), partitions=4)
    group = unique("g")
    a = StaticMember(tmp_path, broker.bootstrap, group, topic, "static-a")
    b = StaticMember(tmp_path, broker.bootstrap, group, topic, "static-b")
    try:
        wait_until(
            lambda: a.assigned() and b.assigned() and len(a.assigned() + b.assigned()) == 4,
            40, "both static members assigned",
        )
        time.sleep(2)  # settled: no rebalance pending
        before_a, events_b = a.assigned(), len(b.events())
        a.kill()
        a2 = StaticMember(tmp_path, broker.bootstrap, group, topic, "static-a")
        try:
            wait_until(lambda: a2.assigned() is not None, 20, "restarted static member assigned")
            time.sleep(3)
            assert a2.assigned() == before_a
            assert len(b.events()) == events_b, f"the other member rebalanced: {b.events()}"
        finally:
            a2.kill()
    finally:
        a.kill()
        b.kill()


def test_a_killed_member_is_expired_after_its_session_timeout(broker_factory, tmp_path):
    broker = broker_factory(GROUP_SETTINGS)
    topic = create_topic(broker.bootstrap, unique("expiry"), partitions=4)
    group = unique("g")
    a = StaticMember(tmp_path, broker.bootstrap, group, topic, "", session_ms=6000)
    b = StaticMember(tmp_path, broker.bootstrap, group, topic, "", session_ms=6000)
    try:
        wait_until(
            lambda: a.assigned() and b.assigned() and len(a.assigned() + b.assigned()) == 4,
            40, "both members assigned",
        )
        a.kill()  # SIGKILL: no LeaveGroup, only the missing heartbeats tell
        killed = time.monotonic()
        wait_until(lambda: b.assigned() == [0, 1, 2, 3], 30, "the survivor taking every partition")
        # The last heartbeat was at most 0.5 s before the kill; the session is 6 s.
        assert time.monotonic() - killed >= 5.0
    finally:
        a.kill()
        b.kill()


def test_member_that_stops_polling_is_removed_and_its_partitions_move(broker_factory):
    broker = broker_factory(GROUP_SETTINGS)
    topic = create_topic(broker.bootstrap, unique("poll"), partitions=4)
    group = unique("g")
    seen = Counter()
    slow = Member(broker.bootstrap, group, topic, "slow", seen, "range")
    slow.consumer.close()  # replaced below with a short max.poll.interval.ms
    slow.consumer = group_consumer(broker.bootstrap, group, **{"max.poll.interval.ms": 7000})
    slow.consumer.subscribe([topic], on_assign=slow.on_assign, on_revoke=slow.on_revoke)
    fast = Member(broker.bootstrap, group, topic, "fast", seen, "range")

    def both_assigned():
        slow.poll()
        fast.poll()
        return len(slow.owned) == 2 and len(fast.owned) == 2

    wait_until(both_assigned, 40, "two members with two partitions each")

    def fast_owns_all():
        fast.poll()
        return len(fast.owned) == 4

    wait_until(fast_owns_all, 40, "the polling member taking over every partition")
    fast.close()
    try:
        slow.consumer.close()
    except KafkaException:
        pass


def test_kafka_python_group_consumer(broker_factory):
    broker = broker_factory(GROUP_SETTINGS)
    topic = create_topic(broker.bootstrap, unique("kpy"), partitions=3)
    fill(broker.bootstrap, topic, 300)
    group = unique("g")
    c = KafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500,
        consumer_timeout_ms=1000,
    )
    got = []
    deadline = time.monotonic() + 60
    while len(got) < 300 and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=500).values():
            got += [r.value for r in records]
    c.commit()
    c.close()
    assert sorted(got) == sorted(f"r{i}".encode() for i in range(300))
    total = sum(committed(broker.bootstrap, group, topic, p) for p in range(3))
    assert total == 300


def offset_commit_v2(group, topic, partition, offset):
    """OffsetCommit v2 body: a simple commit (generation -1, no member)."""
    return (
        kafka_wire.kstring(group) + struct.pack(">i", -1) + kafka_wire.kstring("")
        + struct.pack(">q", -1) + struct.pack(">i", 1) + kafka_wire.kstring(topic)
        + struct.pack(">i", 1) + struct.pack(">iq", partition, offset) + kafka_wire.kstring("")
    )


def test_compaction_keeps_consumer_offsets_small(broker_factory):
    segment = 64 * 1024
    broker = broker_factory({
        **GROUP_SETTINGS, "offsets.topic.segment.bytes": str(segment),
        "log.cleaner.backoff.ms": "500",
    })
    topic = create_topic(broker.bootstrap, unique("compact"))
    group = unique("g")
    assert committed(broker.bootstrap, group, topic) < 0  # creates __consumer_offsets
    host, port = broker.bootstrap.split(":")
    conn = kafka_wire.Connection(host, int(port), timeout=30)
    window, total = 500, 100_000
    correlation = 0
    for start in range(0, total, window):
        for i in range(start, start + window):
            correlation += 1
            body = offset_commit_v2(group, topic, 0, i + 1)
            conn.send(kafka_wire.request(8, 2, correlation, body))
        for _ in range(window):
            conn.recv_response(timeout=30)
    conn.close()
    assert committed(broker.bootstrap, group, topic) == total

    def log_bytes():
        return sum(
            f.stat().st_size for d in broker.partition_dirs("__consumer_offsets")
            for f in d.glob("*.log")
        )

    wait_until(lambda: log_bytes() <= 4 * segment, 60, "compaction of __consumer_offsets")
    broker.restart()
    assert committed(broker.bootstrap, group, topic) == total


def tidelog(broker, *args, timeout=60):
    return subprocess.run(
        [str(broker.binary), *args, "--bootstrap", broker.bootstrap],
        capture_output=True, text=True, timeout=timeout,
    )


def lag_row(text, topic):
    """The describe row of `topic` partition 0 as a dict keyed by the header."""
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("TOPIC\t"))
    names = lines[header].split("\t")
    for line in lines[header + 1:]:
        cells = line.split("\t")
        if cells[0] == topic and cells[1] == "0":
            return dict(zip(names, cells))
    raise AssertionError(f"no row for {topic}-0 in:\n{text}")


def test_cli_describe_shows_lag_in_messages_time_lag_and_drain_time_then_reset_and_delete(broker_factory):
    import threading

    broker = broker_factory(GROUP_SETTINGS)
    topic = create_topic(broker.bootstrap, unique("lag"))
    fill(broker.bootstrap, topic, 3000)
    group = unique("g")
    stop = threading.Event()
    progress = []

    def slow_consumer():
        # About 200 records/s: 20 records, a commit, a pause.
        c = group_consumer(broker.bootstrap, group, **{"client.id": "slow-reader"})
        c.subscribe([topic])
        try:
            while not stop.is_set():
                msgs = [m for m in c.consume(num_messages=20, timeout=0.5) if m.error() is None]
                if msgs:
                    c.commit(asynchronous=False)
                    progress.append((time.monotonic(), msgs[-1].offset() + 1))
                time.sleep(0.1)
        finally:
            c.close()

    reader = threading.Thread(target=slow_consumer, daemon=True)
    reader.start()
    try:
        wait_until(lambda: progress and progress[-1][1] >= 200, 30, "the slow consumer committing")
        before = progress[-1][1]
        out = tidelog(broker, "group", "describe", group, "--window-ms", "2000")
        after = progress[-1][1]
        assert out.returncode == 0, out.stderr
        row = lag_row(out.stdout, topic)
        lag, drain_time, rate = int(row["LAG"]), float(row["DRAIN-TIME"]), float(row["CONSUMED/S"])
        assert 3000 - after <= lag <= 3000 - before, out.stdout
        (t0, o0), (t1, o1) = progress[0], progress[-1]
        observed_rate = (o1 - o0) / (t1 - t0)
        assert 0.4 * observed_rate < rate < 2.5 * observed_rate, (rate, observed_rate, out.stdout)
        assert drain_time == pytest.approx(lag / rate, rel=0.05), out.stdout
        assert int(row["COMMITS"]) >= 2 and float(row["TIME-LAG"]) >= 0, out.stdout
        assert "slow-reader" in out.stdout and f"{topic}:0" in out.stdout, out.stdout

        refused = tidelog(broker, "group", "reset-offsets", group, "--topic", topic, "--to-earliest")
        assert refused.returncode != 0 and "active members" in refused.stderr, refused
    finally:
        stop.set()
        reader.join(timeout=20)

    wait_until(lambda: f"{group}\tEmpty" in tidelog(broker, "group", "list").stdout, 30, "group empty")
    reset = tidelog(broker, "group", "reset-offsets", group, "--topic", topic, "--to-offset", "42")
    assert reset.returncode == 0, reset.stderr
    assert committed(broker.bootstrap, group, topic) == 42
    deleted = tidelog(broker, "group", "delete", group)
    assert deleted.returncode == 0, deleted.stderr
    assert group not in tidelog(broker, "group", "list").stdout
    assert committed(broker.bootstrap, group, topic) < 0
