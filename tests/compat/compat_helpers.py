"""Client-side helpers shared by the compatibility tests. Every wait is bounded."""

import logging
import random
import socket
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType
from kafka import KafkaConsumer, KafkaProducer
from kafka.partitioner import murmur2

# Errors a consumer may report while still working (e.g. group coordinator lookups,
# which these tests never rely on because they assign partitions explicitly).
TRANSIENT_CONSUMER_ERRORS = {
    KafkaError._PARTITION_EOF,
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError.UNSUPPORTED_VERSION,
    KafkaError._UNSUPPORTED_FEATURE,
}


class CappedStderr(logging.Handler):
    """Writes the first `limit` librdkafka log lines to stderr, then only counts them.

    A client stuck on a protocol error logs in a tight loop (hundreds of MB per test
    otherwise), and pytest would print all of it with the failure.
    """

    def __init__(self, limit=100):
        super().__init__()
        self.limit = limit
        self.count = 0

    def emit(self, record):
        self.count += 1
        if self.count <= self.limit:
            sys.stderr.write(f"{record.name}: {record.getMessage()}\n")
        elif self.count == self.limit + 1:
            sys.stderr.write(f"{record.name}: further log lines suppressed\n")


def client_logger(kind):
    """A logger of its own per client (not in the global registry, no propagation)."""
    logger = logging.Logger(f"librdkafka-{kind}", logging.DEBUG)
    logger.addHandler(CappedStderr())
    return logger


def unique(prefix):
    """A topic or group name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def java_partition(key, partitions):
    """The Java client's default partition for a non-null key (murmur2, positive, mod n)."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def wait_until(predicate, timeout, what):
    """Poll `predicate` until truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last value: {last!r})")


def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000},
                       logger=client_logger("admin"))


def create_topic(bootstrap, name, partitions=1, config=None, timeout=20):
    """Create a topic through AdminClient and wait until its metadata shows every partition."""
    client = admin(bootstrap)
    futures = client.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=dict(config or {}))],
        operation_timeout=timeout, request_timeout=timeout,
    )
    futures[name].result(timeout=timeout)
    wait_until(lambda: partition_count(client, name) == partitions, timeout, f"metadata for {name}")
    return name


def partition_count(client, topic):
    """Partitions of `topic` in fresh metadata (0 if absent or in error)."""
    md = client.list_topics(topic=None, timeout=10)
    tm = md.topics.get(topic)
    if tm is None or tm.error is not None:
        return 0
    return len(tm.partitions)


def producer(bootstrap, **extra):
    conf = {
        "bootstrap.servers": bootstrap,
        "partitioner": "murmur2_random",
        "acks": "all",
        "linger.ms": 5,
        "enable.idempotence": False,
    }
    conf.update(extra)
    return Producer(conf, logger=client_logger("producer"))


def consumer(bootstrap, **extra):
    """A consumer used only through assign(): no commits, no subscription."""
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": unique("compat"),
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
    }
    conf.update(extra)
    return Consumer(conf, logger=client_logger("consumer"))


def share_consumer(bootstrap, group, topic, explicit=False):
    """A KIP-932 ShareConsumer of `group` subscribed to `topic` (explicit: records are
    acknowledged one by one, else implicitly on the next poll)."""
    conf = {"bootstrap.servers": bootstrap, "group.id": group}
    if explicit:
        conf["share.acknowledgement.mode"] = "explicit"
    c = ShareConsumer(conf)
    c.subscribe([topic])
    return c


class DeliveryLog:
    """Delivery callbacks collected by the message's id (an int the test chooses)."""

    def __init__(self):
        self.acked = {}  # id -> (partition, offset, timestamp)
        self.failed = {}  # id -> KafkaError

    def callback(self, msg_id):
        def on_delivery(err, msg):
            if err is not None:
                self.failed[msg_id] = err
            else:
                self.acked[msg_id] = (msg.partition(), msg.offset(), msg.timestamp())

        return on_delivery


def produce_all(prod, topic, records, log, flush_timeout=120):
    """Produce (id, key, value, headers, timestamp_ms) tuples, waiting out a full queue."""
    for msg_id, key, value, headers, timestamp in records:
        while True:
            try:
                kwargs = {"key": key, "value": value, "on_delivery": log.callback(msg_id)}
                if headers is not None:
                    kwargs["headers"] = headers
                if timestamp is not None:
                    kwargs["timestamp"] = timestamp
                prod.produce(topic, **kwargs)
                break
            except BufferError:
                prod.poll(0.05)
        prod.poll(0)
    remaining = prod.flush(flush_timeout)
    assert remaining == 0, f"{remaining} messages still undelivered after {flush_timeout} s"


def assign_from(cons, topic, partitions, offset):
    cons.assign([TopicPartition(topic, p, offset) for p in range(partitions)])


def consume_n(cons, count, timeout):
    """Consume until `count` messages arrived or `timeout` passed; returns (messages, errors)."""
    messages, errors = [], []
    deadline = time.monotonic() + timeout
    while len(messages) < count and time.monotonic() < deadline:
        for msg in cons.consume(num_messages=min(10000, count - len(messages)), timeout=0.5):
            err = msg.error()
            if err is None:
                messages.append(msg)
            elif err.fatal() or err.code() not in TRANSIENT_CONSUMER_ERRORS:
                raise KafkaException(err)
            elif err.code() != KafkaError._PARTITION_EOF:
                errors.append(err)
    return messages, errors


def expect_no_more(cons, seconds=1.0):
    """Return any messages that arrive within `seconds` (expected: none)."""
    extra = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for msg in cons.consume(num_messages=100, timeout=0.2):
            if msg.error() is None:
                extra.append(msg)
    return extra


def watermarks(bootstrap, topic, partition, timeout=10):
    """(low, high) offsets of one partition as the broker reports them."""
    cons = consumer(bootstrap)
    try:
        return cons.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout, cached=False)
    finally:
        cons.close()


_PORTS_GIVEN = set()


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port():
    """A free loopback port for a test listener, below the kernel's ephemeral range
    (32768 and up by default), where no outgoing connection of another process can take
    it between this pick and the broker's bind; never the same port twice in one run."""
    high = min(_ephemeral_low(), 32768)
    for _ in range(500):
        port = random.randrange(20000, max(high, 20001))
        if port in _PORTS_GIVEN:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _PORTS_GIVEN.add(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def kafka_python_roundtrip(bootstrap, topic, values, group_id=None, timeout=30, **client):
    """Produces `values` to `topic` with kafka-python (its `client` settings, e.g. SASL),
    then reads the topic from the beginning; returns the values read, in order (stops
    once it has as many, or after 10 s without a record)."""
    prod = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=20000, **client)
    try:
        for value in values:
            prod.send(topic, value)
        prod.flush(timeout=timeout)
    finally:
        prod.close(timeout=10)
    cons = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group_id, auto_offset_reset="earliest",
                         consumer_timeout_ms=10000, **client)
    got = []
    try:
        for message in cons:
            got.append(message.value)
            if len(got) == len(values):
                break
    finally:
        cons.close()
    return got


def set_group_configs(bootstrap, group, configs):
    """IncrementalAlterConfigs SET on the GROUP resource; raises on a refusal."""
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    client = admin(bootstrap)  # kept alive until the answer is in
    futures = client.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)], request_timeout=15)
    for f in futures.values():
        f.result(timeout=20)


def read_partition_zero(bootstrap, topic, settle=3.0, timeout=30, at_least=1):
    """Every record of partition 0 of `topic`: waits for `at_least`, then `settle` more
    seconds so a late duplicate would show."""
    c = consumer(bootstrap)
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        deadline = time.monotonic() + timeout
        while len(got) < at_least:
            assert time.monotonic() < deadline, f"only {len(got)} records on {topic}"
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m)
        quiet = time.monotonic() + settle
        while time.monotonic() < quiet:
            m = c.poll(0.3)
            if m is not None and m.error() is None:
                got.append(m)
    finally:
        c.close()
    return got
