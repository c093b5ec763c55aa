"""Internal topics are protected: confluent-kafka's AdminClient (and tidelog's CLI) may
not delete, create, repartition or re-policy `__consumer_offsets`, and a group's
committed offsets survive every attempt."""

import subprocess

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic, ResourceType,
)

from compat_helpers import admin, create_topic, unique

TIMEOUT = 20
OFFSETS = "__consumer_offsets"
SETTINGS = {"offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "300"}


def refusal(future):
    """The KafkaError a refused admin future raises."""
    with pytest.raises(KafkaException) as excinfo:
        future.result(timeout=TIMEOUT)
    return excinfo.value.args[0]


def group_consumer(bootstrap, group):
    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })


def commit(bootstrap, group, topic, offset):
    c = group_consumer(bootstrap, group)
    try:
        c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        c.close()


def committed(bootstrap, group, topic):
    c = group_consumer(bootstrap, group)
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    finally:
        c.close()


def test_consumer_offsets_cannot_be_deleted_created_or_altered(broker_factory):
    broker = broker_factory(SETTINGS)
    client = admin(broker.bootstrap)
    topic = create_topic(broker.bootstrap, unique("internal"))
    group = unique("g")
    commit(broker.bootstrap, group, topic, 42)  # creates __consumer_offsets
    assert committed(broker.bootstrap, group, topic) == 42
    assert OFFSETS in client.list_topics(timeout=10).topics

    err = refusal(client.delete_topics([OFFSETS], request_timeout=TIMEOUT)[OFFSETS])
    # (librdkafka's DeleteTopics version has no error message field; the CLI shows it.)
    assert err.code() == KafkaError.INVALID_REQUEST, err

    for name in (OFFSETS, "__transaction_state", "__cluster_metadata"):
        new = NewTopic(name, 1, 1, config={"cleanup.policy": "delete"})
        err = refusal(client.create_topics([new], request_timeout=TIMEOUT)[name])
        assert err.code() == KafkaError.INVALID_REQUEST, (name, err)
        assert f"Creation of internal topic {name} is prohibited" in err.str(), err

    policy = ConfigResource(ResourceType.TOPIC, OFFSETS, incremental_configs=[
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SET),
    ])
    err = refusal(client.incremental_alter_configs([policy], request_timeout=TIMEOUT)[policy])
    assert err.code() == KafkaError.INVALID_CONFIG, err
    assert "must stay compact" in err.str(), err
    removal = ConfigResource(ResourceType.TOPIC, OFFSETS, incremental_configs=[
        ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    err = refusal(client.incremental_alter_configs([removal], request_timeout=TIMEOUT)[removal])
    assert err.code() == KafkaError.INVALID_CONFIG, err

    grow = {OFFSETS: NewPartitions(OFFSETS, 10)}
    err = refusal(client.create_partitions(list(grow.values()), request_timeout=TIMEOUT)[OFFSETS])
    assert err.code() == KafkaError.INVALID_REQUEST, err

    # Kafka refuses DeleteRecords on internal topics with INVALID_TOPIC_EXCEPTION.
    records = [TopicPartition(OFFSETS, p, -1) for p in range(3)]
    for tp, future in client.delete_records(records, request_timeout=TIMEOUT).items():
        err = refusal(future)
        assert err.code() == KafkaError.TOPIC_EXCEPTION, (tp, err)

    # The CLI says so too, and fails.
    cli = subprocess.run(
        [str(broker.binary), "topic", "delete", OFFSETS, "--bootstrap", broker.bootstrap],
        capture_output=True, text=True, timeout=60,
    )
    assert cli.returncode != 0, cli.stdout
    assert "Deletion of internal topic __consumer_offsets is prohibited" in cli.stderr, cli.stderr

    # Nothing of that touched the group's offsets or the topic's settings and layout.
    assert committed(broker.bootstrap, group, topic) == 42
    md = client.list_topics(timeout=10).topics[OFFSETS]
    assert len(md.partitions) == 3
    resource = ConfigResource(ResourceType.TOPIC, OFFSETS)
    configs = client.describe_configs([resource], request_timeout=TIMEOUT)[resource].result(timeout=TIMEOUT)
    assert configs["cleanup.policy"].value == "compact"
    # And they survive a restart.
    broker.restart()
    assert committed(broker.bootstrap, group, topic) == 42
