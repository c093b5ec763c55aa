"""`tidelog serve` as an operator meets it: settings, auto-creation, clean restart."""

import subprocess
import time

from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_LOG_APPEND_TIME, TopicPartition
from confluent_kafka.admin import ConfigResource, ResourceType

from compat_helpers import (
    DeliveryLog, admin, assign_from, consume_n, consumer, create_topic, partition_count, produce_all,
    producer, unique, wait_until,
)


def test_unknown_setting_is_a_startup_error(broker_factory):
    broker = broker_factory(settings={"no.such.setting": "1"}, start=False)
    done = subprocess.run(broker.command(), capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert done.returncode != 0, "tidelog serve accepted an unknown setting"
    assert b"no.such.setting" in done.stdout + done.stderr, "the error does not name the bad setting"


def test_auto_create_uses_num_partitions(broker_factory):
    broker = broker_factory(settings={"num.partitions": 4, "auto.create.topics.enable": "true"})
    topic = unique("auto")
    log = DeliveryLog()
    produce_all(producer(broker.bootstrap), topic, [(0, b"k", b"v", None, None)], log, flush_timeout=30)
    assert not log.failed, log.failed
    client = admin(broker.bootstrap)
    assert partition_count(client, topic) == 4


def test_log_append_time_topic(broker):
    topic = create_topic(broker.bootstrap, unique("append-time"), 1,
                         {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    log = DeliveryLog()
    produce_all(producer(broker.bootstrap), topic, [(0, b"k", b"v", None, 1_000_000_000_000)], log, flush_timeout=30)
    after = int(time.time() * 1000)
    assert not log.failed, log.failed
    cons = consumer(broker.bootstrap)
    try:
        assign_from(cons, topic, 1, OFFSET_BEGINNING)
        (msg,), _ = consume_n(cons, 1, 30)
    finally:
        cons.close()
    ts_type, ts = msg.timestamp()
    assert ts_type == TIMESTAMP_LOG_APPEND_TIME
    assert before - 1000 <= ts <= after + 1000, f"LogAppendTime {ts} not between {before} and {after}"


def test_clean_restart_keeps_topics_configs_and_data(broker):
    topic = create_topic(broker.bootstrap, unique("restart"), 3, {"retention.ms": "86400000"})
    records = [(i, f"k{i}".encode(), f"v{i}".encode(), [("h", b"x")], None) for i in range(300)]
    log = DeliveryLog()
    produce_all(producer(broker.bootstrap), topic, records, log, flush_timeout=30)
    assert not log.failed

    assert broker.stop() == 0, "SIGTERM should end tidelog serve with exit code 0"
    broker.start()

    client = admin(broker.bootstrap)
    assert partition_count(client, topic) == 3
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = client.describe_configs([resource], request_timeout=20)[resource].result(timeout=20)
    assert configs["retention.ms"].value == "86400000"

    cons = consumer(broker.bootstrap)
    try:
        assign_from(cons, topic, 3, OFFSET_BEGINNING)
        messages, _ = consume_n(cons, len(records), 30)
    finally:
        cons.close()
    got = {(m.partition(), m.offset()): (m.key(), m.value(), m.headers()) for m in messages}
    want = {log.acked[i][:2]: (k, v, h) for i, k, v, h, _ in records}
    assert got == want

    # New appends continue after the recovered end, in every partition.
    more = DeliveryLog()
    produce_all(producer(broker.bootstrap), topic, [(0, b"k0", b"after restart", None, None)], more, flush_timeout=30)
    partition = log.acked[0][0]
    expected_offset = sum(1 for p, _, _ in log.acked.values() if p == partition)
    assert more.acked[0][:2] == (partition, expected_offset)


def test_delete_records_moves_log_start(broker):
    topic = create_topic(broker.bootstrap, unique("delete-records"), 1)
    log = DeliveryLog()
    produce_all(producer(broker.bootstrap), topic, [(i, None, f"v{i}".encode(), None, None) for i in range(50)],
                log, flush_timeout=30)
    client = admin(broker.bootstrap)
    tp = TopicPartition(topic, 0, 20)
    result = client.delete_records([tp], request_timeout=20)[tp].result(timeout=20)
    assert result.low_watermark == 20
    cons = consumer(broker.bootstrap)
    try:
        wait_until(lambda: cons.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
                   == (20, 50), 10, "watermarks (20, 50)")
        cons.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        messages, _ = consume_n(cons, 30, 30)
    finally:
        cons.close()
    assert [(m.offset(), m.value()) for m in messages] == [(i, f"v{i}".encode()) for i in range(20, 50)]
