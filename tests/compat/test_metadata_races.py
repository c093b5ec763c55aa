"""CreateTopics and Metadata details clients act on: a created topic's error_message is
null (kafka-python shows Kafka's null as None, tidelog used to send ""), and concurrent
Metadata requests auto-creating the same topic all get either the topic or the
retriable LEADER_NOT_AVAILABLE, never TOPIC_ALREADY_EXISTS."""

import struct
import threading

from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import CreateTopicsRequest

import kafka_wire
from compat_helpers import unique

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
