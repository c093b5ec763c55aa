"""Group configs (Kafka's GROUP config resource, KIP-848) with confluent-kafka's AdminClient:
IncrementalAlterConfigs and DescribeConfigs on a group, Kafka's checks and messages, and a
consumer-protocol group following its own session timeout and heartbeat interval rather
than the broker's.

The broker's defaults are short (4 s session, 300 ms heartbeats) with bounds lowered to
allow them, so a group whose config says 10 s is told apart from the broker's 4 s.
"""

import os
import signal
import struct
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

import kafka_wire
from compat_helpers import create_topic, unique, wait_until
from consumer_group_members import MEMBER_SCRIPT, Ownership, close_all, settle

BROKER_SESSION_MS = 4000
GROUP_SESSION_MS = 10000
SETTINGS = {
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.session.timeout.ms": str(BROKER_SESSION_MS),
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "100",
}
CONSUMER_GROUP_HEARTBEAT = 68


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from broker_process import Broker

    b = Broker(tmp_path_factory.mktemp("broker"), SETTINGS)
    b.start()
    yield b
    b.cleanup()


def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def alter(bootstrap, group, entries, validate_only=False):
    """IncrementalAlterConfigs of one group: entries are (name, op, value)."""
    configs = [ConfigEntry(n, v, incremental_operation=op) for n, op, v in entries]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=configs)
    client = admin(bootstrap)
    futures = client.incremental_alter_configs(
        [resource], request_timeout=15, validate_only=validate_only
    )
    for f in futures.values():
        f.result(timeout=20)


def describe(bootstrap, group):
    client = admin(bootstrap)
    futures = client.describe_configs([ConfigResource(ResourceType.GROUP, group)],
                                      request_timeout=15)
    (f,) = futures.values()
    return f.result(timeout=20)


def refusal(bootstrap, group, entries):
    with pytest.raises(KafkaException) as caught:
        alter(bootstrap, group, entries)
    error = caught.value.args[0]
    return error.name(), error.str()


def test_group_configs_are_described_altered_validated_and_kept(broker):
    bootstrap = broker.bootstrap
    group = unique("cfg")
    SET, DELETE, APPEND = AlterConfigOpType.SET, AlterConfigOpType.DELETE, AlterConfigOpType.APPEND
    configs = describe(bootstrap, group)
    # Kafka 4.2's names, each from the broker's defaults.
    for name in ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms",
                 "share.session.timeout.ms", "share.heartbeat.interval.ms",
                 "share.record.lock.duration.ms", "share.auto.offset.reset",
                 "share.isolation.level", "share.delivery.count.limit",
                 "streams.session.timeout.ms"):
        assert configs[name].source == ConfigSource.DEFAULT_CONFIG.value, name
    assert configs["consumer.session.timeout.ms"].value == str(BROKER_SESSION_MS)
    assert configs["share.auto.offset.reset"].value == "latest"

    alter(bootstrap, group, [("consumer.session.timeout.ms", SET, "7000")], validate_only=True)
    assert describe(bootstrap, group)["consumer.session.timeout.ms"].value == str(BROKER_SESSION_MS)

    alter(bootstrap, group, [("consumer.session.timeout.ms", SET, "7000"),
                             ("share.isolation.level", SET, "read_committed")])
    configs = describe(bootstrap, group)
    assert configs["consumer.session.timeout.ms"].value == "7000"
    assert configs["consumer.session.timeout.ms"].source == ConfigSource.GROUP_CONFIG.value
    assert configs["share.isolation.level"].value == "read_committed"
    # Another group is untouched.
    assert describe(bootstrap, unique("cfg"))["consumer.session.timeout.ms"].value == str(
        BROKER_SESSION_MS)

    assert refusal(bootstrap, group, [("consumer.session.timeout.ms", SET, "70000")]) == (
        "INVALID_CONFIG",
        "consumer.session.timeout.ms must be less than or equal to "
        "group.consumer.max.session.timeout.ms")
    assert refusal(bootstrap, group, [("consumer.heartbeat.interval.ms", SET, "50")]) == (
        "INVALID_CONFIG",
        "consumer.heartbeat.interval.ms must be greater than or equal to "
        "group.consumer.min.heartbeat.interval.ms")
    # Merged with what the group already has: 7 s is not above an 8 s heartbeat.
    assert refusal(bootstrap, group, [("consumer.heartbeat.interval.ms", SET, "8000")]) == (
        "INVALID_CONFIG",
        "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")
    assert refusal(bootstrap, group, [("bogus.name", SET, "1")]) == (
        "INVALID_CONFIG", "Unknown group config name: bogus.name")
    assert refusal(bootstrap, group, [("share.auto.offset.reset", SET, "sometimes")])[0] == (
        "INVALID_CONFIG")
    assert refusal(bootstrap, group, [("consumer.session.timeout.ms", APPEND, "1")]) == (
        "INVALID_CONFIG",
        "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST.")
    assert describe(bootstrap, group)["consumer.session.timeout.ms"].value == "7000"

    # The configs are metadata records: a restart replays them.
    broker.restart()
    configs = describe(bootstrap, group)
    assert configs["consumer.session.timeout.ms"].value == "7000"
    alter(bootstrap, group, [("consumer.session.timeout.ms", DELETE, None)])
    configs = describe(bootstrap, group)
    assert configs["consumer.session.timeout.ms"].value == str(BROKER_SESSION_MS)
    assert configs["consumer.session.timeout.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["share.isolation.level"].value == "read_committed"



def test_legacy_alter_configs_replaces_a_groups_whole_set(broker):
    """AlterConfigs (the whole-set form) takes the GROUP resource as Kafka 4.x does: what
    it names is the group's set afterwards, the rest goes back to the broker's default."""
    bootstrap = broker.bootstrap
    group = unique("cfg-legacy")
    SET = AlterConfigOpType.SET
    alter(bootstrap, group, [("consumer.session.timeout.ms", SET, "7000"),
                             ("share.isolation.level", SET, "read_committed")])

    def legacy(configs):
        resource = ConfigResource(ResourceType.GROUP, group, set_config=configs)
        client = admin(bootstrap)  # kept alive until the answer is in
        (f,) = client.alter_configs([resource], request_timeout=15).values()
        return f.result(timeout=20)

    legacy({"consumer.heartbeat.interval.ms": "500"})
    configs = describe(bootstrap, group)
    assert configs["consumer.heartbeat.interval.ms"].value == "500"
    assert configs["consumer.heartbeat.interval.ms"].source == ConfigSource.GROUP_CONFIG.value
    for name in ("consumer.session.timeout.ms", "share.isolation.level"):
        assert configs[name].source == ConfigSource.DEFAULT_CONFIG.value, name
    assert configs["consumer.session.timeout.ms"].value == str(BROKER_SESSION_MS)

    with pytest.raises(KafkaException) as caught:
        legacy({"consumer.session.timeout.ms": "70000"})
    assert caught.value.args[0].name() == "INVALID_CONFIG"
    assert describe(bootstrap, group)["consumer.heartbeat.interval.ms"].value == "500"


def heartbeat_interval_given(bootstrap, group, topic):
    """Joins `group` with one raw ConsumerGroupHeartbeat v0 and leaves again; returns the
    heartbeat interval the broker answered."""
    member = uuid.uuid4().hex[:22]

    def beat(epoch):
        body = (kafka_wire.compact_string(group) + kafka_wire.compact_string(member)
                + struct.pack(">i", epoch)
                + b"\x00" + b"\x00"  # no instance id, no rack
                + struct.pack(">i", 30000)
                + kafka_wire.compact_array([kafka_wire.compact_string(topic)])
                + b"\x00"  # no server assignor
                + kafka_wire.compact_array([]))  # owns nothing
        deadline = time.monotonic() + 20
        while True:
            with kafka_wire.Connection.to(bootstrap) as conn:
                r = conn.flexible_call(CONSUMER_GROUP_HEARTBEAT, 0, body)
            r.i32()  # throttle
            error = r.i16()
            message = r.compact_string()
            # The offsets topic may still be on its way (COORDINATOR_NOT_AVAILABLE,
            # NOT_COORDINATOR).
            if error in (15, 16) and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            assert error == 0, (error, message)
            r.compact_string()  # member id
            r.i32()  # member epoch
            return r.i32()

    # FindCoordinator creates the offsets topic.
    client = admin(bootstrap)
    for f in client.describe_consumer_groups([group], request_timeout=15).values():
        f.result(timeout=20)

    interval = beat(0)
    beat(-1)
    return interval


def metrics(broker):
    import urllib.request

    url = f"http://127.0.0.1:{broker.admin_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read().decode()


def value(text, series):
    """The value of one series (name with its labels) in a Prometheus text page."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{series} not in the metrics")


def test_a_group_follows_its_own_session_timeout_and_heartbeat_interval(broker):
    bootstrap = broker.bootstrap
    topic = create_topic(bootstrap, unique("cfg-fence"), partitions=6)
    group = unique("g")
    assert heartbeat_interval_given(bootstrap, group, topic) == 300
    alter(bootstrap, group, [
        ("consumer.session.timeout.ms", AlterConfigOpType.SET, str(GROUP_SESSION_MS)),
        ("consumer.heartbeat.interval.ms", AlterConfigOpType.SET, "700"),
    ])
    assert heartbeat_interval_given(bootstrap, group, topic) == 700

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
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        killed_at = time.monotonic()
        settle(own, consumers, {"a": 3, "b": 3}, timeout=GROUP_SESSION_MS / 1000 + 20)
        took = time.monotonic() - killed_at
        # The broker's 4 s would have fenced it long before.
        assert took >= GROUP_SESSION_MS / 1000 * 0.8, f"fenced after {took:.1f} s"
        assert not own.violations
        # Joining one by one made the first members give partitions back, and the
        # fencing bumped the group epoch: the coordinator's counters show it.
        revoked = sum(len(own.revoked[n]) for n in consumers)
        text = metrics(broker)
        assert value(text, "tidelog_consumer_group_revocations_total") >= max(revoked, 1)
        assert value(text, "tidelog_consumer_group_rebalances_total") >= 4
        assert value(text, "tidelog_consumer_group_reconciliation_seconds_count") >= 1
        # The coordinator publishes its groups' states on its tick (every second).
        wait_until(lambda: value(metrics(broker), 'tidelog_consumer_groups{state="Stable"}') >= 1, 5,
                   "the settled group counted as Stable")
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=10)
        close_all(consumers)


def test_cli_gets_sets_and_deletes_group_configs(broker):
    import json

    group = unique("cli")

    def cli(*args, ok=True):
        done = subprocess.run([str(broker.binary), "group", "config", *args,
                               "--bootstrap", broker.bootstrap],
                              capture_output=True, text=True, timeout=90)
        assert (done.returncode == 0) == ok, done.stderr
        return done

    def get():
        out = json.loads(cli("get", group, "--output", "json").stdout)
        return {c["name"]: (c["value"], c["source"]) for c in out["configs"]}

    assert get()["consumer.heartbeat.interval.ms"] == ("300", "DEFAULT_CONFIG")
    cli("set", group, "consumer.heartbeat.interval.ms=500", "share.auto.offset.reset=earliest")
    configs = get()
    assert configs["consumer.heartbeat.interval.ms"] == ("500", "GROUP_CONFIG")
    assert configs["share.auto.offset.reset"] == ("earliest", "GROUP_CONFIG")
    refused = cli("set", group, "consumer.heartbeat.interval.ms=99999", ok=False)
    assert "consumer.heartbeat.interval.ms must be less than or equal to" in refused.stderr
    cli("delete", group, "consumer.heartbeat.interval.ms")
    assert get()["consumer.heartbeat.interval.ms"] == ("300", "DEFAULT_CONFIG")
    # The same configs through AdminClient.
    assert describe(broker.bootstrap, group)["share.auto.offset.reset"].value == "earliest"
