"""Fetch v18 (KIP-1166): a follower sends the high watermark it knows, and a leader whose
high watermark is further answers at once instead of holding the fetch for its long poll,
so followers learn a new high watermark without waiting out max_wait_ms. The request is
built by hand (no client library speaks for a follower) and sent as one of the topic's
real followers, which is caught up, so its recorded position does not change."""

import struct
import time

from kafka.admin import KafkaAdminClient

import kafka_wire
from cluster_meta import create_topic, leaders, partition, wait_full_isr
from compat_helpers import DeliveryLog, produce_all, producer, unique
from kafka_wire import Reader, uvarint

API_FETCH = 1
MAX_WAIT_MS = 3000


def tagged(fields):
    """A tagged-field section: {tag: encoded value}."""
    out = uvarint(len(fields))
    for tag, value in sorted(fields.items()):
        out += uvarint(tag) + uvarint(len(value)) + value
    return out


def fetch_v18_as_follower(address, follower, topic_id, offset, high_watermark):
    part = (struct.pack(">iiqiqi", 0, -1, offset, -1, 0, 1 << 20)
            + tagged({1: struct.pack(">q", high_watermark)}))
    body = (
        struct.pack(">iiibii", MAX_WAIT_MS, 1, 1 << 20, 0, 0, -1)
        + uvarint(2) + topic_id.bytes + uvarint(2) + part + tagged({})  # one topic, one partition
        + uvarint(1)  # no forgotten topics
        + uvarint(1)  # rack id ""
        + tagged({1: struct.pack(">iq", follower, -1) + tagged({})})  # ReplicaState
    )
    host, port = address.rsplit(":", 1)
    started = time.monotonic()
    with kafka_wire.Connection(host, int(port), timeout=MAX_WAIT_MS / 1000 + 10) as conn:
        r = Reader(conn.call(API_FETCH, 18, b"\x00" + body, timeout=MAX_WAIT_MS / 1000 + 10))
    elapsed = time.monotonic() - started
    r.skip_tags()  # response header
    r.i32()  # throttle
    assert r.i16() == 0  # top-level error
    r.i32()  # session id
    r.uvarint()  # one topic
    r.take(16)
    r.uvarint()  # one partition
    index, error, hw = r.i32(), r.i16(), r.i64()
    assert index == 0
    return elapsed, error, hw


def test_a_follower_behind_on_the_high_watermark_is_answered_at_once(cluster):
    topic = create_topic(cluster, unique("fetch-v18"), 1, 3)
    log = DeliveryLog()
    produce_all(producer(cluster.bootstrap), topic, [(i, None, b"v", None, None) for i in range(10)], log,
                flush_timeout=30)
    wait_full_isr(cluster, topic, 1, 30)
    leader = leaders(cluster, topic, 1)[0]
    follower = next(r for r in partition(cluster, topic, 0).replicas if r != leader)
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        (described,) = client.describe_topic_partitions([topic])["topics"]
    finally:
        client.close()
    address = cluster.node(leader).bootstrap

    behind, error, hw = fetch_v18_as_follower(address, follower, described["topic_id"], 10, 0)
    assert (error, hw) == (0, 10)
    assert behind < 1.5, f"a follower behind on the high watermark waited {behind:.2f} s"

    current, error, hw = fetch_v18_as_follower(address, follower, described["topic_id"], 10, 10)
    assert (error, hw) == (0, 10)
    assert current >= MAX_WAIT_MS / 1000 - 0.5, f"an up-to-date follower was answered after {current:.2f} s"
