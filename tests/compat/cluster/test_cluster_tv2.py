"""A TV2 transaction (KIP-890 part 2) on a 3-node cluster, written to partitions led by
every node: the implicit add of Produce v12 reaches the transaction's coordinator from
the nodes that do not coordinate it (AddPartitionsToTxn v5 between brokers), so the
markers of EndTxn v5 reach every partition and read_committed sees every record."""

from confluent_kafka import TopicPartition
from kafka.protocol.metadata import FindCoordinatorRequest

from cluster_meta import create_topic
from compat_helpers import consume_n, consumer, expect_no_more, unique
from tv2_wire import NONE, admin, end_txn, init_producer, pinned, produce, retrying, txn_batch


def test_tv2_commit_across_partitions_led_by_other_nodes(cluster):
    topic = unique("tv2-cluster")
    # Partition p is led by node p + 1: every node leads one.
    create_topic(cluster, topic, assignment=[[1], [2], [3]])
    txn_id = unique("tv2-cluster")
    client = admin(cluster.bootstrap)
    try:
        found = retrying(client, lambda: pinned(FindCoordinatorRequest, 3, key=txn_id,
                                                key_type=1), lambda r: r.error_code)
        assert found.error_code == NONE
        coordinator = found.node_id
        pid, epoch = init_producer(client, txn_id, node=coordinator)
        for p in range(3):
            batch = txn_batch([f"v{p}".encode()], pid, epoch, 0)
            code = produce(client, txn_id, topic, batch, partition=p, node=p + 1)
            assert code == NONE, f"partition {p} (led by node {p + 1}, coordinator {coordinator})"
        ended = end_txn(client, txn_id, (pid, epoch), commit=True, node=coordinator)
        assert (ended.error_code, ended.producer_epoch) == (NONE, epoch + 1)
    finally:
        client.close()
    cons = consumer(cluster.bootstrap, **{"isolation.level": "read_committed"})
    try:
        cons.assign([TopicPartition(topic, p, 0) for p in range(3)])
        messages, _ = consume_n(cons, 3, 30)
        messages += expect_no_more(cons, 1.5)
        assert sorted(m.value() for m in messages) == [b"v0", b"v1", b"v2"]
    finally:
        cons.close()
