"""A share group's offsets read, reset and deleted (KIP-932's DescribeShareGroupOffsets,
AlterShareGroupOffsets and DeleteShareGroupOffsets), around real confluent-kafka
ShareConsumers: a reset start offset is where the next member starts, also when the
partition's leader still holds the state from before; offsets change only while the
group is empty; the empty group and its offsets survive a restart; deleted offsets
start the group again from share.auto.offset.reset."""

import json
import subprocess
import time

from confluent_kafka import AcknowledgeType, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

import share_offsets_wire as wire
from compat_helpers import create_topic, share_consumer, unique, wait_until
from test_share_groups import FAST_HEARTBEATS, produce_values, records_of

NONE, UNKNOWN_TOPIC_OR_PARTITION, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND = 0, 3, 68, 69
VALUES = [f"v{i}".encode() for i in range(10)]


def earliest(bootstrap, group):
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    client = AdminClient({"bootstrap.servers": bootstrap})
    futures = client.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])], request_timeout=15)
    for f in futures.values():
        f.result(timeout=20)


def consume_all(bootstrap, group, topic, expected, quiet_s=2.0):
    """A new member of `group` accepts records until `expected` came, then checks
    nothing more comes for `quiet_s`; returns [(offset, value, delivery count)] and closes."""
    c = share_consumer(bootstrap, group, topic, explicit=True)
    got = []
    try:
        def take():
            for m in records_of(c.poll(0.5)):
                got.append((m.offset(), m.value(), m.delivery_count()))
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync(10)
            return len(got) >= expected

        wait_until(take, 40, f"{expected} records for a member of {group}")
        deadline = time.monotonic() + quiet_s
        while time.monotonic() < deadline:
            take()
        return got
    finally:
        c.close()


def when_empty(bootstrap, group, attempt):
    """`attempt()` retried while the group still has its last member (the leave
    heartbeat of a closed ShareConsumer may trail its close)."""
    result = None

    def tried():
        nonlocal result
        result = attempt()
        return result[0] != NON_EMPTY_GROUP

    wait_until(tried, 15, f"{group} empty")
    return result


def test_describe_alter_and_delete_share_group_offsets(broker_factory):
    broker = broker_factory(FAST_HEARTBEATS)
    bootstrap = broker.bootstrap
    topic, group = unique("share-offsets"), unique("sg")
    create_topic(bootstrap, topic, partitions=1)
    produce_values(bootstrap, topic, VALUES)
    earliest(bootstrap, group)

    got = consume_all(bootstrap, group, topic, len(VALUES))
    assert [(o, v) for o, v, _ in got] == list(enumerate(VALUES))
    described = wire.describe(bootstrap, group)
    assert described["error"] == NONE, described
    start, leader_epoch, error = described["topics"][topic][0]
    assert (start, error) == (10, NONE) and leader_epoch >= 0, described

    # Reset to offset 4: the leader still holds the share partition at 10; the next
    # member must start at 4 all the same.
    error, message, partitions = when_empty(bootstrap, group, lambda: wire.alter(bootstrap, group, {topic: {0: 4}}))
    assert (error, partitions) == (NONE, {topic: {0: NONE}}), message
    assert wire.describe(bootstrap, group, {topic: [0]})["topics"][topic][0][0] == 4
    c = share_consumer(bootstrap, group, topic, explicit=True)
    try:
        again = []
        wait_until(lambda: again.extend(records_of(c.poll(0.5))) or len(again) >= 6, 40, "records 4..9 again")
        assert [(m.offset(), m.value(), m.delivery_count()) for m in again] == [
            (o, VALUES[o], 1) for o in range(4, 10)
        ]
        for m in again:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync(10)
        # With a member, offsets do not change.
        assert wire.alter(bootstrap, group, {topic: {0: 0}})[0] == NON_EMPTY_GROUP
        assert wire.delete(bootstrap, group, [topic])[0] == NON_EMPTY_GROUP
    finally:
        c.close()

    # The empty group and its offsets outlive the broker's process, and can be reset
    # there: the group is known from its records alone.
    broker.restart()
    after = wait_until(lambda: (lambda d: d if d["error"] == NONE else None)(wire.describe(bootstrap, group)), 20,
                       "the group's coordinator loaded again")
    assert after["topics"][topic][0][0] == 10, after
    error, message, _ = wire.alter(bootstrap, group, {topic: {0: 8}})
    assert error == NONE, message
    got = consume_all(bootstrap, group, topic, 2)
    assert got == [(8, VALUES[8], 1), (9, VALUES[9], 1)]

    # Deleted: the group starts the topic again from share.auto.offset.reset.
    error, message, topics = when_empty(bootstrap, group, lambda: wire.delete(bootstrap, group, [topic]))
    assert (error, topics) == (NONE, {topic: NONE}), message
    assert wire.describe(bootstrap, group)["topics"] == {}
    assert wire.describe(bootstrap, group, {topic: [0]})["topics"][topic][0] == (-1, -1, NONE)
    got = consume_all(bootstrap, group, topic, len(VALUES))
    assert [(o, v, n) for o, v, n in got] == [(o, v, 1) for o, v in enumerate(VALUES)]

    # DeleteGroups: refused while a member is in; once empty, the group's records and
    # its share partitions' state go (a group made again does not start at 5).
    error, message, _ = when_empty(bootstrap, group, lambda: wire.alter(bootstrap, group, {topic: {0: 5}}))
    assert error == NONE, message
    client = AdminClient({"bootstrap.servers": bootstrap})
    c = share_consumer(bootstrap, group, topic)
    try:
        wait_until(lambda: records_of(c.poll(0.5)), 30, "a member in the group")
        refused = client.delete_consumer_groups([group], request_timeout=15)[group].exception(timeout=20)
        assert refused is not None and refused.args[0].code() == NON_EMPTY_GROUP, refused
    finally:
        c.close()

    def deleted():
        return client.delete_consumer_groups([group], request_timeout=15)[group].exception(timeout=20) is None

    wait_until(deleted, 15, "the share group deleted once empty")
    assert wire.describe(bootstrap, group)["error"] == GROUP_ID_NOT_FOUND
    assert wire.alter(bootstrap, group, {topic: {0: 5}})[0] == GROUP_ID_NOT_FOUND
    c = share_consumer(bootstrap, group, topic)
    try:
        def started():
            c.poll(0.5)
            d = wire.describe(bootstrap, group, {topic: [0]})
            return d["error"] == NONE and d["topics"][topic][0][0] >= 0 and d["topics"][topic][0][0]

        start = wait_until(started, 30, "the group made again, its share partition started")
        assert start in (0, 10), f"the deleted state (5) came back: {start}"
    finally:
        c.close()


def test_share_group_offsets_refusals(broker):
    bootstrap = broker.bootstrap
    topic, group = unique("share-offsets"), unique("sg")
    create_topic(bootstrap, topic, partitions=2)

    # A classic group is not a share group.
    classic = unique("classic")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": classic, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        c.close()
    described = wire.describe(bootstrap, classic)
    assert described["error"] == GROUP_ID_NOT_FOUND and "not a share group" in described["message"], described
    assert wire.alter(bootstrap, classic, {topic: {0: 0}})[0] == GROUP_ID_NOT_FOUND

    # No such group (the classic group above made __consumer_offsets).
    assert wire.describe(bootstrap, "no-such-group")["error"] == GROUP_ID_NOT_FOUND
    assert wire.alter(bootstrap, "no-such-group", {topic: {0: 0}})[0] == GROUP_ID_NOT_FOUND
    assert wire.delete(bootstrap, "no-such-group", [topic])[0] == GROUP_ID_NOT_FOUND

    # A share group that exists (empty now): unknown topics and partitions are named.
    produce_values(bootstrap, topic, [b"x"])
    earliest(bootstrap, group)
    consume_all(bootstrap, group, topic, 1, quiet_s=0.5)
    error, message, partitions = when_empty(
        bootstrap, group, lambda: wire.alter(bootstrap, group, {topic: {0: 0, 7: 0}, "no-such-topic": {0: 0}}))
    assert error == NONE, message
    assert partitions == {topic: {0: NONE, 7: UNKNOWN_TOPIC_OR_PARTITION},
                          "no-such-topic": {0: UNKNOWN_TOPIC_OR_PARTITION}}
    described = wire.describe(bootstrap, group, {topic: [0, 1, 9]})["topics"][topic]
    assert described[0] == (0, described[0][1], NONE)
    assert described[9][2] == UNKNOWN_TOPIC_OR_PARTITION
    other = unique("other")
    create_topic(bootstrap, other, partitions=1)
    error, _, topics = wire.delete(bootstrap, group, [other, "no-such-topic"])
    assert (error, topics) == (NONE, {other: UNKNOWN_TOPIC_OR_PARTITION, "no-such-topic": UNKNOWN_TOPIC_OR_PARTITION})


def cli(broker, *args, ok=True):
    done = subprocess.run([str(broker.binary), *args, "--bootstrap", broker.bootstrap],
                          capture_output=True, text=True, timeout=60)
    if ok is not None:
        assert (done.returncode == 0) == ok, (done.stdout, done.stderr)
    return done


def test_the_share_group_cli_lists_describes_resets_and_deletes(broker_factory):
    broker = broker_factory(FAST_HEARTBEATS)
    bootstrap = broker.bootstrap
    topic, group = unique("share-cli"), unique("sg")
    create_topic(bootstrap, topic, partitions=2)
    produce_values(bootstrap, topic, VALUES)
    earliest(bootstrap, group)
    consume_all(bootstrap, group, topic, len(VALUES))

    def listed():
        shown = json.loads(cli(broker, "share-group", "list", "--output", "json").stdout)
        return next((g for g in shown["groups"] if g["group"] == group), None)

    assert wait_until(lambda: (lambda g: g if g and g["state"] == "Empty" else None)(listed()), 15,
                      "the group listed as Empty")
    shown = json.loads(cli(broker, "share-group", "describe", group, "--output", "json").stdout)
    assert shown["state"] == "Empty" and shown["members"] == []
    by_partition = {p["partition"]: p for p in shown["partitions"]}
    ends = {p: by_partition[p]["log_end"] for p in (0, 1)}
    assert sum(ends.values()) == len(VALUES)
    assert all(by_partition[p]["start_offset"] == ends[p] and by_partition[p]["lag"] == 0 for p in (0, 1)), shown

    # --dry-run changes nothing; a reset to the earliest puts every record back.
    dry = cli(broker, "share-group", "reset-offsets", group, "--topic", topic, "--to-earliest", "--dry-run")
    assert "dry run" in dry.stdout
    assert json.loads(cli(broker, "share-group", "describe", group, "--output", "json").stdout)["partitions"] == \
        shown["partitions"]
    cli(broker, "share-group", "reset-offsets", group, "--topic", topic, "--to-earliest")
    shown = json.loads(cli(broker, "share-group", "describe", group, "--output", "json").stdout)
    assert sorted((p["partition"], p["start_offset"], p["lag"]) for p in shown["partitions"]) == \
        [(0, 0, ends[0]), (1, 0, ends[1])]
    assert len(consume_all(bootstrap, group, topic, len(VALUES))) == len(VALUES)

    # A member in the group: resets and deletion are refused with Kafka's reason.
    c = share_consumer(bootstrap, group, topic)
    try:
        wait_until(lambda: json.loads(cli(broker, "share-group", "describe", group, "--output", "json").stdout)
                   ["members"], 30, "the member in the describe output")
        refused = cli(broker, "share-group", "delete-offsets", group, "--topic", topic, ok=False)
        assert "not empty" in refused.stderr.lower() or "members" in refused.stderr, refused.stderr
        refused = cli(broker, "share-group", "delete", group, ok=False)
        assert "has 1 members" in refused.stderr, refused.stderr
    finally:
        c.close()

    wait_until(lambda: cli(broker, "share-group", "delete-offsets", group, "--topic", topic, ok=None).returncode == 0,
               15, "the offsets deleted once the group is empty")
    assert json.loads(cli(broker, "share-group", "describe", group, "--output", "json").stdout)["partitions"] == []
    cli(broker, "share-group", "delete", group)
    assert cli(broker, "share-group", "describe", group, ok=False).returncode != 0
    # `delete` refuses a group that is not a share group.
    classic = unique("classic")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": classic, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        c.close()
    assert "not a share group" in cli(broker, "share-group", "delete", classic, ok=False).stderr
