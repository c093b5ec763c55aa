"""Idempotence and transactions with confluent-kafka (librdkafka), issue 5.

- idempotent producer through a proxy that drops connections after the broker appended
  but before the client saw the answer: no duplicates, order kept;
- consume-transform-produce with send_offsets_to_transaction, the copier killed -9 and
  restarted three times: the read_committed output equals the input exactly once;
- aborted transactions hidden from read_committed, visible to read_uncommitted, and an
  open transaction holding read_committed consumers at the LSO until it commits;
- fencing by a second producer with the same transactional.id;
- a transaction open past its timeout aborted by the coordinator;
- broker kill -9 with transactions in flight: each is all or nothing afterwards.
"""

import signal
import socket
import struct
import subprocess
import sys
import threading

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from compat_helpers import (
    DeliveryLog,
    consume_n,
    consumer,
    create_topic,
    expect_no_more,
    produce_all,
    producer,
    unique,
    wait_until,
)

API_PRODUCE = 0


def txn_producer(bootstrap, txn_id, **extra):
    conf = {
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "linger.ms": 5,
    }
    conf.update(extra)
    return Producer(conf)


def read_all(bootstrap, topic, partitions, isolation, expected=None, timeout=30, idle=1.5):
    """Every record of `topic` under `isolation`, as {partition: [value, ...]}."""
    cons = consumer(bootstrap, **{"isolation.level": isolation})
    try:
        cons.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        if expected is not None:
            messages, _ = consume_n(cons, expected, timeout)
            messages += expect_no_more(cons, idle)
        else:
            messages = expect_no_more(cons, idle)
        out = {p: [] for p in range(partitions)}
        for m in messages:
            out[m.partition()].append(m.value())
        return out
    finally:
        cons.close()


def high_watermark(bootstrap, topic, partition, isolation):
    """The latest offset as ListOffsets reports it (LSO under read_committed)."""
    cons = consumer(bootstrap, **{"isolation.level": isolation})
    try:
        return cons.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)[1]
    finally:
        cons.close()


# ---------------------------------------------------------------- idempotence


class DroppingProxy:
    """Forwards Kafka connections; drops the connection instead of forwarding every
    `every`-th Produce response (the broker appended, the client never hears of it),
    at most `max_drops` times."""

    def __init__(self, listen, target, every, max_drops):
        self.target = target
        self.every = every
        self.max_drops = max_drops
        self.drops = 0
        self.produce_responses = 0
        self.lock = threading.Lock()
        self.server = socket.create_server(listen)
        self.server.settimeout(0.2)
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self):
        while not self.stopping.is_set():
            try:
                client, _ = self.server.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            upstream = socket.create_connection(self.target, timeout=10)
            api_by_correlation = {}
            for fn in (self._requests, self._responses):
                t = threading.Thread(target=fn, args=(client, upstream, api_by_correlation), daemon=True)
                t.start()
                self.threads.append(t)

    @staticmethod
    def _read_frame(sock):
        head = b""
        while len(head) < 4:
            chunk = sock.recv(4 - len(head))
            if not chunk:
                return None
            head += chunk
        size = struct.unpack(">i", head)[0]
        body = bytearray()
        while len(body) < size:
            chunk = sock.recv(min(1 << 16, size - len(body)))
            if not chunk:
                return None
            body += chunk
        return head + bytes(body)

    def _close(self, *socks):
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _requests(self, client, upstream, apis):
        try:
            while True:
                frame = self._read_frame(client)
                if frame is None:
                    break
                api_key, _version, correlation = struct.unpack(">hhi", frame[4:12])
                apis[correlation] = api_key
                upstream.sendall(frame)
        except OSError:
            pass
        self._close(client, upstream)

    def _responses(self, client, upstream, apis):
        try:
            while True:
                frame = self._read_frame(upstream)
                if frame is None:
                    break
                correlation = struct.unpack(">i", frame[4:8])[0]
                if apis.pop(correlation, None) == API_PRODUCE:
                    with self.lock:
                        self.produce_responses += 1
                        drop = self.produce_responses % self.every == 0 and self.drops < self.max_drops
                        if drop:
                            self.drops += 1
                    if drop:
                        break
                client.sendall(frame)
        except OSError:
            pass
        self._close(client, upstream)

    def close(self):
        self.stopping.set()
        self.server.close()


def test_idempotent_producer_retries_through_dropped_responses(broker_factory):
    # The broker advertises 127.0.0.2 on its own port; the proxy listens there, so every
    # connection the client makes after bootstrap goes through the proxy.
    broker = broker_factory(settings={"advertised.host": "127.0.0.2"})
    proxy = DroppingProxy(("127.0.0.2", broker.port), ("127.0.0.1", broker.port), every=5, max_drops=25)
    try:
        topic = create_topic(broker.bootstrap, unique("idem"), partitions=3)
        prod = producer(
            f"127.0.0.2:{broker.port}",
            **{
                "enable.idempotence": True,
                "linger.ms": 2,
                "batch.num.messages": 200,
                "reconnect.backoff.ms": 10,
                "reconnect.backoff.max.ms": 100,
                "message.timeout.ms": 60000,
            },
        )
        log = DeliveryLog()
        records = [(i, str(i % 97).encode(), str(i).encode(), None, None) for i in range(10_000)]
        produce_all(prod, topic, records, log, flush_timeout=90)
        assert not log.failed, f"{len(log.failed)} failed, e.g. {next(iter(log.failed.values()))}"
        assert len(log.acked) == 10_000
        assert proxy.drops >= 10, f"only {proxy.drops} responses dropped: retries were not exercised"
        # Read back (through the proxy too: the broker advertises its address).
        got = read_all(broker.bootstrap, topic, 3, "read_uncommitted", expected=10_000, timeout=60)
    finally:
        proxy.close()
    values = [int(v) for vs in got.values() for v in vs]
    assert len(values) == 10_000, f"{len(values)} records, duplicates or losses"
    assert sorted(values) == list(range(10_000))
    for p, vs in got.items():
        ints = [int(v) for v in vs]
        assert ints == sorted(ints), f"partition {p} out of order"
        # The offsets the client was told are exactly where the records are.
        acked = sorted(off for (part, off, _) in log.acked.values() if part == p)
        assert acked == list(range(len(vs)))


# ---------------------------------------------------------------- read_committed


def test_aborted_records_hidden_and_open_transaction_holds_lso(broker):
    topic = create_topic(broker.bootstrap, unique("abort"), partitions=1)
    prod = txn_producer(broker.bootstrap, unique("tx"))
    prod.init_transactions(30)
    for label, commit in (("a", True), ("b", False), ("c", True), ("d", False)):
        prod.begin_transaction()
        for i in range(50):
            prod.produce(topic, value=f"{label}{i}".encode(), partition=0)
        prod.flush(30)
        if commit:
            prod.commit_transaction(30)
        else:
            prod.abort_transaction(30)
    expected_committed = [f"{l}{i}".encode() for l in "ac" for i in range(50)]
    everything = [f"{l}{i}".encode() for l in "abcd" for i in range(50)]
    committed = read_all(broker.bootstrap, topic, 1, "read_committed", expected=100)
    assert committed[0] == expected_committed
    uncommitted = read_all(broker.bootstrap, topic, 1, "read_uncommitted", expected=200)
    assert uncommitted[0] == everything

    # An open transaction: its records are appended, but read_committed stops before them.
    end_before = high_watermark(broker.bootstrap, topic, 0, "read_uncommitted")
    prod.begin_transaction()
    for i in range(20):
        prod.produce(topic, value=f"open{i}".encode(), partition=0)
    prod.flush(30)
    assert high_watermark(broker.bootstrap, topic, 0, "read_uncommitted") == end_before + 20
    assert high_watermark(broker.bootstrap, topic, 0, "read_committed") == end_before
    cons = consumer(broker.bootstrap, **{"isolation.level": "read_committed"})
    try:
        cons.assign([TopicPartition(topic, 0, 0)])
        first, _ = consume_n(cons, 100, 20)
        assert [m.value() for m in first] == expected_committed
        assert expect_no_more(cons, 1.5) == [], "read_committed saw records of an open transaction"
        prod.commit_transaction(30)
        after, _ = consume_n(cons, 20, 20)
        assert [m.value() for m in after] == [f"open{i}".encode() for i in range(20)]
    finally:
        cons.close()
    assert high_watermark(broker.bootstrap, topic, 0, "read_committed") == end_before + 21


def test_second_producer_fences_the_first_and_aborts_its_transaction(broker):
    topic = create_topic(broker.bootstrap, unique("fence"), partitions=2)
    txn_id = unique("tx")
    first = txn_producer(broker.bootstrap, txn_id)
    first.init_transactions(30)
    first.begin_transaction()
    for i in range(30):
        first.produce(topic, value=f"zombie{i}".encode(), partition=i % 2)
    first.flush(30)

    second = txn_producer(broker.bootstrap, txn_id)
    second.init_transactions(30)  # fences `first` and aborts its open transaction
    second.begin_transaction()
    for i in range(10):
        second.produce(topic, value=f"live{i}".encode(), partition=i % 2)
    second.commit_transaction(30)

    with pytest.raises(KafkaException) as failure:
        first.produce(topic, value=b"late", partition=0)
        first.flush(10)
        first.commit_transaction(10)
    err = failure.value.args[0]
    assert err.fatal() or err.code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    ), f"not a fencing error: {err}"

    committed = read_all(broker.bootstrap, topic, 2, "read_committed", expected=10)
    values = sorted(v for vs in committed.values() for v in vs)
    assert values == sorted(f"live{i}".encode() for i in range(10))
    everything = read_all(broker.bootstrap, topic, 2, "read_uncommitted", expected=40)
    assert sum(len(vs) for vs in everything.values()) == 40


def test_transaction_open_past_its_timeout_is_aborted(broker_factory):
    # Kafka's 10 s expiry sweep would make this test wait for it; check every second.
    broker = broker_factory(settings={"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"})
    topic = create_topic(broker.bootstrap, unique("timeout"), partitions=1)
    prod = txn_producer(broker.bootstrap, unique("tx"), **{"transaction.timeout.ms": 2000})
    prod.init_transactions(30)
    prod.begin_transaction()
    for i in range(25):
        prod.produce(topic, value=f"stale{i}".encode(), partition=0)
    prod.flush(30)
    assert high_watermark(broker.bootstrap, topic, 0, "read_committed") == 0
    # The coordinator aborts it: an ABORT marker follows the 25 records and the LSO
    # moves past it without the producer doing anything.
    wait_until(
        lambda: high_watermark(broker.bootstrap, topic, 0, "read_committed") == 26,
        15,
        "the coordinator to abort the timed-out transaction",
    )
    assert read_all(broker.bootstrap, topic, 1, "read_committed")[0] == []
    assert len(read_all(broker.bootstrap, topic, 1, "read_uncommitted", expected=25)[0]) == 25


# ---------------------------------------------------------------- consume-transform-produce

COPIER = r'''
import sys
from confluent_kafka import Consumer, Producer, TopicPartition, KafkaException

bootstrap, source, sink, group, txn_id = sys.argv[1:6]
cons = Consumer({
    "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
    "auto.offset.reset": "earliest", "isolation.level": "read_committed",
    "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
})
prod = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
prod.init_transactions(60)
cons.subscribe([source])
while True:
    batch = cons.consume(num_messages=100, timeout=1.0)
    batch = [m for m in batch if m.error() is None]
    if not batch:
        continue
    prod.begin_transaction()
    for m in batch:
        prod.produce(sink, key=m.key(), value=m.value(), partition=m.partition())
    positions = {}
    for m in batch:
        positions[m.partition()] = m.offset() + 1
    offsets = [TopicPartition(source, p, o) for p, o in positions.items()]
    prod.send_offsets_to_transaction(offsets, cons.consumer_group_metadata(), 30)
    prod.commit_transaction(30)
    print("committed", len(batch), flush=True)
'''


def test_consume_transform_produce_exactly_once_across_copier_kills(broker_factory, tmp_path):
    broker = broker_factory(settings={"group.initial.rebalance.delay.ms": "0"})
    partitions, total = 4, 20_000
    source = create_topic(broker.bootstrap, unique("ctp-in"), partitions=partitions)
    sink = create_topic(broker.bootstrap, unique("ctp-out"), partitions=partitions)
    log = DeliveryLog()
    records = [(i, str(i).encode(), f"r{i}".encode(), None, None) for i in range(total)]
    produce_all(producer(broker.bootstrap), source, records, log)
    assert len(log.acked) == total
    script = tmp_path / "copier.py"
    script.write_text(COPIER)
    group, txn_id = unique("copier"), unique("copier-tx")
    copier_log = open(tmp_path / "copier.log", "ab")

    def start():
        return subprocess.Popen(
            [sys.executable, str(script), broker.bootstrap, source, sink, group, txn_id],
            stdout=copier_log, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def copied():
        return sum(high_watermark(broker.bootstrap, sink, p, "read_uncommitted") for p in range(partitions))

    copier = start()
    try:
        for target in (3_000, 8_000, 13_000):
            wait_until(lambda: copied() >= target, 90, f"the copier to write {target} records")
            copier.send_signal(signal.SIGKILL)
            copier.wait(timeout=10)
            copier = start()
        expected_per_partition = {p: [] for p in range(partitions)}
        for i in range(total):
            part, _, _ = log.acked[i]
            expected_per_partition[part].append(f"r{i}".encode())
        got = read_all(broker.bootstrap, sink, partitions, "read_committed", expected=total, timeout=120, idle=2.0)
    finally:
        if copier.poll() is None:
            copier.send_signal(signal.SIGKILL)
            copier.wait(timeout=10)
        copier_log.close()
    for p in range(partitions):
        assert got[p] == expected_per_partition[p], (
            f"partition {p}: {len(got[p])} records, expected {len(expected_per_partition[p])}"
        )


# ---------------------------------------------------------------- broker crash


def test_broker_kill9_with_transactions_in_flight(broker_factory):
    broker = broker_factory()
    topic = create_topic(broker.bootstrap, unique("crash"), partitions=3)
    per_txn = 30
    committed_ok = []  # (writer, txn) whose commit_transaction returned before the kill
    lock = threading.Lock()
    stop = threading.Event()

    def writer(w):
        prod = txn_producer(
            broker.bootstrap, f"{topic}-w{w}",
            **{"transaction.timeout.ms": 4000, "message.timeout.ms": 4000, "socket.timeout.ms": 3000},
        )
        try:
            prod.init_transactions(20)
            n = 0
            while not stop.is_set():
                prod.begin_transaction()
                for i in range(per_txn):
                    prod.produce(topic, value=f"{w}:{n}:{i}".encode(), partition=(n + i) % 3)
                if n % 4 == 3:
                    prod.abort_transaction(10)
                else:
                    prod.commit_transaction(10)
                    with lock:
                        committed_ok.append((w, n))
                n += 1
        except KafkaException:
            pass  # the broker died under it

    threads = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(3)]
    for t in threads:
        t.start()
    wait_until(lambda: len(committed_ok) >= 15, 60, "some committed transactions")
    broker.kill9()
    stop.set()
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive(), "a writer did not stop"
    survivors = list(committed_ok)
    broker.start()

    # Every transaction open at the crash is finished by the restarted coordinator
    # (decided ones completed, open ones aborted after their timeout): the LSO reaches
    # the end of every partition.
    def settled():
        return all(
            high_watermark(broker.bootstrap, topic, p, "read_committed")
            == high_watermark(broker.bootstrap, topic, p, "read_uncommitted")
            for p in range(3)
        )

    wait_until(settled, 30, "every transaction to be decided after the restart")
    got = read_all(broker.bootstrap, topic, 3, "read_committed", idle=3.0)
    seen = {}
    for vs in got.values():
        for v in vs:
            w, n, i = (int(x) for x in v.decode().split(":"))
            seen.setdefault((w, n), set()).add(i)
    for key, items in seen.items():
        assert items == set(range(per_txn)), f"transaction {key} is partly visible: {len(items)} records"
        assert key[1] % 4 != 3, f"aborted transaction {key} is visible"
    missing = [key for key in survivors if key not in seen]
    assert not missing, f"committed transactions lost: {missing[:5]}"


# ---------------------------------------------------------------- admin views (raw wire)

API_DESCRIBE_PRODUCERS = 61
API_DESCRIBE_TRANSACTIONS = 65
API_LIST_TRANSACTIONS = 66


def test_list_and_describe_transactions_and_producers(broker):
    from kafka_wire import Connection, compact_array, compact_string

    topic = create_topic(broker.bootstrap, unique("views"), partitions=2)
    txn_id = unique("tx")
    prod = txn_producer(broker.bootstrap, txn_id, **{"transaction.timeout.ms": 30000})
    prod.init_transactions(30)
    prod.begin_transaction()
    for i in range(4):
        prod.produce(topic, value=f"v{i}".encode(), partition=1)
    prod.flush(30)
    try:
        with Connection.to(broker.bootstrap) as conn:
            r = conn.flexible_call(API_LIST_TRANSACTIONS, 0, compact_array([compact_string("Ongoing")]) + compact_array([]))
            assert r.i32() == 0 and r.i16() == 0  # throttle, error
            assert r.compact_array(r.compact_string) == []

            def listed(r):
                item = (r.compact_string(), r.i64(), r.compact_string())
                r.skip_tags()
                return item

            states = r.compact_array(lambda: listed(r))
            mine = [s for s in states if s[0] == txn_id]
            assert len(mine) == 1 and mine[0][2] == "Ongoing", states
            producer_id = mine[0][1]

            r = conn.flexible_call(API_DESCRIBE_TRANSACTIONS, 0, compact_array([compact_string(txn_id), compact_string("nope")]))
            r.i32()

            def described(r):
                error, tid, state, timeout_ms, start_ms = r.i16(), r.compact_string(), r.compact_string(), r.i32(), r.i64()
                pid, epoch = r.i64(), r.i16()

                def topic_data(r):
                    item = (r.compact_string(), r.compact_array(r.i32))
                    r.skip_tags()
                    return item

                topics = r.compact_array(lambda: topic_data(r))
                r.skip_tags()
                return error, tid, state, timeout_ms, start_ms, pid, epoch, topics

            found, missing = r.compact_array(lambda: described(r))
            assert found[:4] == (0, txn_id, "Ongoing", 30000)
            assert found[4] > 0 and found[5] == producer_id and found[6] == 0
            assert found[7] == [(topic, [1])]
            assert missing[0] == 105  # TRANSACTIONAL_ID_NOT_FOUND

            body = compact_array([compact_string(topic) + compact_array([struct.pack(">i", 0), struct.pack(">i", 1)]) + b"\x00"])
            r = conn.flexible_call(API_DESCRIBE_PRODUCERS, 0, body)
            r.i32()

            def producer_state(r):
                item = (r.i64(), r.i32(), r.i32(), r.i64(), r.i32(), r.i64())
                r.skip_tags()
                return item

            def partition(r):
                index, error, _message = r.i32(), r.i16(), r.compact_string()
                active = r.compact_array(lambda: producer_state(r))
                r.skip_tags()
                return index, error, active

            def topic_response(r):
                item = (r.compact_string(), r.compact_array(lambda: partition(r)))
                r.skip_tags()
                return item

            [(name, parts)] = r.compact_array(lambda: topic_response(r))
            assert name == topic
            by_index = {index: (error, active) for index, error, active in parts}
            assert by_index[0] == (0, [])
            error, active = by_index[1]
            assert error == 0 and len(active) == 1
            pid, epoch, last_seq, _ts, _coord, txn_start = active[0]
            assert (pid, epoch, last_seq, txn_start) == (producer_id, 0, 3, 0)
    finally:
        prod.abort_transaction(30)
