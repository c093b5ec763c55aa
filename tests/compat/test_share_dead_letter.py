"""KIP-1191 dead-letter topics of share groups, with confluent-kafka 2.16's ShareConsumer.

A record a share group gives up on (REJECTed, or released up to
`share.delivery.count.limit`) is copied to the group's dead-letter topic
(`errors.deadletterqueue.topic.name`) with Kafka's `__dlq.errors.*` headers, once, and
is never delivered to the group again. Every wait is bounded.
"""

import time

import pytest
from confluent_kafka import AcknowledgeType, KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from compat_helpers import (
    admin, create_topic, producer, read_partition_zero, set_group_configs, share_consumer, unique,
    wait_until,
)

FAST_HEARTBEATS = {"group.share.heartbeat.interval.ms": "500", "group.share.min.heartbeat.interval.ms": "500"}
REJECTED = "Offset rejected by client."
EXHAUSTED = "Offset delivery count exceeded the threshold."


@pytest.fixture(scope="module")
def dlq_broker(tmp_path_factory):
    from broker_process import Broker

    broker = Broker(tmp_path_factory.mktemp("broker"), FAST_HEARTBEATS)
    broker.start()
    yield broker
    broker.cleanup()


def records_of(batch):
    out = []
    for m in batch:
        assert m.error() is None, m.error()
        out.append(m)
    return out


def produce(bootstrap, topic, pairs):
    prod = producer(bootstrap)
    for key, value in pairs:
        prod.produce(topic, key=key, value=value, headers=[("origin", b"test")])
    assert prod.flush(30) == 0


def headers_of(m):
    return {k: (v.decode() if v is not None else None) for k, v in (m.headers() or [])}


def reject_one(bootstrap, topic, group, value):
    """Produces `value`, and a share consumer of `group` REJECTs it; returns the record."""
    produce(bootstrap, topic, [(b"k", value)])
    c = share_consumer(bootstrap, group, topic, explicit=True)
    try:
        got = []
        wait_until(lambda: got.extend(m for m in records_of(c.poll(0.5)) if m.value() == value) or got, 30,
                   f"{value!r}")
        c.acknowledge(got[0], AcknowledgeType.REJECT)
        c.commit_sync(10)
    finally:
        c.close()
    return got[0]



def dead_lettered_metric(broker, group):
    total = 0.0
    for line in broker.metrics().splitlines():
        if line.startswith("tidelog_share_partition_dead_lettered_records_total{") and f'group="{group}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_rejected_and_exhausted_records_appear_once_on_the_dead_letter_topic(dlq_broker):
    bootstrap = dlq_broker.bootstrap
    topic, group = unique("share-dlq"), unique("sg")
    dlq = "dlq." + unique("dead")
    create_topic(bootstrap, topic, partitions=1)
    create_topic(bootstrap, dlq, partitions=1, config={"errors.deadletterqueue.group.enable": "true"})
    set_group_configs(bootstrap, group, {
        "share.auto.offset.reset": "earliest",
        "share.delivery.count.limit": "2",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.copy.record.enable": "true",
    })
    produce(bootstrap, topic, [(b"k-poison", b"poison"), (b"k-flaky", b"flaky"), (b"k-fine", b"fine")])
    c = share_consumer(bootstrap, group, topic, explicit=True)
    try:
        got = []
        wait_until(lambda: got.extend(records_of(c.poll(0.5))) or len(got) >= 3, 30, "the three records")
        by_value = {m.value(): m for m in got}
        assert sorted(by_value) == [b"fine", b"flaky", b"poison"]
        c.acknowledge(by_value[b"poison"], AcknowledgeType.REJECT)
        c.acknowledge(by_value[b"flaky"], AcknowledgeType.RELEASE)
        c.acknowledge(by_value[b"fine"], AcknowledgeType.ACCEPT)
        c.commit_sync(10)
        again = []
        wait_until(lambda: again.extend(records_of(c.poll(0.5))) or again, 20, "the released record again")
        assert [(m.value(), m.delivery_count()) for m in again] == [(b"flaky", 2)]
        # Released at the group's delivery limit (2): it goes to the dead-letter topic.
        c.acknowledge(again[0], AcknowledgeType.RELEASE)
        c.commit_sync(10)
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            assert not records_of(c.poll(0.3)), "a rejected or exhausted record was delivered again"
    finally:
        c.close()

    copies = read_partition_zero(bootstrap, dlq, at_least=2)
    assert len(copies) == 2, [(m.value(), headers_of(m)) for m in copies]
    by_value = {m.value(): m for m in copies}
    assert set(by_value) == {b"poison", b"flaky"}
    poison, flaky = by_value[b"poison"], by_value[b"flaky"]
    assert (poison.key(), flaky.key()) == (b"k-poison", b"k-flaky")
    offsets = {m.value(): m.offset() for m in got}
    assert headers_of(poison) == {
        "__dlq.errors.topic": topic,
        "__dlq.errors.partition": "0",
        "__dlq.errors.offset": str(offsets[b"poison"]),
        "__dlq.errors.group": group,
        "__dlq.errors.delivery.count": "1",
        "__dlq.errors.message": REJECTED,
    }
    assert headers_of(flaky) == {
        "__dlq.errors.topic": topic,
        "__dlq.errors.partition": "0",
        "__dlq.errors.offset": str(offsets[b"flaky"]),
        "__dlq.errors.group": group,
        "__dlq.errors.delivery.count": "2",
        "__dlq.errors.message": EXHAUSTED,
    }
    wait_until(lambda: dead_lettered_metric(dlq_broker, group) == 2, 10, "the dead-lettered records metric")

    # A new member of the group gets nothing: both are archived, the rest accepted.
    d = share_consumer(bootstrap, group, topic, explicit=True)
    try:
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            assert not records_of(d.poll(0.3)), "a dead-lettered record came back to a new member"
    finally:
        d.close()


def test_without_copy_record_the_dead_letter_record_has_headers_alone(dlq_broker):
    bootstrap = dlq_broker.bootstrap
    topic, group = unique("share-dlq-ptr"), unique("sg")
    dlq = "dlq." + unique("ptr")
    create_topic(bootstrap, topic, partitions=1)
    create_topic(bootstrap, dlq, partitions=1, config={"errors.deadletterqueue.group.enable": "true"})
    set_group_configs(bootstrap, group, {
        "share.auto.offset.reset": "earliest",
        "errors.deadletterqueue.topic.name": dlq,
    })
    rejected = reject_one(bootstrap, topic, group, b"bad")
    (copy,) = read_partition_zero(bootstrap, dlq)
    assert (copy.key(), copy.value()) == (None, None)
    assert headers_of(copy)["__dlq.errors.message"] == REJECTED
    assert headers_of(copy)["__dlq.errors.offset"] == str(rejected.offset())


def test_a_topic_not_enabled_for_dead_letters_gets_no_copy(dlq_broker):
    bootstrap = dlq_broker.bootstrap
    topic, group = unique("share-dlq-off"), unique("sg")
    dlq = "dlq." + unique("off")
    create_topic(bootstrap, topic, partitions=1)
    create_topic(bootstrap, dlq, partitions=1)  # no errors.deadletterqueue.group.enable
    set_group_configs(bootstrap, group, {
        "share.auto.offset.reset": "earliest",
        "errors.deadletterqueue.topic.name": dlq,
    })
    produce(bootstrap, topic, [(b"k", b"bad"), (b"k", b"good")])
    c = share_consumer(bootstrap, group, topic, explicit=True)
    try:
        got = []
        wait_until(lambda: got.extend(records_of(c.poll(0.5))) or len(got) >= 2, 30, "the records")
        for m in got:
            c.acknowledge(m, AcknowledgeType.REJECT if m.value() == b"bad" else AcknowledgeType.ACCEPT)
        c.commit_sync(10)
        # Archived without a copy (Kafka's rule): never delivered again either.
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            assert not records_of(c.poll(0.3)), "the rejected record came back"
    finally:
        c.close()
    assert read_partition_zero(bootstrap, dlq, at_least=0, settle=2) == []


def test_an_internal_topic_is_refused_as_a_dead_letter_topic(dlq_broker):
    with pytest.raises(KafkaException) as refused:
        set_group_configs(dlq_broker.bootstrap, unique("sg"),
                          {"errors.deadletterqueue.topic.name": "__consumer_offsets"})
    assert refused.value.args[0].name() == "INVALID_CONFIG", refused.value
    assert "must not start with '__'" in refused.value.args[0].str()


def test_a_missing_dead_letter_topic_is_created_when_the_cluster_allows_it(broker_factory):
    broker = broker_factory({**FAST_HEARTBEATS, "errors.deadletterqueue.auto.create.topics.enable": "true"})
    bootstrap = broker.bootstrap
    topic, group = unique("share-dlq-auto"), unique("sg")
    dlq = "dlq." + unique("auto")
    create_topic(bootstrap, topic, partitions=1)
    set_group_configs(bootstrap, group, {
        "share.auto.offset.reset": "earliest",
        "errors.deadletterqueue.topic.name": dlq,
    })
    rejected = reject_one(bootstrap, topic, group, b"bad")
    (copy,) = read_partition_zero(bootstrap, dlq)
    assert headers_of(copy)["__dlq.errors.message"] == REJECTED
    assert headers_of(copy)["__dlq.errors.offset"] == str(rejected.offset())
    resource = ConfigResource(ResourceType.TOPIC, dlq)
    client = admin(bootstrap)
    (future,) = client.describe_configs([resource], request_timeout=15).values()
    configs = future.result(timeout=20)
    assert configs["errors.deadletterqueue.group.enable"].value == "true"
    assert configs["message.timestamp.type"].value == "CreateTime"


def test_the_topic_name_prefix_is_a_dynamic_broker_config(broker_factory):
    broker = broker_factory(FAST_HEARTBEATS)
    bootstrap = broker.bootstrap
    topic, group = unique("share-dlq-prefix"), unique("sg")
    dead = "dead." + unique("prefix")  # not under the default prefix `dlq.`
    create_topic(bootstrap, topic, partitions=1)
    create_topic(bootstrap, dead, partitions=1, config={"errors.deadletterqueue.group.enable": "true"})
    set_group_configs(bootstrap, group, {
        "share.auto.offset.reset": "earliest",
        "errors.deadletterqueue.topic.name": dead,
    })
    reject_one(bootstrap, topic, group, b"first")
    assert read_partition_zero(bootstrap, dead, at_least=0, settle=2) == [], "a copy under the wrong prefix"

    client = admin(bootstrap)
    entry = ConfigEntry("errors.deadletterqueue.topic.name.prefix", "dead.",
                        incremental_operation=AlterConfigOpType.SET)
    futures = client.incremental_alter_configs(
        [ConfigResource(ResourceType.BROKER, "1", incremental_configs=[entry])], request_timeout=15)
    for f in futures.values():
        f.result(timeout=20)
    reject_one(bootstrap, topic, group, b"second")
    (copy,) = read_partition_zero(bootstrap, dead)
    assert headers_of(copy)["__dlq.errors.offset"] == "1"
