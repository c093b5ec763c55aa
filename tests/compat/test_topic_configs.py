"""Every Kafka 4.x topic config is known, and the ones that change behaviour here do.

A Kafka operator's topic settings are accepted as Kafka 4.x accepts them (an empty
`cleanup.policy`, the compression levels, the throttled-replica lists, `preallocate`,
`segment.jitter.ms`, the cleaner's ratio and lag), tiered storage is refused with a
message that says so, and `message.timestamp.before.max.ms` / `after.max.ms` refuse
out-of-range CreateTime records with INVALID_TIMESTAMP, as Kafka's LogValidator does.
"""

import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigResource, NewTopic, ResourceType

from compat_helpers import admin, create_topic, producer, unique, watermarks

ACCEPTED = {
    "cleanup.policy": "",
    "compression.gzip.level": "5",
    "compression.lz4.level": "12",
    "compression.zstd.level": "10",
    "follower.replication.throttled.replicas": "*",
    "leader.replication.throttled.replicas": "0:1",
    "local.retention.ms": "-2",
    "max.compaction.lag.ms": "60000",
    "message.timestamp.after.max.ms": "60000",
    "message.timestamp.before.max.ms": "3600000",
    "min.cleanable.dirty.ratio": "0.1",
    "preallocate": "true",
    "remote.storage.enable": "false",
    "segment.jitter.ms": "1000",
}


def describe(bootstrap, topic):
    resource = ConfigResource(ResourceType.TOPIC, topic)
    client = admin(bootstrap)  # held: a collected client cancels its requests
    configs = client.describe_configs([resource])[resource].result(timeout=20)
    return {name: entry.value for name, entry in configs.items()}


def test_kafka_4_topic_configs_are_accepted_and_described(broker):
    topic = create_topic(broker.bootstrap, unique("configs"), config=ACCEPTED)
    described = describe(broker.bootstrap, topic)
    for name, value in ACCEPTED.items():
        assert described.get(name) == value, f"{name}: {described.get(name)!r}"


def test_tiered_storage_is_refused_with_a_reason(broker):
    name = unique("tiered")
    client = admin(broker.bootstrap)
    futures = client.create_topics(
        [NewTopic(name, num_partitions=1, replication_factor=1, config={"remote.storage.enable": "true"})],
        operation_timeout=20, request_timeout=20,
    )
    with pytest.raises(KafkaException) as refused:
        futures[name].result(timeout=20)
    error = refused.value.args[0]
    assert error.code() == KafkaError.INVALID_CONFIG, error
    assert "tiered storage" in error.str(), error


def test_out_of_range_timestamps_are_refused_with_invalid_timestamp(broker):
    topic = create_topic(
        broker.bootstrap, unique("timestamps"),
        config={"message.timestamp.before.max.ms": "3600000", "message.timestamp.after.max.ms": "3600000"},
    )
    now = int(time.time() * 1000)
    cases = [
        ("now", now, None),
        ("two days ago", now - 2 * 86_400_000, KafkaError.INVALID_TIMESTAMP),
        ("two hours ahead", now + 2 * 3_600_000, KafkaError.INVALID_TIMESTAMP),
        ("half an hour ago", now - 1_800_000, None),
    ]
    prod = producer(broker.bootstrap, **{"linger.ms": 0, "retries": 0, "enable.idempotence": False})
    for what, ts, expected in cases:
        outcome = {}

        def delivered(err, msg, outcome=outcome):
            outcome["error"] = err

        prod.produce(topic, value=what.encode(), timestamp=ts, on_delivery=delivered)
        prod.flush(30)
        assert "error" in outcome, f"{what}: no delivery report"
        got = outcome["error"].code() if outcome["error"] is not None else None
        assert got == expected, f"{what}: {outcome['error']}"
    # Only the two in-range records were stored.
    assert watermarks(broker.bootstrap, topic, 0) == (0, 2)


def test_kafka_4_default_refuses_records_more_than_an_hour_ahead(broker):
    topic = create_topic(broker.bootstrap, unique("future"))
    now = int(time.time() * 1000)
    prod = producer(broker.bootstrap, **{"linger.ms": 0, "retries": 0, "enable.idempotence": False})
    outcome = {}
    prod.produce(topic, value=b"from the future", timestamp=now + 3 * 3_600_000,
                 on_delivery=lambda err, msg: outcome.setdefault("error", err))
    prod.flush(30)
    assert outcome.get("error") is not None and outcome["error"].code() == KafkaError.INVALID_TIMESTAMP, outcome
    assert watermarks(broker.bootstrap, topic, 0) == (0, 0)
