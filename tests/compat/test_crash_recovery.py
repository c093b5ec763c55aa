"""kill -9 during continuous produce to a flush.messages=1 topic, then restart.

Every record the broker acknowledged must be there after recovery, at the offset it
was acknowledged with, and no record may appear twice. The producer never retries
(so the client cannot create duplicates) and values carry a unique sequence number.
"""

import time

from confluent_kafka import OFFSET_BEGINNING

from compat_helpers import DeliveryLog, assign_from, consume_n, consumer, create_topic, producer, unique, watermarks

PARTITIONS = 3
ROUNDS = 2
PRODUCE_SECONDS_BEFORE_KILL = 2.0


def produce_until_killed(broker, topic, log, first_id):
    """Produce as fast as the queue allows, SIGKILL the broker mid-stream; returns next id."""
    prod = producer(broker.bootstrap, **{
        "acks": "all",
        "linger.ms": 2,
        "message.send.max.retries": 0,
        "message.timeout.ms": 5000,
        "queue.buffering.max.messages": 20000,
    })
    next_id = first_id
    killed_at = None
    started = time.monotonic()
    while True:
        now = time.monotonic()
        if killed_at is None and now - started >= PRODUCE_SECONDS_BEFORE_KILL:
            broker.kill9()
            killed_at = now
        if killed_at is not None and now - killed_at >= 0.5:
            break
        try:
            prod.produce(topic, key=str(next_id % 50).encode(), value=f"seq-{next_id:09d}".encode(),
                         on_delivery=log.callback(next_id))
            next_id += 1
        except BufferError:
            pass
        prod.poll(0.001)
    # Everything still queued or in flight fails (no broker, no retries) within message.timeout.ms.
    remaining = prod.flush(15)
    assert remaining == 0, f"{remaining} messages neither acknowledged nor failed"
    return next_id


def read_everything(bootstrap, topic):
    expected = sum(watermarks(bootstrap, topic, p)[1] for p in range(PARTITIONS))
    cons = consumer(bootstrap)
    try:
        assign_from(cons, topic, PARTITIONS, OFFSET_BEGINNING)
        messages, errors = consume_n(cons, expected, 60)
    finally:
        cons.close()
    assert len(messages) == expected, f"read {len(messages)} of {expected} (high watermarks); errors {errors[:5]}"
    return messages


def test_kill9_during_produce_loses_nothing_acknowledged(broker):
    topic = create_topic(broker.bootstrap, unique("durable"), PARTITIONS, {"flush.messages": "1"})
    log = DeliveryLog()
    next_id = 0
    for round_no in range(1, ROUNDS + 1):
        acked_before = len(log.acked)
        next_id = produce_until_killed(broker, topic, log, next_id)
        assert len(log.acked) - acked_before >= 100, (
            f"round {round_no}: only {len(log.acked) - acked_before} records acknowledged before the kill")
        assert not broker.alive()
        broker.restart()

        messages = read_everything(broker.bootstrap, topic)
        at = {(m.partition(), m.offset()): m.value() for m in messages}
        missing = [(i, p, o) for i, (p, o, _) in log.acked.items()
                   if at.get((p, o)) != f"seq-{i:09d}".encode()]
        assert not missing, (f"round {round_no}: {len(missing)} acknowledged records missing or moved, "
                             f"e.g. id/partition/offset {missing[:5]}")
        values = [m.value() for m in messages]
        assert len(values) == len(set(values)), f"round {round_no}: duplicated records after recovery"
        unknown = [v for v in values if not v.startswith(b"seq-") or int(v[4:]) >= next_id]
        assert not unknown, f"round {round_no}: records nobody produced: {unknown[:5]}"
