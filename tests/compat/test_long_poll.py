"""Long poll: a fetch at the end of the log is parked, and answered as soon as data arrives."""

import threading
import time

from confluent_kafka import TopicPartition

import kafka_wire
from compat_helpers import DeliveryLog, consume_n, consumer, create_topic, produce_all, producer, unique

MAX_WAIT_MS = 5000


def produce_one(prod, topic, value):
    log = DeliveryLog()
    produce_all(prod, topic, [(0, b"k", value, None, None)], log, flush_timeout=10)
    assert not log.failed, log.failed
    return log.acked[0][1]


def warm_producer(bootstrap, topic):
    """A producer that already has its connection and the topic's metadata."""
    prod = producer(bootstrap, **{"linger.ms": 0})
    prod.list_topics(topic, timeout=10)
    return prod


def test_parked_consumer_gets_new_record_fast(broker):
    topic = create_topic(broker.bootstrap, unique("longpoll"), 1)
    prod = warm_producer(broker.bootstrap, topic)
    assert produce_one(prod, topic, b"before") == 0

    cons = consumer(broker.bootstrap, **{"fetch.wait.max.ms": MAX_WAIT_MS, "fetch.min.bytes": 1})
    try:
        cons.assign([TopicPartition(topic, 0, 1)])
        # Let the consumer reach the end of the log and park a fetch there.
        parked, _ = consume_n(cons, 1, 1.5)
        assert parked == [], "nothing new should arrive while parked"
        sent_at = time.monotonic()
        assert produce_one(prod, topic, b"after") == 1
        got, errors = consume_n(cons, 1, MAX_WAIT_MS / 1000 + 3)
        elapsed = time.monotonic() - sent_at
    finally:
        cons.close()
    assert [m.value() for m in got] == [b"after"], f"errors: {errors}"
    assert elapsed < MAX_WAIT_MS / 2000, f"record took {elapsed:.2f} s to reach a parked consumer"


def test_empty_fetch_waits_for_max_wait_then_answers(broker):
    topic = create_topic(broker.bootstrap, unique("longpoll-raw"), 1)
    with kafka_wire.Connection.to(broker.bootstrap) as conn:
        started = time.monotonic()
        answer = kafka_wire.fetch_v5(conn, topic, 0, 0, max_wait_ms=1500)
        elapsed = time.monotonic() - started
    assert answer["error_code"] == kafka_wire.ERROR_NONE
    assert answer["records"] == b"" and answer["high_watermark"] == 0
    assert 1.3 <= elapsed < 4.0, f"empty fetch with max_wait 1500 ms answered after {elapsed:.2f} s"


def test_parked_raw_fetch_is_woken_by_produce(broker):
    topic = create_topic(broker.bootstrap, unique("longpoll-wake"), 1)
    prod = warm_producer(broker.bootstrap, topic)
    result = {}

    def fetch():
        with kafka_wire.Connection.to(broker.bootstrap) as conn:
            try:
                result["answer"] = kafka_wire.fetch_v5(conn, topic, 0, 0, max_wait_ms=MAX_WAIT_MS)
            except Exception as err:  # reported by the main thread
                result["error"] = err
            result["at"] = time.monotonic()

    fetcher = threading.Thread(target=fetch, daemon=True)
    fetcher.start()
    time.sleep(0.5)
    assert fetcher.is_alive(), f"fetch answered before any data existed: {result}"
    sent_at = time.monotonic()
    produce_one(prod, topic, b"wake up")
    fetcher.join(timeout=MAX_WAIT_MS / 1000 + 5)
    assert not fetcher.is_alive(), "parked fetch never answered"
    assert "error" not in result, result.get("error")
    answer = result["answer"]
    assert answer["error_code"] == kafka_wire.ERROR_NONE
    assert kafka_wire.batch_base_offsets(answer["records"]) == [0]
    assert result["at"] - sent_at < MAX_WAIT_MS / 2000, f"woken after {result['at'] - sent_at:.2f} s"
