"""What the cluster says about its partitions, asked of a node that is serving.

A Metadata answer comes from one node's copy of the metadata image; nodes converge
within about a second, so every check here polls until it holds or times out.
"""

import time

from confluent_kafka import ElectionType, KafkaError, TopicPartition
from confluent_kafka.admin import NewTopic

import cluster_wire
from compat_helpers import admin, wait_until

WIRE_ERRORS = (OSError, ValueError, TimeoutError, cluster_wire.kafka_wire.ConnectionClosed)


def view(cluster, topics=None, via=None, exclude=()):
    """Metadata from `via` (a node id) or from the first serving node that answers; None if none does."""
    nodes = [cluster.node(via)] if via is not None else cluster.serving(exclude)
    for node in nodes:
        try:
            return cluster_wire.metadata(node.bootstrap, topics)
        except WIRE_ERRORS:
            continue
    return None


def partition(cluster, topic, index, via=None, exclude=()):
    """The PartitionState of topic/index, or None when no node answers or the topic is unknown."""
    answer = view(cluster, [topic], via, exclude)
    if answer is None or topic not in answer.topics:
        return None
    return answer.topics[topic][1].get(index)


def wait_partition(cluster, topic, index, predicate, timeout, what, via=None, exclude=()):
    def check():
        state = partition(cluster, topic, index, via, exclude)
        return state if state is not None and predicate(state) else None

    return wait_until(check, timeout, f"{topic}-{index}: {what}")


def wait_leader(cluster, topic, index, timeout, exclude=()):
    """A leader outside `exclude` (as a node outside `exclude` reports it); returns its id."""
    state = wait_partition(
        cluster, topic, index, lambda s: s.leader >= 0 and s.leader not in exclude, timeout,
        f"a leader other than {sorted(exclude)}", exclude=exclude,
    )
    return state.leader


def full_isr(state):
    return state.leader >= 0 and sorted(state.isr) == sorted(state.replicas)


def wait_full_isr(cluster, topic, partitions, timeout):
    """Every partition led and with its whole replica set in sync."""
    deadline = time.monotonic() + timeout
    for index in range(partitions):
        wait_partition(cluster, topic, index, full_isr, max(0.5, deadline - time.monotonic()),
                       "every replica in the ISR")


def create_topic(cluster, name, partitions=1, replication_factor=3, config=None, assignment=None, timeout=30):
    """Create through AdminClient (replica lists per partition when `assignment` is given)
    and wait until a serving node shows every partition with a leader."""
    client = admin(cluster.bootstrap)
    if assignment is not None:
        topic = NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment,
                         config=dict(config or {}))
        partitions = len(assignment)
    else:
        topic = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                         config=dict(config or {}))
    futures = client.create_topics([topic], operation_timeout=timeout, request_timeout=timeout)
    futures[name].result(timeout=timeout + 5)
    for index in range(partitions):
        wait_partition(cluster, name, index, lambda s: s.leader >= 0, timeout, "a leader after creation")
    return name


def leaders(cluster, topic, partitions, exclude=()):
    """{partition: leader} as one serving node reports it right now."""
    answer = view(cluster, [topic], exclude=exclude)
    assert answer is not None and topic in answer.topics, f"no metadata for {topic}"
    return {p: s.leader for p, s in answer.topics[topic][1].items() if p < partitions}


def metric_sum(cluster, name):
    """Sum of one metric series (exact name with labels) over every serving node."""
    total = 0.0
    for node in cluster.serving():
        try:
            total += node.metrics().get(name, 0.0)
        except OSError:
            pass
    return total


def elect_preferred(cluster, topic, index, timeout=30):
    """ElectLeaders (preferred) for one partition; ELECTION_NOT_NEEDED counts as done."""
    client = admin(cluster.bootstrap)  # kept alive until the answer: its futures die with it
    # No timeout keywords: confluent-kafka 2.16's elect_leaders rejects them (SystemError);
    # the client's socket.timeout.ms bounds the request.
    future = client.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, index)])
    outcome = future.result(timeout=timeout + 5)
    def code(err):
        return err.code() if isinstance(err, KafkaError) else err.args[0].code()

    errors = {str(tp): err for tp, err in outcome.items()
              if err is not None and code(err) != KafkaError.ELECTION_NOT_NEEDED}
    assert not errors, f"preferred leader election failed: {errors}"


def coordinator_partition(key, partitions=5):
    """The internal-topic partition of a coordinator key (ASCII): Java's String.hashCode
    with its sign bit cleared, as Kafka's Utils.abs does, modulo the partition count (the
    cluster tests run with 5 partitions per internal topic)."""
    h = 0
    for ch in key:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % partitions
