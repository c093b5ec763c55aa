"""Admin operations and offset lookups through confluent-kafka's AdminClient."""

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewPartitions, NewTopic,
    OffsetSpec, ResourceType,
)

from compat_helpers import (
    DeliveryLog, admin, create_topic, partition_count, produce_all, producer, unique, wait_until,
)

TIMEOUT = 20


def kafka_error_code(excinfo):
    err = excinfo.value.args[0]
    return err.code() if isinstance(err, KafkaError) else None


def topic_configs(client, topic):
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return client.describe_configs([resource], request_timeout=TIMEOUT)[resource].result(timeout=TIMEOUT)


def source_of(entry):
    return getattr(entry.source, "value", entry.source)


def test_create_describe_and_errors(shared_broker):
    client = admin(shared_broker.bootstrap)
    name = unique("admin-create")
    create_topic(shared_broker.bootstrap, name, 3, {"retention.ms": "3600000", "cleanup.policy": "delete"})

    md = client.list_topics(timeout=10).topics[name]
    assert sorted(md.partitions) == [0, 1, 2]
    for part in md.partitions.values():
        assert part.leader == 1 and list(part.replicas) == [1] and list(part.isrs) == [1]

    configs = topic_configs(client, name)
    assert configs["retention.ms"].value == "3600000"
    assert source_of(configs["retention.ms"]) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "delete"
    for default_name in ("segment.bytes", "retention.bytes", "max.message.bytes"):
        assert default_name in configs, f"{default_name} missing from DescribeConfigs"
        assert configs[default_name].value is not None

    again = client.create_topics([NewTopic(name, 3, 1)], request_timeout=TIMEOUT)[name]
    with pytest.raises(KafkaException) as excinfo:
        again.result(timeout=TIMEOUT)
    assert kafka_error_code(excinfo) == KafkaError.TOPIC_ALREADY_EXISTS

    bad = "bad name!"
    with pytest.raises(KafkaException) as excinfo:
        client.create_topics([NewTopic(bad, 1, 1)], request_timeout=TIMEOUT)[bad].result(timeout=TIMEOUT)
    assert kafka_error_code(excinfo) == KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION (17)

    checked = unique("admin-validate")
    client.create_topics([NewTopic(checked, 2, 1)], validate_only=True,
                         request_timeout=TIMEOUT)[checked].result(timeout=TIMEOUT)
    assert checked not in client.list_topics(timeout=10).topics, "validate_only created the topic"


def test_alter_configs(shared_broker):
    client = admin(shared_broker.bootstrap)
    name = create_topic(shared_broker.bootstrap, unique("admin-alter"), 1, {"retention.ms": "3600000"})

    incremental = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", "2000000", incremental_operation=AlterConfigOpType.SET),
    ])
    client.incremental_alter_configs([incremental], request_timeout=TIMEOUT)[incremental].result(timeout=TIMEOUT)
    configs = topic_configs(client, name)
    assert configs["retention.ms"].value == "7200000"
    assert configs["max.message.bytes"].value == "2000000"

    removal = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    client.incremental_alter_configs([removal], request_timeout=TIMEOUT)[removal].result(timeout=TIMEOUT)
    configs = topic_configs(client, name)
    assert configs["retention.ms"].value == "7200000"
    assert source_of(configs["max.message.bytes"]) != ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    unknown = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET),
    ])
    with pytest.raises(KafkaException) as excinfo:
        client.incremental_alter_configs([unknown], request_timeout=TIMEOUT)[unknown].result(timeout=TIMEOUT)
    assert kafka_error_code(excinfo) == KafkaError.INVALID_CONFIG

    # Legacy AlterConfigs replaces the whole set of dynamic topic configs.
    legacy = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.bytes": "123456789"})
    client.alter_configs([legacy], request_timeout=TIMEOUT)[legacy].result(timeout=TIMEOUT)
    configs = topic_configs(client, name)
    assert configs["retention.bytes"].value == "123456789"
    assert source_of(configs["retention.ms"]) != ConfigSource.DYNAMIC_TOPIC_CONFIG.value


def test_create_partitions_then_delete_topic(shared_broker):
    client = admin(shared_broker.bootstrap)
    name = create_topic(shared_broker.bootstrap, unique("admin-grow"), 2)
    client.create_partitions([NewPartitions(name, 5)], request_timeout=TIMEOUT)[name].result(timeout=TIMEOUT)
    wait_until(lambda: partition_count(client, name) == 5, TIMEOUT, "5 partitions in metadata")

    log = DeliveryLog()
    prod = producer(shared_broker.bootstrap)
    for p in range(5):
        prod.produce(name, value=f"to {p}".encode(), partition=p, on_delivery=log.callback(p))
    assert prod.flush(30) == 0
    assert not log.failed, log.failed
    assert {p: log.acked[p][:2] for p in range(5)} == {p: (p, 0) for p in range(5)}

    with pytest.raises(KafkaException) as excinfo:
        client.create_partitions([NewPartitions(name, 3)], request_timeout=TIMEOUT)[name].result(timeout=TIMEOUT)
    assert kafka_error_code(excinfo) == KafkaError.INVALID_PARTITIONS

    assert len(shared_broker.partition_dirs(name)) == 5, "expected <topic>-<n> directories on disk"
    client.delete_topics([name], operation_timeout=TIMEOUT, request_timeout=TIMEOUT)[name].result(timeout=TIMEOUT)
    wait_until(lambda: name not in client.list_topics(timeout=10).topics, TIMEOUT, "topic gone from metadata")
    wait_until(lambda: not shared_broker.partition_dirs(name), TIMEOUT, "partition directories removed")


def test_list_offsets(shared_broker):
    client = admin(shared_broker.bootstrap)
    name = create_topic(shared_broker.bootstrap, unique("admin-offsets"), 1)
    # Recent whole seconds: old timestamps would make the segment eligible for time retention.
    t0 = (int(time.time()) - 600) * 1000
    log = DeliveryLog()
    records = [(i, b"k", f"v{i}".encode(), None, t0 + i * 1000) for i in range(10)]
    produce_all(producer(shared_broker.bootstrap, **{"linger.ms": 0}), name, records, log, flush_timeout=30)
    assert [log.acked[i][1] for i in range(10)] == list(range(10))

    tp = TopicPartition(name, 0)

    def lookup(spec):
        return client.list_offsets({tp: spec}, request_timeout=TIMEOUT)[tp].result(timeout=TIMEOUT)

    assert lookup(OffsetSpec.earliest()).offset == 0
    assert lookup(OffsetSpec.latest()).offset == 10
    by_time = lookup(OffsetSpec.for_timestamp(t0 + 3500))
    assert (by_time.offset, by_time.timestamp) == (4, t0 + 4000)
    assert lookup(OffsetSpec.for_timestamp(t0)).offset == 0
    assert lookup(OffsetSpec.for_timestamp(t0 + 60_000)).offset == -1, "past the newest timestamp: no offset"
    newest = lookup(OffsetSpec.max_timestamp())
    assert (newest.offset, newest.timestamp) == (9, t0 + 9000)


def test_describe_cluster(shared_broker):
    client = admin(shared_broker.bootstrap)  # kept referenced: a collected client cancels its futures
    result = client.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert [node.id for node in result.nodes] == [1]
    assert result.nodes[0].port == shared_broker.port
    assert result.controller is not None and result.controller.id == 1
