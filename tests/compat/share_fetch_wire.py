"""ShareGroupHeartbeat v1, ShareFetch v1-2 and ShareAcknowledge v1-2 (KIP-932, API keys
76, 78 and 79) by hand: librdkafka's ShareConsumer does not send the RENEW
acknowledgement of version 2 (KIP-1222), and the tests need exact control of the
acquisition locks' timing. All are flexible versions."""

import struct
import time
import uuid

from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

import kafka_wire as kw
from compat_helpers import admin, create_topic, producer, unique

SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 78, 79
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
INVALID_REQUEST, INVALID_RECORD_STATE = 42, 121
# The offsets topic may still be on its way.
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 15, 16


def _i8(v):
    return struct.pack(">b", v)


def _i32(v):
    return struct.pack(">i", v)


def _i64(v):
    return struct.pack(">q", v)


def _partition_zero(r, partition_data):
    """Reads a response's topics array (topic id, partitions read by `partition_data` as
    (index, fields)) and returns what partition 0 answered, or None."""
    def topic():
        r.take(16)
        parts = dict(r.compact_array(partition_data) or [])
        r.skip_tags()
        return parts

    topics = r.compact_array(topic) or []
    return {k: v for t in topics for k, v in t.items()}.get(0)


class Member:
    """One share-group member speaking the wire: its id, its group epoch and its share
    session epoch (0 opens a session, then 1, 2, ...)."""

    def __init__(self, bootstrap, group):
        self.bootstrap = bootstrap
        self.group = group
        self.member_id = uuid.uuid4().hex[:22]
        self.member_epoch = 0
        self.session_epoch = 0

    def heartbeat(self, topics):
        """One heartbeat; returns the assignment {topic id: [partitions]} or None."""
        body = (kw.compact_string(self.group) + kw.compact_string(self.member_id) + _i32(self.member_epoch)
                + b"\x00"  # no rack
                + kw.compact_array([kw.compact_string(t) for t in topics]))
        with kw.Connection.to(self.bootstrap) as conn:
            r = conn.flexible_call(SHARE_GROUP_HEARTBEAT, 1, body)
        r.i32()
        error, message = r.i16(), r.compact_string()
        if error in (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR):
            return None
        assert error == 0, (error, message)
        r.compact_string()
        self.member_epoch = r.i32()
        r.i32()  # heartbeat interval
        if r.i8() < 0:
            return None

        def topic_partitions():
            topic_id = uuid.UUID(bytes=r.take(16))
            partitions = r.compact_array(r.i32)
            r.skip_tags()
            return topic_id, partitions

        return dict(r.compact_array(topic_partitions) or [])

    def join(self, topic, timeout=20):
        """Heartbeats until the member is assigned a partition of `topic`; its topic id."""
        deadline = time.monotonic() + timeout
        while True:
            assignment = self.heartbeat([topic])
            if assignment:
                return next(iter(assignment))
            assert time.monotonic() < deadline, f"{self.member_id} got no assignment"
            time.sleep(0.2)

    def fetch(self, topic_id, acks=(), version=2, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
              max_records=100, acquire_mode=0, renew=False, timeout=10.0):
        """One ShareFetch of partition 0 of `topic_id`, with `acks` [(first, last, [types])];
        returns (error, lock ms, {partition fields}) where the partition's fields are
        'error', 'ack_error' and 'acquired' [(first, last, delivery count)]."""
        batches = [_i64(f) + _i64(l) + kw.compact_array([_i8(t) for t in types]) + b"\x00" for f, l, types in acks]
        partition = _i32(0) + kw.compact_array(batches) + b"\x00"
        body = (kw.compact_string(self.group) + kw.compact_string(self.member_id) + _i32(self.session_epoch)
                + _i32(max_wait_ms) + _i32(min_bytes) + _i32(max_bytes) + _i32(max_records) + _i32(0))
        if version >= 2:
            body += _i8(acquire_mode) + _i8(1 if renew else 0)
        body += kw.compact_array([topic_id.bytes + kw.compact_array([partition]) + b"\x00"])
        body += kw.compact_array([])  # nothing forgotten
        with kw.Connection.to(self.bootstrap, timeout) as conn:
            r = conn.flexible_call(SHARE_FETCH, version, body, timeout)
        r.i32()
        error = r.i16()
        r.compact_string()
        lock_ms = r.i32()
        if error == 0:
            self.session_epoch += 1

        def acquired():
            first, last, count = r.i64(), r.i64(), r.i16()
            r.skip_tags()
            return first, last, count

        def partition_data():
            index = r.i32()
            fields = {"error": r.i16()}
            r.compact_string()
            fields["ack_error"] = r.i16()
            r.compact_string()
            r.i32(), r.i32()
            r.skip_tags()  # current leader
            size = r.uvarint()
            if size:
                r.take(size - 1)
            fields["acquired"] = r.compact_array(acquired) or []
            r.skip_tags()
            return index, fields

        return error, lock_ms, _partition_zero(r, partition_data)

    def acknowledge(self, topic_id, acks, version=2, renew=False):
        """One ShareAcknowledge of partition 0 of `topic_id`; returns (error, lock ms or
        None before version 2, partition error)."""
        batches = [_i64(f) + _i64(l) + kw.compact_array([_i8(t) for t in types]) + b"\x00" for f, l, types in acks]
        body = kw.compact_string(self.group) + kw.compact_string(self.member_id) + _i32(self.session_epoch)
        if version >= 2:
            body += _i8(1 if renew else 0)
        partition = _i32(0) + kw.compact_array(batches) + b"\x00"
        body += kw.compact_array([topic_id.bytes + kw.compact_array([partition]) + b"\x00"])
        with kw.Connection.to(self.bootstrap) as conn:
            r = conn.flexible_call(SHARE_ACKNOWLEDGE, version, body)
        r.i32()
        error = r.i16()
        r.compact_string()
        lock_ms = r.i32() if version >= 2 else None
        if error == 0:
            self.session_epoch += 1

        def partition_data():
            index, code = r.i32(), r.i16()
            r.compact_string()
            r.i32(), r.i32()
            r.skip_tags()
            r.skip_tags()
            return index, code

        return error, lock_ms, _partition_zero(r, partition_data)

    def acquire(self, topic_id, timeout=15):
        """Fetches until records are acquired; returns [(first, last, delivery count)]."""
        deadline = time.monotonic() + timeout
        while True:
            error, _, part = self.fetch(topic_id, max_wait_ms=1000, min_bytes=1)
            assert error == 0, error
            if part and part["acquired"]:
                assert part["error"] == 0, part
                return part["acquired"]
            assert time.monotonic() < deadline, f"{self.member_id} acquired nothing"


def share_topic_with_records(bootstrap, values, lock_ms, renew_enabled=True):
    """A topic holding `values` and a group reading it from the start under a `lock_ms`
    acquisition lock (its own `share.record.lock.duration.ms`, a GROUP config)."""
    topic, group = unique("share-renew"), unique("sg")
    create_topic(bootstrap, topic, partitions=1)
    configs = [
        ConfigEntry("share.record.lock.duration.ms", str(lock_ms), incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("share.renew.acknowledge.enable", str(renew_enabled).lower(),
                    incremental_operation=AlterConfigOpType.SET),
    ]
    client = admin(bootstrap)  # kept alive until its futures are done
    futures = client.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=configs)], request_timeout=15
    )
    for f in futures.values():
        f.result(timeout=20)
    # FindCoordinator creates the offsets topic, which ShareGroupHeartbeat needs.
    for f in client.describe_consumer_groups([group], request_timeout=15).values():
        f.result(timeout=20)
    prod = producer(bootstrap)
    for v in values:
        prod.produce(topic, value=v)
    assert prod.flush(20) == 0
    return topic, group
