"""Malformed requests over raw sockets.

Each gets an error response or a closed connection, promptly; meanwhile a
confluent-kafka producer and consumer keep working, and the broker stays alive.
"""

import random
import socket
import struct
import threading
import time

import pytest
from confluent_kafka import TopicPartition

import kafka_wire
from compat_helpers import DeliveryLog, consume_n, consumer, create_topic, producer, unique, wait_until

CLOSE_TIMEOUT_S = 5.0


class Traffic:
    """A producer writing a record every 20 ms and a consumer reading them, in threads."""

    def __init__(self, bootstrap):
        self.bootstrap = bootstrap
        self.topic = create_topic(bootstrap, unique("traffic"), 1)
        self.stop_event = threading.Event()
        self.log = DeliveryLog()
        self.slow_acks = []
        self.consumed = []
        self.errors = []
        self.threads = [threading.Thread(target=self._produce, daemon=True),
                        threading.Thread(target=self._consume, daemon=True)]

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout=30)

    def _produce(self):
        prod = producer(self.bootstrap, **{"linger.ms": 0, "message.timeout.ms": 10000})
        seq = 0
        try:
            while not self.stop_event.is_set():
                started = time.monotonic()
                prod.produce(self.topic, value=f"t{seq}".encode(), on_delivery=self.log.callback(seq))
                if prod.flush(10) != 0 or seq not in self.log.acked:
                    self.slow_acks.append((seq, time.monotonic() - started))
                seq += 1
                time.sleep(0.02)
        except Exception as err:  # reported by check()
            self.errors.append(err)

    def _consume(self):
        cons = consumer(self.bootstrap, **{"fetch.wait.max.ms": 100})
        try:
            cons.assign([TopicPartition(self.topic, 0, 0)])
            while not self.stop_event.is_set():
                messages, _ = consume_n(cons, 1000, 0.2)
                self.consumed.extend(m.value() for m in messages)
            # Drain what was acknowledged just before the stop.
            messages, _ = consume_n(cons, len(self.log.acked) - len(self.consumed), 5)
            self.consumed.extend(m.value() for m in messages)
        except Exception as err:  # reported by check()
            self.errors.append(err)
        finally:
            cons.close()

    def wait_consumed(self, count, timeout=30):
        """Block until the consumer has read `count` records (bounded by `timeout`)."""
        wait_until(lambda: len(self.consumed) >= count or self.errors, timeout,
                   f"{count} records through the concurrent producer and consumer")

    def check(self):
        assert not self.errors, f"client threads failed: {self.errors}"
        assert not self.log.failed, f"deliveries failed: {list(self.log.failed.items())[:5]}"
        assert not self.slow_acks, f"produce not acknowledged within 10 s: {self.slow_acks[:5]}"
        assert len(self.log.acked) >= 10, f"only {len(self.log.acked)} records produced"
        expected = [f"t{i}".encode() for i in sorted(self.log.acked)]
        assert self.consumed == expected, (
            f"consumer got {len(self.consumed)} records, {len(expected)} were acknowledged")


@pytest.fixture
def traffic(broker):
    with Traffic(broker.bootstrap) as running:
        # Both clients connected and records flowing before the bad input starts.
        running.wait_consumed(5)
        yield running
        # ...and still flowing after it.
        running.wait_consumed(len(running.consumed) + 10)
    running.check()
    assert broker.alive(), "broker process died"
    assert broker.is_ready(), "broker not ready any more"
    with kafka_wire.Connection.to(broker.bootstrap) as conn:
        error_code, ranges = kafka_wire.api_versions(conn)
    assert error_code == 0 and kafka_wire.API_FETCH in ranges


def send_raw(broker, data, half_close=False):
    conn = kafka_wire.Connection.to(broker.bootstrap)
    try:
        conn.send(data)
    except (BrokenPipeError, ConnectionResetError):
        pass  # already closed by the broker: an accepted outcome
    if half_close:
        try:
            conn.sock.shutdown(socket.SHUT_WR)  # the broker sees EOF after our bytes
        except OSError:
            pass  # ENOTCONN: the broker already reset the connection, which is accepted
    return conn


def expect_error_or_close(conn, correlation_id):
    """Either the connection closes, or a response with our correlation id arrives."""
    try:
        got, _ = conn.recv_response(timeout=CLOSE_TIMEOUT_S)
    except kafka_wire.ConnectionClosed:
        return "closed"
    except TimeoutError:
        pytest.fail(f"no response and no close within {CLOSE_TIMEOUT_S} s")
    assert got == correlation_id, f"response carries correlation id {got}, expected {correlation_id}"
    return "response"


def expect_close(conn):
    try:
        conn.wait_closed(CLOSE_TIMEOUT_S)
    except TimeoutError as err:
        pytest.fail(str(err))


def test_negative_size(broker, traffic):
    with send_raw(broker, struct.pack(">i", -1) + b"\x00" * 16) as conn:
        expect_close(conn)


def test_two_gib_size(broker, traffic):
    # 2^31 - 1 bytes declared: far over socket.request.max.bytes, refused before reading it.
    with send_raw(broker, struct.pack(">i", 0x7FFFFFFF) + b"\x00\x03\x00\x01") as conn:
        expect_close(conn)


def test_truncated_header(broker, traffic):
    # A complete 3-byte frame: api key, then half of the version.
    with send_raw(broker, kafka_wire.frame(b"\x00\x12\x00")) as conn:
        expect_close(conn)
    # Half a size prefix, then EOF.
    with send_raw(broker, b"\x00\x00", half_close=True) as conn:
        expect_close(conn)
    # Key, version and correlation id, but no client id.
    with send_raw(broker, kafka_wire.frame(struct.pack(">hhi", 18, 0, 77))) as conn:
        expect_error_or_close(conn, 77)


def test_unknown_api_key(broker, traffic):
    with send_raw(broker, kafka_wire.request(9999, 0, 42)) as conn:
        expect_error_or_close(conn, 42)


def test_metadata_topic_count_2_pow_31(broker, traffic):
    # Metadata v1 whose topic array claims i32::MAX entries: must not allocate for them.
    with send_raw(broker, kafka_wire.request(kafka_wire.API_METADATA, 1, 43, b"\x7f\xff\xff\xff")) as conn:
        expect_error_or_close(conn, 43)


def test_random_garbage(broker, traffic):
    rng = random.Random(20261129)
    for round_no in range(40):
        if round_no % 2:
            data = rng.randbytes(rng.randrange(1, 4096))
        else:
            # A plausible frame around a random body, with a real API key and random version.
            # Fetch is left out: a body that happened to decode could be parked for max_wait.
            api_key = rng.choice([k for k in range(75) if k != kafka_wire.API_FETCH])
            header = struct.pack(">hhi", api_key, rng.randrange(-1, 20), round_no)
            data = kafka_wire.frame(header + rng.randbytes(rng.randrange(0, 2048)))
        with send_raw(broker, data, half_close=True) as conn:
            expect_close(conn)
        assert broker.alive(), f"broker died on garbage round {round_no}"


def test_too_new_api_versions_gets_unsupported_version(broker):
    with kafka_wire.Connection.to(broker.bootstrap) as conn:
        body = conn.call(kafka_wire.API_API_VERSIONS, 99)
        reader = kafka_wire.Reader(body)
        assert reader.i16() == kafka_wire.ERROR_UNSUPPORTED_VERSION
        ranges = {key: (lo, hi) for key, lo, hi in reader.array(lambda: (reader.i16(), reader.i16(), reader.i16()))}
        assert ranges.get(kafka_wire.API_API_VERSIONS, (None,))[0] == 0, f"advertised ranges: {ranges}"
        # The connection stays usable for a supported version.
        error_code, _ = kafka_wire.api_versions(conn)
        assert error_code == 0
