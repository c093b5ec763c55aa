"""A log directory whose disk fails halts the node, as a Kafka broker halts: it does not
go on serving partitions whose state on disk is unknown.

The disk faults come from the chaos harness's LD_PRELOAD shim (tests/chaos/faultshim.c):
writes or reads of files under the node's data directory fail with EIO while it is set.
The node must exit with status 1 and name the directory, and after a restart with the
disk back every acknowledged record is read where it was acknowledged, once, and an
idempotent producer that kept retrying through the halt delivers the rest exactly once.
"""

import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from compat_helpers import DeliveryLog, consume_n, consumer, create_topic, expect_no_more, producer, unique

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chaos import shim  # noqa: E402

HALT_TIMEOUT_S = 30
SHIM_REFRESH_S = 0.3  # the shim re-reads its control file every 100 ms


@pytest.fixture(scope="module")
def shim_library(tmp_path_factory):
    library, why = shim.build(tmp_path_factory.mktemp("faultshim"))
    if library is None:
        pytest.fail(why)  # a C compiler is there wherever tidelog was built
    return library


def wait_for_exit(broker, timeout=HALT_TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while broker.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not broker.alive(), f"the node still runs {timeout} s after its disk failed\n{broker.log_tail(30)}"
    return broker.proc.returncode


def assert_halted_on(broker, log_dir):
    code = wait_for_exit(broker)
    tail = broker.log_tail(40)
    assert code == 1, f"exit status {code}\n{tail}"
    assert f"halting: log directory {log_dir} failed" in tail, tail
    assert "Input/output error" in tail, tail


def read_all(bootstrap, topic, count):
    cons = consumer(bootstrap)
    try:
        cons.assign([TopicPartition(topic, 0, 0)])
        messages, errors = consume_n(cons, count, 60)
        assert not errors, errors
        assert expect_no_more(cons) == []
        return {m.offset(): m.value() for m in messages}
    finally:
        cons.close()


def test_a_failed_write_halts_the_node_and_nothing_acknowledged_is_lost_or_doubled(
        broker_factory, shim_library, tmp_path):
    broker = broker_factory(start=False)
    disk = shim.NodeShim(broker, shim_library, tmp_path).attach()
    broker.start()
    topic = create_topic(broker.bootstrap, unique("dirfail-write"))

    log = DeliveryLog()
    # Idempotent, retrying for longer than the halt and the restart take.
    prod = producer(broker.bootstrap, **{"enable.idempotence": True, "linger.ms": 1,
                                         "message.timeout.ms": 120000})
    values = [f"before-{i}".encode() for i in range(50)]
    for i, value in enumerate(values):
        prod.produce(topic, partition=0, value=value, on_delivery=log.callback(i))
    assert prod.flush(30) == 0 and not log.failed, log.failed

    disk.set(eio=True)
    time.sleep(SHIM_REFRESH_S)
    for i in range(50, 100):
        value = f"during-{i}".encode()
        values.append(value)
        prod.produce(topic, partition=0, value=value, on_delivery=log.callback(i))
        prod.poll(0.005)
    assert_halted_on(broker, broker.data_dir)

    disk.set()
    time.sleep(SHIM_REFRESH_S)
    broker.start()
    assert prod.flush(90) == 0, f"{len(prod)} records still unsent"
    assert not log.failed, log.failed
    assert sorted(log.acked) == list(range(100))

    stored = read_all(broker.bootstrap, topic, 100)
    for i, value in enumerate(values):
        _, offset, _ = log.acked[i]
        assert stored.get(offset) == value, f"record {i} acknowledged at {offset}, read {stored.get(offset)!r}"
    assert sorted(stored.values()) == sorted(values), "a record was written twice"


@pytest.mark.parametrize("start", [0, 100], ids=["from-the-segment-start", "inside-the-segment"])
def test_a_failed_read_halts_the_node_too(broker_factory, shim_library, tmp_path, start):
    """From offset 0 the answer is found without reading the segment, and the failure
    comes from sendfile; from offset 100 the batch headers are read first."""
    broker = broker_factory(start=False)
    disk = shim.NodeShim(broker, shim_library, tmp_path).attach()
    broker.start()
    topic = create_topic(broker.bootstrap, unique("dirfail-read"))
    log = DeliveryLog()
    prod = producer(broker.bootstrap)
    values = [f"v{i}".encode() * 100 for i in range(200)]
    for i, value in enumerate(values):
        prod.produce(topic, partition=0, value=value, on_delivery=log.callback(i))
    assert prod.flush(30) == 0 and not log.failed, log.failed

    disk.set(read_eio=True)
    time.sleep(SHIM_REFRESH_S)
    cons = consumer(broker.bootstrap)
    try:
        cons.assign([TopicPartition(topic, 0, start)])
        deadline = time.monotonic() + HALT_TIMEOUT_S
        while broker.alive() and time.monotonic() < deadline:
            cons.consume(num_messages=100, timeout=0.2)
    finally:
        cons.close()
    assert_halted_on(broker, broker.data_dir)

    disk.set()
    time.sleep(SHIM_REFRESH_S)
    broker.start()
    stored = read_all(broker.bootstrap, topic, len(values))
    assert [stored[log.acked[i][1]] for i in range(len(values))] == values
