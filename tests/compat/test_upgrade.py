"""Upgrading a single node's data directory written by the previous release.

`tests/fixtures/legacy-single-node-5966dcc.tar.gz` is the data directory a single node
of commit 5966dcc (the last release with a local metadata log instead of the one-voter
Raft controller) left after `tests/fixtures/make_legacy_single_node.py` ran against it
and it was stopped cleanly. The current binary must start on it with every topic,
record, committed offset, transaction state and config intact, say in its log that it
migrated the metadata, and start normally on it again afterwards.
"""

import tarfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import ConfigResource

from compat_helpers import admin, consume_n, consumer, expect_no_more, watermarks
from test_transactions import txn_producer

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "legacy-single-node-5966dcc.tar.gz"
ORDERS_ID = "607b8951-279c-4382-9cb2-93a115a1ae17"
API_DESCRIBE_TRANSACTIONS = 65


def upgraded_broker(broker_factory):
    broker = broker_factory(start=False)
    broker.data_dir.mkdir(parents=True)
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(broker.data_dir, filter="data")
    return broker.start()


def committed(bootstrap, group, partitions):
    """The group's committed offsets, asking again while its coordinator loads."""
    client = admin(bootstrap)
    request = ConsumerGroupTopicPartitions(group, [TopicPartition("orders", p) for p in partitions])
    deadline = time.monotonic() + 20
    while True:
        try:
            result = client.list_consumer_group_offsets([request])[group].result(20)
            return {tp.partition: tp.offset for tp in result.topic_partitions}
        except KafkaException as err:
            loading = err.args[0].code() in (
                KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                KafkaError.COORDINATOR_NOT_AVAILABLE,
                KafkaError.NOT_COORDINATOR,
            )
            if not (loading or err.args[0].retriable()) or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def describe_transaction(bootstrap, txn_id):
    from kafka_wire import Connection, compact_array, compact_string

    with Connection.to(bootstrap) as conn:
        r = conn.flexible_call(API_DESCRIBE_TRANSACTIONS, 0, compact_array([compact_string(txn_id)]))
        r.i32()

        def described(r):
            error, _tid, state, _timeout, _start = r.i16(), r.compact_string(), r.compact_string(), r.i32(), r.i64()
            pid, epoch = r.i64(), r.i16()
            r.compact_array(lambda: (r.compact_string(), r.compact_array(r.i32), r.skip_tags()))
            r.skip_tags()
            return error, state, pid, epoch

        [found] = r.compact_array(lambda: described(r))
        return found


def test_a_previous_release_single_node_directory_starts_with_everything(broker_factory):
    broker = upgraded_broker(broker_factory)
    assert "migrated this single node's metadata" in broker.log_path.read_text()
    bootstrap = broker.bootstrap

    client = admin(bootstrap)
    topics = client.list_topics(timeout=20).topics
    assert {"orders", "compacted"} <= set(topics)
    assert len(topics["orders"].partitions) == 3
    [described] = client.describe_topics(TopicCollection(["orders"])).values()
    topic_id = described.result(20).topic_id
    bits = (topic_id.get_most_significant_bits() << 64) | (topic_id.get_least_significant_bits() & (2**64 - 1))
    assert uuid.UUID(int=bits % 2**128) == uuid.UUID(ORDERS_ID)

    configs = client.describe_configs([ConfigResource("topic", "orders"), ConfigResource("topic", "compacted")])
    orders, compacted = (f.result(20) for f in configs.values())
    assert orders["retention.ms"].value == "86400000"
    assert orders["segment.ms"].value == "3600000"
    assert compacted["cleanup.policy"].value == "compact"

    for partition, end in [(0, 10), (1, 10), (2, 15)]:
        assert watermarks(bootstrap, "orders", partition) == (0, end)

    # Records byte for byte, repeated header keys included.
    cons = consumer(bootstrap)
    cons.assign([TopicPartition("orders", 0, 0)])
    messages, _ = consume_n(cons, 10, 30)
    assert [(m.key(), m.value()) for m in messages] == [
        (f"k{i}".encode(), f"order-{i}".encode()) for i in range(0, 30, 3)
    ]
    assert all(m.headers() == [("h", b"1"), ("h", b"2")] for m in messages)
    cons.close()

    # The committed transaction is there, its aborted successor is not.
    cons = consumer(bootstrap, **{"isolation.level": "read_committed"})
    cons.assign([TopicPartition("orders", 2, 0)])
    messages, _ = consume_n(cons, 14, 30)
    messages += expect_no_more(cons, 1.0)
    values = [m.value() for m in messages]
    assert values[-4:] == [f"txn-{i}".encode() for i in range(4)]
    assert b"aborted" not in values
    cons.close()

    assert committed(bootstrap, "g1", [0, 1]) == {0: 7, 1: 3}
    assert committed(bootstrap, "g2", [2]) == {2: 5}

    # The transactional id carries on with its producer id, one epoch up. (Its last
    # transaction, aborted before anything was sent, never reached the coordinator.)
    error, state, pid, epoch = describe_transaction(bootstrap, "txn-1")
    assert (error, state) == (0, "CompleteCommit")
    assert pid >= 0
    prod = txn_producer(bootstrap, "txn-1")
    prod.init_transactions(30)
    prod.begin_transaction()
    prod.produce("orders", value=b"after-upgrade", partition=0)
    prod.commit_transaction(30)
    error, state, pid_after, epoch_after = describe_transaction(bootstrap, "txn-1")
    assert (error, state, pid_after) == (0, "CompleteCommit", pid)
    assert epoch_after > epoch

    # A group carries on from its committed offsets.
    group = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "g1",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    group.assign([TopicPartition("orders", 0)])
    [first], _ = consume_n(group, 1, 30)
    assert first.offset() == 7
    group.close()

    # Starting again is an ordinary start: nothing is migrated twice, nothing is lost.
    broker.restart()
    assert broker.log_path.read_text().count("migrated this single node's metadata") == 1
    assert watermarks(bootstrap, "orders", 0) == (0, 12)  # the record and its marker
    assert committed(bootstrap, "g1", [0, 1]) == {0: 7, 1: 3}
    assert (broker.data_dir / "__cluster_metadata" / "legacy-metadata-log").is_dir()


def test_an_upgraded_single_node_refuses_to_join_a_cluster(broker_factory):
    broker = broker_factory(start=False)
    broker.data_dir.mkdir(parents=True)
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(broker.data_dir, filter="data")
    import subprocess

    quorum = "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3"
    run = subprocess.run(
        broker.command() + ["--quorum", quorum], capture_output=True, text=True, timeout=60,
    )
    assert run.returncode != 0
    assert "2 topics: compacted, orders" in run.stderr, run.stderr
    assert "without --quorum" in run.stderr, run.stderr
    # Refused, not changed: it still migrates as a single node.
    broker.start()
    assert "migrated this single node's metadata" in broker.log_path.read_text()
    topics = admin(broker.bootstrap).list_topics(timeout=20).topics
    assert {"orders", "compacted"} <= set(topics)
