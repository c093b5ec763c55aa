"""CreateTopics and Metadata details clients act on: a created topic's error_message is
null (kafka-python shows Kafka's null as None, tidelog used to send ""), and concurrent
Metadata requests auto-creating the same topic all get either the topic or the
retriable LEADER_NOT_AVAILABLE, never TOPIC_ALREADY_EXISTS; and the first clients of
a fresh broker racing to create the coordinators' internal topics all get a
coordinator that serves them."""

import struct
import threading

from confluent_kafka import OFFSET_INVALID, Consumer, Producer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import CreateTopicsRequest

import kafka_wire
from compat_helpers import create_topic, unique

ERROR_TOPIC_ALREADY_EXISTS = 36
ERROR_LEADER_NOT_AVAILABLE = 5


def _send(client, request):
    async def go():
        return await client._manager.send(request, node_id=1)
    return client._manager.run(go)


def test_created_topic_has_a_null_error_message(shared_broker):
    client = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap)
    try:
        topic = CreateTopicsRequest.CreatableTopic
        name = unique("null-message")
        request = CreateTopicsRequest(
            topics=[topic(name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=20000, validate_only=False)
        response = _send(client, request)
        assert response.version >= 5
        (created,) = response.topics
        assert (created.name, created.error_code, created.error_message) == (name, 0, None)
    finally:
        client.close()


def _metadata_v4_topic_errors(body):
    """Metadata v4 response: {topic name: error code}."""
    r = kafka_wire.Reader(body)
    r.i32()  # throttle_time_ms
    r.array(lambda: (r.i32(), r.string(), r.i32(), r.string()))  # brokers
    r.string()  # cluster_id
    r.i32()  # controller_id
    errors = {}

    def topic():
        error = r.i16()
        name = r.string()
        r.i8()  # is_internal
        r.array(lambda: (r.i16(), r.i32(), r.i32(), r.array(r.i32), r.array(r.i32)))
        errors[name] = error

    r.array(topic)
    return errors


def test_concurrent_auto_creation_is_retriable(shared_broker):
    names = [unique("race") for _ in range(5)]
    body = (struct.pack(">i", len(names)) + b"".join(kafka_wire.kstring(n) for n in names)
            + struct.pack(">b", 1))  # allow_auto_topic_creation
    seen = []
    failures = []
    start = threading.Barrier(12)

    def ask():
        try:
            with kafka_wire.Connection.to(shared_broker.bootstrap, timeout=30) as conn:
                start.wait(timeout=30)
                seen.append(_metadata_v4_topic_errors(conn.call(kafka_wire.API_METADATA, 4, body, timeout=30)))
        except Exception as err:  # noqa: BLE001 - reported below
            failures.append(repr(err))

    threads = [threading.Thread(target=ask) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not failures, failures
    assert len(seen) == 12
    for errors in seen:
        assert set(errors) == set(names)
        assert set(errors.values()) <= {0, ERROR_LEADER_NOT_AVAILABLE}, errors


def _all_at_once(count, work):
    """Runs `work(i)` for i in range(count) on threads started together; the errors."""
    errors, start = [], threading.Barrier(count)

    def run(i):
        start.wait(timeout=30)
        try:
            work(i)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            errors.append(repr(e))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    return errors


def test_first_consumers_of_a_fresh_broker_all_find_their_coordinator(broker):
    """Twelve consumers ask for committed offsets at once on a broker without
    __consumer_offsets: their FindCoordinators race to create it. A request that lost
    the race used to name this node before its image had the topic, and the
    OffsetFetch that followed failed with COORDINATOR_NOT_AVAILABLE."""
    topic = unique("fresh")
    create_topic(broker.bootstrap, topic)

    def committed(i):
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g{i}-{topic}"})
        try:
            (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=20)
            assert tp.error is None and tp.offset == OFFSET_INVALID
        finally:
            consumer.close()

    assert _all_at_once(12, committed) == []


def test_first_transactional_producers_of_a_fresh_broker_all_initialise(broker):
    """The same race for __transaction_state: eight transactional producers start at
    once and every one of them commits a transaction."""
    topic = unique("fresh-txn")
    create_topic(broker.bootstrap, topic)

    def transact(i):
        p = Producer({"bootstrap.servers": broker.bootstrap,
                      "transactional.id": f"t{i}-{topic}", "transaction.timeout.ms": 60000})
        p.init_transactions(20)
        p.begin_transaction()
        p.produce(topic, value=f"v{i}".encode())
        p.commit_transaction(20)

    assert _all_at_once(8, transact) == []
