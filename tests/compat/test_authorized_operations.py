"""Authorized-operations bitfields (KIP-430) through confluent-kafka's AdminClient, as a
Kafka broker without an authorizer answers: every operation the resource supports."""

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation

from compat_helpers import admin, consumer, create_topic, unique, wait_until

TIMEOUT = 20

TOPIC_OPERATIONS = {
    AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
    AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}
CLUSTER_OPERATIONS = {
    AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
    AclOperation.DESCRIBE,
}
GROUP_OPERATIONS = {
    AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
    AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
}


def test_topic_operations(shared_broker):
    name = create_topic(shared_broker.bootstrap, unique("ops"), 1)
    client = admin(shared_broker.bootstrap)
    futures = client.describe_topics(TopicCollection([name]), include_authorized_operations=True,
                                     request_timeout=TIMEOUT)
    described = futures[name].result(timeout=TIMEOUT)
    assert set(described.authorized_operations) == TOPIC_OPERATIONS

    plain = client.describe_topics(TopicCollection([name]), request_timeout=TIMEOUT)[name].result(timeout=TIMEOUT)
    assert plain.authorized_operations is None  # not asked: Kafka's sentinel


def test_cluster_operations(shared_broker):
    client = admin(shared_broker.bootstrap)
    cluster = client.describe_cluster(include_authorized_operations=True,
                                      request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert set(cluster.authorized_operations) == CLUSTER_OPERATIONS
    plain = client.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert plain.authorized_operations is None


def test_group_operations(shared_broker):
    topic = create_topic(shared_broker.bootstrap, unique("ops-group"), 1)
    group = unique("ops-group")
    member = consumer(shared_broker.bootstrap, **{"group.id": group})
    try:
        member.subscribe([topic])
        wait_until(lambda: member.poll(0.2) is None and member.assignment(), TIMEOUT, "an assignment")
        client = admin(shared_broker.bootstrap)
        described = client.describe_consumer_groups([group], include_authorized_operations=True,
                                                    request_timeout=TIMEOUT)[group].result(timeout=TIMEOUT)
        assert set(described.authorized_operations) == GROUP_OPERATIONS
        plain = client.describe_consumer_groups([group], request_timeout=TIMEOUT)[group].result(timeout=TIMEOUT)
        assert plain.authorized_operations is None
    finally:
        member.close()
