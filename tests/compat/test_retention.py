"""Size-based retention deletes old segments and moves the log start offset.

A fetch below the new log start gets OFFSET_OUT_OF_RANGE; a consumer with
auto.offset.reset=earliest recovers to the first retained record.
"""

import time

import pytest
from confluent_kafka import TopicPartition

import kafka_wire
from compat_helpers import (
    DeliveryLog, consume_n, consumer, create_topic, produce_all, producer, unique, wait_until, watermarks,
)

SEGMENT_BYTES = 1 << 20  # Kafka 4's minimum segment.bytes, so any faithful broker accepts it
RETENTION_BYTES = 1 << 20
RECORDS = 6000
VALUE_BYTES = 1000


def segment_base_offsets(broker, topic):
    (part_dir,) = broker.partition_dirs(topic)
    return sorted(int(p.stem) for p in part_dir.glob("*.log") if p.stem.isdigit())


@pytest.fixture
def retention_broker(broker_factory):
    return broker_factory(settings={"log.retention.check.interval.ms": 200})


def test_retention_bytes_deletes_old_segments(retention_broker):
    bootstrap = retention_broker.bootstrap
    topic = create_topic(bootstrap, unique("retention"), 1, {
        "segment.bytes": str(SEGMENT_BYTES),
        "retention.bytes": str(RETENTION_BYTES),
    })
    log = DeliveryLog()
    records = [(i, None, i.to_bytes(8, "big") + bytes([i % 251]) * VALUE_BYTES, None, None) for i in range(RECORDS)]
    produce_all(producer(bootstrap, **{"linger.ms": 10, "batch.size": 65536}), topic, records, log, flush_timeout=60)
    assert not log.failed
    assert sorted(offset for _, offset, _ in log.acked.values()) == list(range(RECORDS))

    def log_start():
        low, high = watermarks(bootstrap, topic, 0)
        assert high == RECORDS
        return low if low > 0 else None

    wait_until(log_start, 15, "retention to advance the log start offset")
    # About 6 MiB was written in 1 MiB segments; at most ~1 MiB (plus the active segment) may stay.
    wait_until(lambda: len(segment_base_offsets(retention_broker, topic)) <= 3, 15, "old segment files deleted")
    time.sleep(1.0)  # five retention passes: nothing more may go
    bases = segment_base_offsets(retention_broker, topic)
    start = watermarks(bootstrap, topic, 0)[0]
    # Retention deletes whole segments, so the log starts where the oldest kept segment does.
    assert start == bases[0], f"log start {start}, oldest segment file starts at {bases[0]} ({bases})"
    assert RECORDS - start >= RETENTION_BYTES // (VALUE_BYTES + 100), "retention removed too much"

    with kafka_wire.Connection.to(bootstrap) as conn:
        below = kafka_wire.fetch_v5(conn, topic, 0, 0, max_wait_ms=100)
        assert below["error_code"] == kafka_wire.ERROR_OFFSET_OUT_OF_RANGE
        assert below["log_start_offset"] == start
        at_start = kafka_wire.fetch_v5(conn, topic, 0, start, max_wait_ms=100)
        assert at_start["error_code"] == kafka_wire.ERROR_NONE
        bases_served = kafka_wire.batch_base_offsets(at_start["records"])
        assert bases_served and bases_served[0] <= start, f"fetch at {start} served batches {bases_served[:3]}"

    cons = consumer(bootstrap, **{"auto.offset.reset": "earliest"})
    try:
        cons.assign([TopicPartition(topic, 0, 0)])
        messages, errors = consume_n(cons, RECORDS - start, 60)
    finally:
        cons.close()
    assert [m.offset() for m in messages] == list(range(start, RECORDS)), (
        f"auto.offset.reset=earliest from offset 0 (below log start {start}) read {len(messages)} of "
        f"{RECORDS - start} records; errors {errors[:3]}; see the librdkafka log in captured stderr")
    assert all(m.value() == records[m.offset()][2] for m in messages)
