"""Every compression codec round-trips through both Python clients.

Batches compressed by one client are stored as sent and must decode, byte for byte,
in both consumers.
"""

import random
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from compat_helpers import (
    DeliveryLog, assign_from, consume_n, consumer, create_topic, produce_all, producer, unique,
)

CODECS = ["gzip", "snappy", "lz4", "zstd"]
COUNT = 3000
PARTITIONS = 2


def make_records(seed):
    """Half compressible text, half random bytes, so codecs see both."""
    rng = random.Random(seed)
    records = []
    for i in range(COUNT):
        if i % 2:
            value = (f"record {i} " * rng.randrange(1, 40)).encode()
        else:
            value = rng.randbytes(rng.randrange(0, 1500))
        records.append((i, f"key-{i % 97}".encode(), f"{i:08d}".encode() + value, [("i", str(i).encode())], None))
    return records


def produce_confluent(bootstrap, topic, codec, records):
    log = DeliveryLog()
    prod = producer(bootstrap, **{"compression.type": codec, "linger.ms": 20})
    produce_all(prod, topic, records, log, flush_timeout=60)
    assert not log.failed, f"{codec}: delivery failed: {next(iter(log.failed.values()))}"
    return {i: ack[:2] for i, ack in log.acked.items()}


def produce_kafka_python(bootstrap, topic, codec, records):
    prod = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, acks="all", linger_ms=20)
    try:
        futures = [prod.send(topic, key=k, value=v, headers=h) for _, k, v, h, _ in records]
        prod.flush(timeout=60)
        return {i: (f.get(timeout=10).partition, f.get(timeout=10).offset) for i, f in enumerate(futures)}
    finally:
        prod.close(timeout=10)


def read_confluent(bootstrap, topic):
    cons = consumer(bootstrap)
    try:
        assign_from(cons, topic, PARTITIONS, OFFSET_BEGINNING)
        messages, errors = consume_n(cons, COUNT, 60)
    finally:
        cons.close()
    assert len(messages) == COUNT, f"confluent-kafka read {len(messages)} of {COUNT}; errors {errors[:5]}"
    return {(m.partition(), m.offset()): (m.key(), m.value(), m.headers()) for m in messages}


def read_kafka_python(bootstrap, topic):
    cons = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest")
    rows = {}
    try:
        cons.assign([KpTopicPartition(topic, p) for p in range(PARTITIONS)])
        cons.seek_to_beginning()
        deadline = time.monotonic() + 60
        while len(rows) < COUNT and time.monotonic() < deadline:
            for batch in cons.poll(timeout_ms=500).values():
                for r in batch:
                    rows[(r.partition, r.offset)] = (r.key, r.value, r.headers)
    finally:
        cons.close()
    assert len(rows) == COUNT, f"kafka-python read {len(rows)} of {COUNT}"
    return rows


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_codec_roundtrip(shared_broker, client, codec):
    bootstrap = shared_broker.bootstrap
    topic = create_topic(bootstrap, unique(f"codec-{codec}-{client}"), PARTITIONS)
    records = make_records(seed=CODECS.index(codec) * 2 + (client == "kafka-python"))
    produce = produce_confluent if client == "confluent-kafka" else produce_kafka_python
    acked = produce(bootstrap, topic, codec, records)

    expected = {acked[i]: (k, v, h) for i, k, v, h, _ in records}
    assert len(expected) == COUNT, "two records acknowledged at the same partition/offset"
    for reader in (read_confluent, read_kafka_python):
        got = reader(bootstrap, topic)
        wrong = [pos for pos, row in expected.items() if got.get(pos) != row]
        assert not wrong, f"{reader.__name__}: {len(wrong)} records differ, first at {wrong[0]}"
