"""Hand-built Kafka requests the cluster tests send to one chosen node.

confluent-kafka picks which broker answers a Metadata request and has no API for
ListPartitionReassignments or DescribeQuorum; these calls go to the node the test names,
so a test can ask a survivor (never a killed or stopped node) and compare what each
node believes. Non-flexible versions use `kafka_wire`'s header v1; flexible ones add
the header's empty tagged-field section and end the body with one.
"""

import struct
from dataclasses import dataclass, field

import kafka_wire
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka_wire import Reader, compact_array, compact_string, kstring, uvarint

API_PRODUCE = 0
API_CREATE_TOPICS = 19
API_FIND_COORDINATOR = 10
API_LIST_PARTITION_REASSIGNMENTS = 46
API_DESCRIBE_QUORUM = 55

COORDINATOR_GROUP = 0
COORDINATOR_TRANSACTION = 1


@dataclass
class PartitionState:
    error: int
    leader: int
    replicas: list
    isr: list
    offline: list = field(default_factory=list)


@dataclass
class ClusterView:
    brokers: dict  # node id -> (host, port)
    controller: int
    topics: dict  # name -> (error, {partition: PartitionState})


def _host_port(address):
    host, port = address.rsplit(":", 1)
    return host, int(port)


def _call(address, api_key, version, body, timeout):
    host, port = _host_port(address)
    with kafka_wire.Connection(host, port, timeout=timeout) as conn:
        return conn.call(api_key, version, body, timeout=timeout)


def metadata(address, topics=None, timeout=3.0):
    """Metadata v5 from the node at `address` (all topics when `topics` is None)."""
    if topics is None:
        body = struct.pack(">i", -1)
    else:
        body = struct.pack(">i", len(topics)) + b"".join(kstring(t) for t in topics)
    r = Reader(_call(address, kafka_wire.API_METADATA, 5, body + b"\x00", timeout))
    r.i32()  # throttle
    brokers = {}
    for node_id, host, port in r.array(lambda: (r.i32(), r.string(), r.i32(), r.string())[:3]):
        brokers[node_id] = (host, port)
    r.string()  # cluster id
    controller = r.i32()
    out = {}

    def partition():
        error, index, leader = r.i16(), r.i32(), r.i32()
        replicas = r.array(r.i32)
        isr = r.array(r.i32)
        offline = r.array(r.i32)
        return index, PartitionState(error, leader, replicas, isr, offline)

    def topic():
        error, name = r.i16(), r.string()
        r.i8()  # is_internal
        out[name] = (error, dict(r.array(partition)))

    r.array(topic)
    return ClusterView(brokers, controller, out)


def create_topic(address, name, partitions, replication_factor, config=None, timeout_ms=10000):
    """CreateTopics v2 to one node; returns (error_code, error_message)."""
    configs = config or {}
    body = (
        struct.pack(">i", 1) + kstring(name) + struct.pack(">ih", partitions, replication_factor)
        + struct.pack(">i", 0)
        + struct.pack(">i", len(configs)) + b"".join(kstring(k) + kstring(str(v)) for k, v in configs.items())
        + struct.pack(">ib", timeout_ms, 0)
    )
    r = Reader(_call(address, API_CREATE_TOPICS, 2, body, timeout_ms / 1000 + 10))
    r.i32()
    [(got, error, message)] = r.array(lambda: (r.string(), r.i16(), r.string()))
    assert got == name, f"CreateTopics answered for {got!r}, asked {name!r}"
    return error, message


def produce(address, topic, partition, values, acks=-1, timeout_ms=3000):
    """Produce v3 of one uncompressed batch to exactly the node at `address` (no metadata,
    no routing, no retries). Returns (error_code, base_offset); raises OSError/TimeoutError/
    ConnectionClosed when no answer comes."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for offset, value in enumerate(values):
        builder.append(offset, timestamp=None, key=None, value=value, headers=[])
    records = bytes(builder.build())
    body = (
        kstring(None) + struct.pack(">hi", acks, timeout_ms) + struct.pack(">i", 1) + kstring(topic)
        + struct.pack(">i", 1) + struct.pack(">ii", partition, len(records)) + records
    )
    r = Reader(_call(address, API_PRODUCE, 3, body, timeout_ms / 1000 + 5))
    [(_, [(index, error, base_offset)])] = r.array(
        lambda: (r.string(), r.array(lambda: (r.i32(), r.i16(), r.i64(), r.i64())[:3])))
    assert index == partition
    return error, base_offset


def find_coordinator(address, key, key_type, timeout=5.0):
    """FindCoordinator v1: (error_code, node_id)."""
    body = kstring(key) + struct.pack(">b", key_type)
    r = Reader(_call(address, API_FIND_COORDINATOR, 1, body, timeout))
    r.i32()
    error = r.i16()
    r.string()
    return error, r.i32()


# ---------------------------------------------------------------- flexible versions


def _flexible_call(address, api_key, version, body, timeout):
    host, port = _host_port(address)
    with kafka_wire.Connection(host, port, timeout=timeout) as conn:
        return conn.flexible_call(api_key, version, body, timeout=timeout)


def list_reassignments(address, timeout_ms=10000):
    """ListPartitionReassignments v0 for every partition: {(topic, p): (replicas, adding, removing)}."""
    body = struct.pack(">i", timeout_ms) + uvarint(0)  # null topics: all in flight
    r = _flexible_call(address, API_LIST_PARTITION_REASSIGNMENTS, 0, body, timeout_ms / 1000 + 10)
    r.i32()
    error, message = r.i16(), r.compact_string()
    assert error == 0, f"ListPartitionReassignments failed: {error} {message}"
    found = {}

    def ints():
        return r.compact_array(r.i32) or []

    def partition(topic):
        index, replicas, adding, removing = r.i32(), ints(), ints(), ints()
        r.skip_tags()
        found[(topic, index)] = (replicas, adding, removing)

    def topic_entry():
        name = r.compact_string()
        r.compact_array(lambda: partition(name))
        r.skip_tags()

    r.compact_array(topic_entry)
    return found


def describe_quorum_leader(address, timeout=5.0):
    """The controller quorum's leader id by DescribeQuorum v0 (None if not answered)."""
    body = compact_array([compact_string("__cluster_metadata") + compact_array([struct.pack(">i", 0) + b"\x00"]) + b"\x00"])
    try:
        r = _flexible_call(address, API_DESCRIBE_QUORUM, 0, body, timeout)
    except (OSError, ValueError, kafka_wire.ConnectionClosed):
        return None
    if r.i16() != 0:
        return None
    leaders = []

    def voter():
        r.i32()
        r.i64()
        r.skip_tags()

    def partition():
        r.i32()
        error, leader = r.i16(), r.i32()
        r.i32()
        r.i64()
        r.compact_array(voter)
        r.compact_array(voter)
        r.skip_tags()
        if error == 0 and leader >= 0:
            leaders.append(leader)

    def topic():
        r.compact_string()
        r.compact_array(partition)
        r.skip_tags()

    r.compact_array(topic)
    return leaders[0] if leaders else None
