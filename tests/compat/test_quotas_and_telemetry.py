"""Client quotas and client telemetry (KIP-714) as a Kafka broker with none set answers:
DescribeClientQuotas lists nothing (and refuses a malformed filter as Kafka does;
quotas set and enforced are in test_quotas.py), GetTelemetrySubscriptions hands out
an instance id and an empty subscription, which librdkafka accepts, and PushTelemetry
checks what it is sent."""

import logging
import struct
import time
import uuid

from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import DescribeClientQuotasRequest

import kafka_wire
from compat_helpers import create_topic, unique

API_GET_TELEMETRY_SUBSCRIPTIONS = 71
API_PUSH_TELEMETRY = 72


def _send(client, request):
    async def go():
        return await client._manager.send(request, node_id=1)
    return client._manager.run(go)


def test_describe_client_quotas_with_none_set(shared_broker):
    client = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap)
    try:
        component = DescribeClientQuotasRequest.ComponentData
        listed = _send(client, DescribeClientQuotasRequest(
            components=[component(entity_type="user", match_type=2, match=None)], strict=False))
        assert (listed.error_code, listed.error_message, listed.entries) == (0, None, [])
        exact = _send(client, DescribeClientQuotasRequest(
            components=[component(entity_type="client-id", match_type=0, match="app")], strict=True))
        assert (exact.error_code, exact.entries) == (0, [])
        bad = _send(client, DescribeClientQuotasRequest(
            components=[component(entity_type="user", match_type=0, match=None)], strict=False))
        assert bad.error_code == 42 and bad.entries is None  # INVALID_REQUEST
        assert "MATCH_TYPE_EXACT" in bad.error_message
    finally:
        client.close()


class Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def test_librdkafka_gets_an_empty_telemetry_subscription(shared_broker):
    topic = create_topic(shared_broker.bootstrap, unique("telemetry"), 1)
    lines = Lines()
    logger = logging.Logger("librdkafka-telemetry", logging.DEBUG)
    logger.addHandler(lines)
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "debug": "telemetry",
                         "enable.metrics.push": True}, logger=logger)
    producer.produce(topic, b"v")
    assert producer.flush(20) == 0
    deadline = time.monotonic() + 20
    handled = []
    while time.monotonic() < deadline and not handled:
        producer.poll(0.2)
        handled = [line for line in lines.lines if "Handled GetTelemetrySubscriptions" in line]
    assert handled, "librdkafka never completed GetTelemetrySubscriptions:\n" + "\n".join(lines.lines[-20:])
    assert "err = Success" in handled[0] and "metrics = 0" in handled[0], handled[0]
    assert not any("PushTelemetry" in line and "Sending" in line for line in lines.lines)


def _get_subscriptions(conn, instance_id):
    r = conn.flexible_call(API_GET_TELEMETRY_SUBSCRIPTIONS, 0, instance_id.bytes)
    r.i32()  # throttle_time_ms
    answer = {"error_code": r.i16(), "client_instance_id": uuid.UUID(bytes=r.take(16)),
              "subscription_id": r.i32()}
    answer["accepted_compression_types"] = r.compact_array(r.i8)
    answer["push_interval_ms"] = r.i32()
    answer["telemetry_max_bytes"] = r.i32()
    answer["delta_temporality"] = r.i8() == 1
    answer["requested_metrics"] = r.compact_array(r.compact_string)
    return answer


def _push(conn, instance_id, subscription_id, compression=0, metrics=b""):
    body = (instance_id.bytes + struct.pack(">ibb", subscription_id, 0, compression)
            + kafka_wire.uvarint(len(metrics) + 1) + metrics)
    r = conn.flexible_call(API_PUSH_TELEMETRY, 0, body)
    r.i32()  # throttle_time_ms
    return r.i16()


def test_telemetry_subscription_and_push_checks(shared_broker):
    with kafka_wire.Connection.to(shared_broker.bootstrap) as conn:
        got = _get_subscriptions(conn, uuid.UUID(int=0))
        assert got["error_code"] == 0
        instance = got["client_instance_id"]
        assert instance.int > 1  # a fresh id, never a reserved one
        assert got["requested_metrics"] == []
        assert got["push_interval_ms"] == 300000 and got["delta_temporality"]
        assert got["accepted_compression_types"] == [4, 3, 1, 2]
        again = _get_subscriptions(conn, instance)
        assert (again["client_instance_id"], again["subscription_id"]) == (instance, got["subscription_id"])

        subscription = got["subscription_id"]
        assert _push(conn, instance, subscription) == 0
        assert _push(conn, instance, subscription ^ 1) == 117  # UNKNOWN_SUBSCRIPTION_ID
        assert _push(conn, uuid.UUID(int=0), subscription) == 42  # INVALID_REQUEST
        assert _push(conn, instance, subscription, compression=9) == 76  # UNSUPPORTED_COMPRESSION_TYPE
        too_large = b"\0" * (got["telemetry_max_bytes"] + 1)
        assert _push(conn, instance, subscription, metrics=too_large) == 118  # TELEMETRY_TOO_LARGE
