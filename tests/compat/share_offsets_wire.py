"""DescribeShareGroupOffsets (v0, or v1 with the lag of KIP-1226), AlterShareGroupOffsets
and DeleteShareGroupOffsets v0 (KIP-932, API keys 90-92) by hand: the Python clients have
no admin calls for them yet, and Kafka's own tool is Java. All three are flexible
versions."""

import uuid

import kafka_wire as kw

DESCRIBE, ALTER, DELETE = 90, 91, 92


def _topic_name_and_id(r):
    return r.compact_string(), uuid.UUID(bytes=r.take(16))


def describe(bootstrap, group, topics=None, version=0):
    """{'error': code, 'message': str, 'topics': {name: {partition: (start, leader epoch, error)}}};
    at version 1 each partition is (start, leader epoch, error, lag). `topics` None asks
    for every share partition the group has state for."""
    if topics is None:
        wanted = kw.uvarint(0)
    else:
        wanted = kw.compact_array([
            kw.compact_string(name) + kw.compact_array([p.to_bytes(4, "big", signed=True) for p in parts]) + b"\x00"
            for name, parts in topics.items()
        ])
    body = kw.compact_array([kw.compact_string(group) + wanted + b"\x00"])
    with kw.Connection.to(bootstrap) as conn:
        r = conn.flexible_call(DESCRIBE, version, body)
    r.i32()

    def partition():
        index, start, epoch = r.i32(), r.i64(), r.i32()
        lag = r.i64() if version >= 1 else None
        error = r.i16()
        r.compact_string()
        r.skip_tags()
        return index, (start, epoch, error) if version == 0 else (start, epoch, error, lag)

    def topic():
        name, _ = _topic_name_and_id(r)
        partitions = dict(r.compact_array(partition))
        r.skip_tags()
        return name, partitions

    def described():
        group_id = r.compact_string()
        topics = dict(r.compact_array(topic))
        error, message = r.i16(), r.compact_string()
        r.skip_tags()
        return group_id, {"error": error, "message": message, "topics": topics}

    groups = dict(r.compact_array(described))
    return groups[group]


def alter(bootstrap, group, offsets):
    """`offsets` {topic: {partition: start offset}} -> (error, message, {topic: {partition: error}})."""
    topics = [
        kw.compact_string(name)
        + kw.compact_array([
            p.to_bytes(4, "big", signed=True) + start.to_bytes(8, "big", signed=True) + b"\x00"
            for p, start in parts.items()
        ])
        + b"\x00"
        for name, parts in offsets.items()
    ]
    body = kw.compact_string(group) + kw.compact_array(topics)
    with kw.Connection.to(bootstrap) as conn:
        r = conn.flexible_call(ALTER, 0, body)
    r.i32()
    error, message = r.i16(), r.compact_string()

    def partition():
        index, code = r.i32(), r.i16()
        r.compact_string()
        r.skip_tags()
        return index, code

    def topic():
        name, _ = _topic_name_and_id(r)
        partitions = dict(r.compact_array(partition))
        r.skip_tags()
        return name, partitions

    return error, message, dict(r.compact_array(topic) or [])


def delete(bootstrap, group, topics):
    """-> (error, message, {topic: error})."""
    body = kw.compact_string(group) + kw.compact_array([kw.compact_string(t) + b"\x00" for t in topics])
    with kw.Connection.to(bootstrap) as conn:
        r = conn.flexible_call(DELETE, 0, body)
    r.i32()
    error, message = r.i16(), r.compact_string()

    def topic():
        name, _ = _topic_name_and_id(r)
        code = r.i16()
        r.compact_string()
        r.skip_tags()
        return name, code

    return error, message, dict(r.compact_array(topic) or [])
