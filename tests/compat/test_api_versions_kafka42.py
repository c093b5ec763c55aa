"""The versions tidelog advertises, as clients read them: kafka-python infers the broker's
Kafka release from ApiVersions (Produce 13: 4.1, ListOffsets 11: 4.2), and its table of
what Kafka 4.2 advertises is the reference for every API tidelog implements."""

import uuid

import pytest
from kafka.admin import KafkaAdminClient
from kafka.protocol.broker_version_data import BrokerVersionData
from kafka.protocol.producer import ProduceRequest

import kafka_wire
import record_batches
from compat_helpers import create_topic, unique

# APIs where tidelog still advertises less than Kafka 4.2, and why (docs/compatibility.md).
BEHIND_KAFKA_4_2 = {}
# Advertised although a stock Kafka 4.2 (no telemetry receiver configured) leaves them out.
BEYOND_STOCK_KAFKA = {71, 72}


def kafka_admin(bootstrap):
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)


def advertised(bootstrap):
    with kafka_wire.Connection.to(bootstrap) as conn:
        error, ranges = kafka_wire.api_versions(conn)
    assert error == 0
    return ranges


def test_kafka_python_infers_kafka_4_2(shared_broker):
    client = kafka_admin(shared_broker.bootstrap)
    try:
        assert client._manager.broker_version == (4, 2)
    finally:
        client.close()


def test_every_implemented_api_advertises_kafka_4_2s_newest_version(shared_broker):
    kafka = BrokerVersionData((4, 2)).api_versions
    ours = advertised(shared_broker.bootstrap)
    for key, (_, our_max) in ours.items():
        if key in BEYOND_STOCK_KAFKA:
            continue
        assert key in kafka, f"api {key} is not one Kafka 4.2 advertises"
        expected = BEHIND_KAFKA_4_2.get(key, kafka[key][1])
        assert our_max == expected, f"api {key}: tidelog {our_max}, Kafka 4.2 {kafka[key][1]}"
    for key in (0, 1, 2, 3, 15, 10):
        assert ours[key][1] == kafka[key][1], f"api {key} below Kafka 4.2"


def _send(client, request):
    async def go():
        return await client._manager.send(request, node_id=1)
    return client._manager.run(go)


def _produce_v13(client, topic_id):
    data = ProduceRequest.TopicProduceData
    part = data.PartitionProduceData(index=0, records=record_batches.good_batch([b"by-id"]))
    request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=10000,
                             topic_data=[data(name="", topic_id=topic_id, partition_data=[part])])
    response = _send(client, request)
    assert response.version == 13
    (topic,) = response.responses
    assert topic.topic_id == topic_id
    (partition,) = topic.partition_responses
    return partition


def test_produce_v13_names_topics_by_id(shared_broker):
    name = create_topic(shared_broker.bootstrap, unique("by-id"), 1)
    client = kafka_admin(shared_broker.bootstrap)
    try:
        (described,) = client.describe_topic_partitions([name])["topics"]
        first = _produce_v13(client, described["topic_id"])
        assert (first.error_code, first.base_offset) == (0, 0)
        second = _produce_v13(client, described["topic_id"])
        assert (second.error_code, second.base_offset) == (0, 1)
        unknown = _produce_v13(client, uuid.uuid4())
        assert unknown.error_code == 100  # UNKNOWN_TOPIC_ID
    finally:
        client.close()


@pytest.mark.parametrize("timestamp,version,expected", [
    (-5, 9, (0, -1)),      # LATEST_TIERED: no tiered storage, offset -1
    (-6, 11, (0, -1)),     # EARLIEST_PENDING_UPLOAD (KIP-1023)
    (-4, 8, (0, 0)),       # EARLIEST_LOCAL: the log start
    (-6, 10, (35, -1)),    # a timestamp newer than the request's version: UNSUPPORTED_VERSION
    (-5, 8, (35, -1)),
])
def test_list_offsets_special_timestamps(shared_broker, timestamp, version, expected):
    from kafka.protocol.consumer import ListOffsetsRequest
    name = create_topic(shared_broker.bootstrap, unique("offsets"), 1)
    client = kafka_admin(shared_broker.bootstrap)
    try:
        topic = ListOffsetsRequest.ListOffsetsTopic
        request = ListOffsetsRequest(
            replica_id=-1, isolation_level=0, timeout_ms=1000,
            topics=[topic(name=name, partitions=[topic.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=timestamp)])],
            min_version=version, max_version=version)
        response = _send(client, request)
        assert response.version == version
        (partition,) = response.topics[0].partitions
        assert (partition.error_code, partition.offset) == expected
    finally:
        client.close()
