"""OffsetCommit v10 / OffsetFetch v10 (Kafka 4.2, KIP-848): topics named by id. Sent through
kafka-python's protocol classes (its consumer picks v10 once the broker offers it);
offsets committed by id read back by name and the other way round."""

import time
import uuid

from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

from compat_helpers import create_topic, unique

ERROR_UNKNOWN_TOPIC_ID = 100
RETRIABLE = {14, 15, 16}  # coordinator loading / not available / not coordinator


def _send(client, request):
    async def go():
        return await client._manager.send(request, node_id=1)
    return client._manager.run(go)


def _commit_v10(client, group, topic_id, offset):
    topic = OffsetCommitRequest.OffsetCommitRequestTopic
    request = OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[topic(topic_id=topic_id, partitions=[topic.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata="by-id")])],
        min_version=10)
    deadline = time.monotonic() + 20
    while True:
        response = _send(client, request)
        assert response.version == 10
        (answered,) = response.topics
        assert answered.topic_id == topic_id
        code = answered.partitions[0].error_code
        if code not in RETRIABLE or time.monotonic() > deadline:
            return code
        time.sleep(0.2)


def _fetch_v10(client, group, topic_ids):
    groups = OffsetFetchRequest.OffsetFetchRequestGroup
    topics = None if topic_ids is None else [
        groups.OffsetFetchRequestTopics(topic_id=t, partition_indexes=[0]) for t in topic_ids]
    request = OffsetFetchRequest(groups=[groups(group_id=group, member_id=None, member_epoch=-1,
                                                topics=topics)],
                                 require_stable=False, min_version=10)
    response = _send(client, request)
    assert response.version == 10
    (answered,) = response.groups
    assert answered.error_code == 0
    return {t.topic_id: [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions]
            for t in answered.topics}


def test_commit_and_fetch_by_topic_id(shared_broker):
    name = create_topic(shared_broker.bootstrap, unique("offsets-by-id"), 1)
    group = unique("g-by-id")
    client = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap, request_timeout_ms=20000)
    try:
        (described,) = client.describe_topic_partitions([name])["topics"]
        topic_id = described["topic_id"]
        # FindCoordinator first, as clients do: it creates __consumer_offsets.
        assert client.list_group_offsets({group: None}) == {group: {}}
        assert _commit_v10(client, group, topic_id, 42) == 0
        missing = uuid.uuid4()
        assert _commit_v10(client, group, missing, 7) == ERROR_UNKNOWN_TOPIC_ID

        fetched = _fetch_v10(client, group, [topic_id, missing])
        assert fetched[topic_id] == [(0, 42, 0)]
        assert fetched[missing] == [(0, -1, ERROR_UNKNOWN_TOPIC_ID)]
        assert _fetch_v10(client, group, None) == {topic_id: [(0, 42, 0)]}

        # kafka-python's own OffsetFetch (v10 now) maps the ids back to names.
        listed = client.list_group_offsets({group: None})[group]
        assert listed[TopicPartition(name, 0)].offset == 42
    finally:
        client.close()


def test_kafka_python_consumer_commits_and_resumes(shared_broker):
    name = create_topic(shared_broker.bootstrap, unique("offsets-consumer"), 1)
    group = unique("g-consumer")
    consumer = KafkaConsumer(bootstrap_servers=shared_broker.bootstrap, group_id=group,
                             enable_auto_commit=False)
    try:
        tp = TopicPartition(name, 0)
        consumer.assign([tp])
        consumer.commit({tp: OffsetAndMetadata(5, "", -1)})
        assert consumer.committed(tp) == 5
    finally:
        consumer.close()
