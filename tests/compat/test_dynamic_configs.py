"""Dynamic broker configs (KIP-226) through confluent-kafka's AdminClient.

IncrementalAlterConfigs on the BROKER resource sets a config for one broker ("1") or
the cluster-wide default (""); it is kept in the metadata log, survives a restart,
and takes effect without one: a cluster default `log.retention.ms` reaches a topic
with no override (DescribeConfigs says DYNAMIC_DEFAULT_BROKER_CONFIG) and retention
deletes its old segments on the next pass. Precedence is Kafka's: this broker's
dynamic config, the cluster default, the static setting, the default. A static-only
setting and a bad value are refused INVALID_REQUEST with Kafka's messages.

librdkafka and kafka-python both refuse a BROKER resource named "" on the client side,
so the cluster default is set and read with IncrementalAlterConfigs v0 and
DescribeConfigs v1 by hand (what Kafka's own AdminClient sends for
`kafka-configs --entity-default`).
"""

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

import kafka_wire
from config_wire import Refused, wire_alter, wire_alter_many, wire_describe
from compat_helpers import (
    DeliveryLog, admin, create_topic, produce_all, producer, unique, wait_until, watermarks,
)

SEGMENT_BYTES = 1 << 20
VALUE_BYTES = 1000
RECORDS = 3000  # about 3 MiB: a few rolled segments of 1 MiB


def alter(client, name, ops, validate_only=False):
    """IncrementalAlterConfigs of BROKER `name`: ops are (config, value or None, op)."""
    entries = [ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops]
    resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=entries)
    futures = client.incremental_alter_configs([resource], validate_only=validate_only, request_timeout=20)
    return futures[resource].result(timeout=30)


def set_(client, name, config, value, **kw):
    return alter(client, name, [(config, value, AlterConfigOpType.SET)], **kw)


def delete(client, name, config):
    return alter(client, name, [(config, None, AlterConfigOpType.DELETE)])


def refused(client, name, ops):
    with pytest.raises(KafkaException) as raised:
        alter(client, name, ops)
    return raised.value.args[0]


def describe(client, resource_type, name):
    resource = ConfigResource(resource_type, name)
    return client.describe_configs([resource], request_timeout=20)[resource].result(timeout=30)


def test_a_cluster_default_reaches_topics_and_retention_applies_it_without_restart(broker_factory):
    broker = broker_factory(settings={"log.retention.check.interval.ms": 200})
    bootstrap = broker.bootstrap
    client = admin(bootstrap)
    topic = create_topic(bootstrap, unique("dyn-retention"), 1, {"segment.bytes": str(SEGMENT_BYTES)})
    before = describe(client, ResourceType.TOPIC, topic)["retention.ms"]
    assert before.value == "604800000" and before.source == ConfigSource.DEFAULT_CONFIG.value, before

    log = DeliveryLog()
    records = [(i, None, bytes([i % 251]) * VALUE_BYTES, None, None) for i in range(RECORDS)]
    produce_all(producer(bootstrap, **{"linger.ms": 10, "batch.size": 65536}), topic, records, log, flush_timeout=60)
    assert not log.failed
    assert watermarks(bootstrap, topic, 0) == (0, RECORDS)

    wire_alter(bootstrap, "", [("log.retention.ms", "1000", AlterConfigOpType.SET)])
    entry = describe(client, ResourceType.TOPIC, topic)["retention.ms"]
    assert entry.value == "1000", entry
    assert entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value, entry
    default = wire_describe(bootstrap, "")
    assert set(default) == {"log.retention.ms"}, default
    assert default["log.retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    # The rolled segments are older than a second now: the next pass deletes them.
    wait_until(lambda: watermarks(bootstrap, topic, 0)[0] > 0, 20,
               "retention under the cluster default to advance the log start offset")
    # A topic override still beats the default.
    topic_resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "-1", incremental_operation=AlterConfigOpType.SET)])
    client.incremental_alter_configs([topic_resource])[topic_resource].result(timeout=30)
    entry = describe(client, ResourceType.TOPIC, topic)["retention.ms"]
    assert entry.value == "-1" and entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, entry


def test_per_broker_beats_the_default_which_beats_static_and_delete_restores_it(broker_factory):
    broker = broker_factory(settings={"log.retention.ms": "86400000"})
    bootstrap = broker.bootstrap
    client = admin(bootstrap)

    def retention():
        entry = describe(client, ResourceType.BROKER, "1")["log.retention.ms"]
        assert not entry.is_read_only, entry
        return entry.value, entry.source

    assert retention() == ("86400000", ConfigSource.STATIC_BROKER_CONFIG.value)
    wire_alter(bootstrap, "", [("log.retention.ms", "60000", AlterConfigOpType.SET)])
    assert retention() == ("60000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    # A synonym at the broker level beats the default's own name.
    set_(client, "1", "log.retention.minutes", "3")
    assert retention() == ("180000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    synonyms = wire_describe(bootstrap, "1")["log.retention.ms"].synonyms
    assert synonyms == [
        ("log.retention.minutes", "3", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
        ("log.retention.ms", "60000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
        ("log.retention.ms", "86400000", ConfigSource.STATIC_BROKER_CONFIG.value),
        ("log.retention.ms", "604800000", ConfigSource.DEFAULT_CONFIG.value),
    ], synonyms
    delete(client, "1", "log.retention.minutes")
    assert retention() == ("60000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    wire_alter(bootstrap, "", [("log.retention.ms", None, AlterConfigOpType.DELETE)])
    assert retention() == ("86400000", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert wire_describe(bootstrap, "") == {}
    described = describe(client, ResourceType.BROKER, "1")
    read_only = described["num.partitions"]
    assert read_only.is_read_only and read_only.source == ConfigSource.DEFAULT_CONFIG.value, read_only
    listeners = described["advertised.listeners"]
    assert listeners.value and str(broker.port) in listeners.value, listeners


def test_static_settings_bad_values_and_validate_only_answer_as_kafka(broker):
    bootstrap = broker.bootstrap
    client = admin(bootstrap)
    with pytest.raises(Refused) as error:
        wire_alter(bootstrap, "", [("num.partitions", "3", AlterConfigOpType.SET)])
    assert error.value.code == KafkaError.INVALID_REQUEST
    assert error.value.message == "Cannot update these configs dynamically: Set(num.partitions)"
    error = refused(client, "1", [("log.retention.ms", "-5", AlterConfigOpType.SET)])
    assert error.code() == KafkaError.INVALID_REQUEST, error
    assert "Invalid value -5 for configuration log.retention.ms" in error.str(), error
    error = refused(client, "1", [("log.retention.ms", "5", AlterConfigOpType.APPEND)])
    assert error.code() == KafkaError.INVALID_CONFIG, error
    with pytest.raises(Refused) as error:
        wire_alter(bootstrap, "2", [("log.retention.ms", "5000", AlterConfigOpType.SET)])
    assert error.value.code == KafkaError.INVALID_REQUEST
    assert error.value.message == "Unexpected broker id, expected 1, but received 2"
    twice = [("", [("log.retention.ms", "5000", AlterConfigOpType.SET)])] * 2
    assert wire_alter_many(bootstrap, twice) == [
        ("", KafkaError.INVALID_REQUEST, "Each resource must appear at most once.")] * 2
    set_(client, "1", "log.retention.ms", "5000", validate_only=True)
    entry = describe(client, ResourceType.BROKER, "1")["log.retention.ms"]
    assert entry.source == ConfigSource.DEFAULT_CONFIG.value, entry
    # A list setting takes APPEND and SUBTRACT.
    wire_alter(bootstrap, "", [("log.cleanup.policy", "compact", AlterConfigOpType.APPEND)])
    assert wire_describe(bootstrap, "")["log.cleanup.policy"].value == "delete,compact"
    wire_alter(bootstrap, "", [("log.cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)])
    assert wire_describe(bootstrap, "")["log.cleanup.policy"].value == "compact"
    topic = create_topic(bootstrap, unique("dyn-policy"))
    policy = describe(client, ResourceType.TOPIC, topic)["cleanup.policy"]
    assert policy.value == "compact" and policy.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value


def test_legacy_alter_configs_replaces_the_whole_set_of_a_broker(broker):
    client = admin(broker.bootstrap)

    def legacy(configs):
        resource = ConfigResource(ResourceType.BROKER, "1", set_config=configs)
        client.alter_configs([resource], request_timeout=20)[resource].result(timeout=30)

    legacy({"log.retention.ms": "7000", "log.segment.bytes": "2097152"})
    described = describe(client, ResourceType.BROKER, "1")
    assert described["log.retention.ms"].value == "7000"
    assert described["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert described["log.segment.bytes"].value == "2097152"
    # What the request leaves out is removed: AlterConfigs sets the whole resource.
    legacy({"num.io.threads": "4"})
    described = describe(client, ResourceType.BROKER, "1")
    assert described["log.retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert described["log.segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert described["num.io.threads"].value == "4"
    assert described["num.io.threads"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value


def test_dynamic_configs_survive_a_restart(broker):
    client = admin(broker.bootstrap)
    wire_alter(broker.bootstrap, "", [("log.retention.ms", "120000", AlterConfigOpType.SET)])
    set_(client, "1", "message.max.bytes", "2000000")
    broker.restart()
    client = admin(broker.bootstrap)
    described = describe(client, ResourceType.BROKER, "1")
    assert described["log.retention.ms"].value == "120000"
    assert described["message.max.bytes"].value == "2000000"
    assert described["message.max.bytes"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    topic = create_topic(broker.bootstrap, unique("dyn-restart"))
    assert describe(client, ResourceType.TOPIC, topic)["max.message.bytes"].value == "2000000"


def test_max_connections_applies_to_new_connections(broker):
    client = admin(broker.bootstrap)
    describe(client, ResourceType.BROKER, "1")  # the client's connection is open
    set_(client, "1", "max.connections", "0")
    with kafka_wire.Connection.to(broker.bootstrap) as conn:
        conn.wait_closed(timeout=5)
    delete(client, "1", "max.connections")
    with kafka_wire.Connection.to(broker.bootstrap) as conn:
        assert kafka_wire.api_versions(conn)[0] == 0
