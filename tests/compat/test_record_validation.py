"""Produce checks every record, as Kafka's broker does.

A batch whose CRC is right but whose records are malformed used to be stored and
acknowledged; librdkafka consumers then stopped at it forever. Now such a batch is
refused (CORRUPT_MESSAGE, INVALID_RECORD, or MESSAGE_TOO_LARGE for a decompression bomb),
nothing of it is written, and a confluent-kafka consumer reads every good record.
"""

from confluent_kafka import KafkaError, TopicPartition

import kafka_wire
from compat_helpers import DeliveryLog, consume_n, consumer, create_topic, expect_no_more, producer, unique, watermarks
from record_batches import (
    ERROR_CORRUPT_MESSAGE,
    ERROR_INVALID_RECORD,
    ERROR_MESSAGE_TOO_LARGE,
    batch,
    gzip_bomb,
    good_batch,
    produce_v8,
    record,
)

GOOD = record(0, b"k0", b"v0")


def malformed_batches():
    """(what, batch bytes, expected error code): each one with a valid CRC."""
    return [
        ("record length past the batch", batch(GOOD + record(1, b"k", b"v", overrun=20), 2), ERROR_CORRUPT_MESSAGE),
        ("key length -2", batch(GOOD + record(1, None, b"v", key_len=-2), 2), ERROR_CORRUPT_MESSAGE),
        ("negative header count", batch(GOOD + record(1, b"k", b"v", header_count=-1), 2), ERROR_CORRUPT_MESSAGE),
        ("fields not filling the record", batch(GOOD + record(1, b"k", b"v", pad=b"\x00\x00"), 2), ERROR_CORRUPT_MESSAGE),
        ("fewer records than declared", batch(GOOD + record(1, b"k", b"v"), 3), ERROR_CORRUPT_MESSAGE),
        ("more records than declared", batch(GOOD + record(1, b"k", b"v"), 1), ERROR_CORRUPT_MESSAGE),
        ("offset deltas 0, 7", batch(GOOD + record(7, b"k", b"v"), 2), ERROR_INVALID_RECORD),
        ("gzip bomb of 40 MiB", gzip_bomb(40 << 20), ERROR_MESSAGE_TOO_LARGE),
    ]


def test_malformed_batches_are_refused_and_every_good_record_is_read(broker):
    topic = create_topic(broker.bootstrap, unique("validate"))
    expected = []
    with kafka_wire.Connection.to(broker.bootstrap, timeout=30) as conn:
        first = produce_v8(conn, topic, 0, good_batch([b"a0", b"a1"]))
        assert first["error_code"] == 0 and first["base_offset"] == 0, first
        expected += [b"a0", b"a1"]
        for what, bad, code in malformed_batches():
            before = watermarks(broker.bootstrap, topic, 0)
            answer = produce_v8(conn, topic, 0, bad)
            assert answer["error_code"] == code, f"{what}: {answer}"
            assert answer["base_offset"] == -1, f"{what}: {answer}"
            assert answer["error_message"], f"{what}: v8 carries a message"
            assert watermarks(broker.bootstrap, topic, 0) == before, f"{what} moved the end offset"
        last = produce_v8(conn, topic, 0, good_batch([b"b0"]))
        assert last["error_code"] == 0 and last["base_offset"] == 2, last
        expected += [b"b0"]

    log = DeliveryLog()
    prod = producer(broker.bootstrap)
    for i in range(5):
        prod.produce(topic, key=b"c", value=f"c{i}".encode(), on_delivery=log.callback(i))
    assert prod.flush(30) == 0 and not log.failed, log.failed
    expected += [f"c{i}".encode() for i in range(5)]

    assert watermarks(broker.bootstrap, topic, 0) == (0, len(expected))
    cons = consumer(broker.bootstrap)
    try:
        cons.assign([TopicPartition(topic, 0, 0)])
        messages, _ = consume_n(cons, len(expected), 30)
        assert [m.value() for m in messages] == expected
        assert [m.offset() for m in messages] == list(range(len(expected)))
        assert expect_no_more(cons) == []
    finally:
        cons.close()


def test_keyless_records_on_a_compacted_topic_are_named(broker):
    topic = create_topic(broker.bootstrap, unique("compact-raw"), config={"cleanup.policy": "compact"})
    mixed = good_batch([b"v0", b"v1", b"v2", b"v3"], keys=[b"k0", None, b"k2", None])
    with kafka_wire.Connection.to(broker.bootstrap) as conn:
        answer = produce_v8(conn, topic, 0, mixed)
        assert answer["error_code"] == ERROR_INVALID_RECORD, answer
        assert [index for index, _ in answer["record_errors"]] == [1, 3], answer
        assert all(message for _, message in answer["record_errors"]), answer
        assert answer["error_message"], answer
        keyed = produce_v8(conn, topic, 0, good_batch([b"v"], keys=[b"k"]))
        assert keyed["error_code"] == 0 and keyed["base_offset"] == 0, keyed
    assert watermarks(broker.bootstrap, topic, 0) == (0, 1)


def test_confluent_keyless_record_on_a_compacted_topic_gets_invalid_record(broker):
    topic = create_topic(broker.bootstrap, unique("compact"), config={"cleanup.policy": "compact"})
    log = DeliveryLog()
    # One record per request: each delivery report is about that record alone.
    prod = producer(broker.bootstrap, **{"linger.ms": 0, "retries": 0})
    prod.produce(topic, key=b"k1", value=b"first", on_delivery=log.callback("keyed-1"))
    assert prod.flush(30) == 0
    prod.produce(topic, key=None, value=b"keyless", on_delivery=log.callback("keyless"))
    assert prod.flush(30) == 0
    prod.produce(topic, key=b"k2", value=b"second", on_delivery=log.callback("keyed-2"))
    assert prod.flush(30) == 0

    assert set(log.acked) == {"keyed-1", "keyed-2"}, (log.acked, log.failed)
    err = log.failed["keyless"]
    assert err.code() == KafkaError.INVALID_RECORD == 87, err
    assert [log.acked[k][1] for k in ("keyed-1", "keyed-2")] == [0, 1]

    # Keyed and keyless records in one batch: the broker names only the keyless ones
    # (record_errors), so librdkafka fails those with INVALID_RECORD and their keyed
    # neighbours, refused with them, as "invalid because of a different record".
    # The four must share one batch: with the topic's leader already known and the
    # partition named, librdkafka holds them for linger.ms and flush() sends them together
    # (a metadata answer arriving mid-way once sent m0 alone).
    batched = producer(broker.bootstrap, **{"linger.ms": 5000, "retries": 0})
    assert batched.list_topics(topic, timeout=10).topics[topic].partitions.keys() == {0}
    for i, key in enumerate([b"m0", None, b"m2", None]):
        batched.produce(topic, partition=0, key=key, value=f"m{i}".encode(), on_delivery=log.callback(f"mixed-{i}"))
    assert batched.flush(30) == 0
    codes = [log.failed[f"mixed-{i}"].code() for i in range(4)]
    different = KafkaError._INVALID_DIFFERENT_RECORD
    assert codes == [different, KafkaError.INVALID_RECORD, different, KafkaError.INVALID_RECORD], codes
    assert watermarks(broker.bootstrap, topic, 0) == (0, 2)
