"""KIP-848 consumer groups under StandardAuthorizer (KAFKA-18813): a member may
subscribe by name only to topics it may describe (TOPIC_AUTHORIZATION_FAILED
otherwise), its regex resolves only to those, and ConsumerGroupDescribe hides a group
whose topics the caller may not all describe. Principals come from mTLS certificates,
as in test_acls.py, whose broker and helpers this module reuses."""

import ssl
import struct

from confluent_kafka import Consumer
from confluent_kafka.admin import AclOperation, ResourcePatternType, ResourceType

import kafka_wire
from compat_helpers import client_logger, create_topic, producer, unique, wait_until
from test_acls import TIMEOUT_S, add_acls, allow, broker, conf_for, pki  # noqa: F401 - fixtures

CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69
TOPIC_AUTHORIZATION_FAILED = 29


def connect_as(broker, pki, user):
    """A raw Kafka connection to the SSL listener with `user`'s certificate."""
    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    context.check_hostname = False
    context.load_cert_chain(str(pki / f"{user}.pem"), str(pki / f"{user}.key"))
    conn = kafka_wire.Connection("127.0.0.1", broker.ssl_port)
    conn.sock = context.wrap_socket(conn.sock, server_hostname="127.0.0.1")
    return conn


def join_by_name(conn, group, topics):
    """ConsumerGroupHeartbeat v1 joining `group` subscribed to `topics` -> error code."""
    body = (kafka_wire.compact_string(group) + kafka_wire.compact_string(unique("member"))
            + struct.pack(">i", 0)  # member epoch: joining
            + b"\x00\x00"  # instance id, rack id: null
            + struct.pack(">i", 30000)
            + kafka_wire.compact_array([kafka_wire.compact_string(t) for t in topics])
            + b"\x00\x00"  # regex, server assignor: null
            + kafka_wire.uvarint(1))  # owned partitions: empty
    reader = conn.flexible_call(CONSUMER_GROUP_HEARTBEAT, 1, body)
    reader.i32()  # throttle
    return reader.i16()


def describe_error(conn, group):
    """ConsumerGroupDescribe v0 of one group -> that group's error code."""
    body = kafka_wire.compact_array([kafka_wire.compact_string(group)]) + b"\x00"
    reader = conn.flexible_call(CONSUMER_GROUP_DESCRIBE, 0, body)
    reader.i32()  # throttle
    assert reader.uvarint() == 2  # one group
    return reader.i16()


def test_a_member_subscribes_only_to_topics_it_may_describe(broker, pki):
    prefix = unique("kip848-acl")
    allowed = create_topic(broker.bootstrap, f"{prefix}-ok", partitions=2)
    denied = create_topic(broker.bootstrap, f"{prefix}-no", partitions=2)
    group = unique("kip848-acl-group")
    add_acls(broker,
             allow(ResourceType.GROUP, group, "User:alice", AclOperation.READ),
             allow(ResourceType.TOPIC, allowed, "User:alice", AclOperation.READ),
             allow(ResourceType.GROUP, group, "User:bob", AclOperation.DESCRIBE))
    prod = producer(broker.bootstrap)
    for topic in (allowed, denied):
        for i in range(4):
            prod.produce(topic, f"{topic}:{i}".encode(), partition=i % 2)
    assert prod.flush(TIMEOUT_S) == 0

    with connect_as(broker, pki, "alice") as conn:
        # Refused before the coordinator sees it: the group gains no member.
        assert join_by_name(conn, group, [allowed, denied]) == TOPIC_AUTHORIZATION_FAILED
    # The same group over a regex matching both: only the describable topic is assigned.
    assigned = set()
    consumer = Consumer({**conf_for(broker, pki, "alice"), "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False},
                        logger=client_logger("kip848-acl"))
    got = []
    try:
        consumer.subscribe([f"^{prefix}-.*"], on_assign=lambda c, ps: assigned.update((p.topic, p.partition) for p in ps))

        def consumed_all():
            got.extend(m.value() for m in consumer.consume(10, 0.5) if not m.error())
            return len(got) >= 4

        wait_until(consumed_all, 30, f"the 4 records of {allowed}")
        assert assigned == {(allowed, 0), (allowed, 1)}
        assert sorted(got) == sorted(f"{allowed}:{i}".encode() for i in range(4))

        # bob may describe the group but not its topic: the group is hidden from him.
        with connect_as(broker, pki, "bob") as conn:
            assert describe_error(conn, group) == TOPIC_AUTHORIZATION_FAILED
        add_acls(broker, allow(ResourceType.TOPIC, prefix, "User:bob", AclOperation.DESCRIBE,
                               pattern=ResourcePatternType.PREFIXED))
        with connect_as(broker, pki, "bob") as conn:
            assert describe_error(conn, group) == 0
    finally:
        consumer.close()
