"""Transaction version 2 (KIP-890 part 2) on the wire, as a TV2 client speaks it.

No client library here drives TV2 against tidelog (Java clients only do so when the
`transaction.version` feature is finalized, which tidelog does not do; librdkafka and
kafka-python never do), so the requests are sent one by one with kafka-python's protocol
classes at pinned versions:

- InitProducerId, transactional Produce v12 without AddPartitionsToTxn, TxnOffsetCommit
  v5 without AddOffsetsToTxn, EndTxn v5 commit: a read_committed consumer sees the
  records and the group's committed offset is there;
- EndTxn v5 answers with the epoch bumped, and a produce with the old epoch is refused;
- EndTxn v5 abort hides the records from read_committed;
- EndTxn v4 (TV1) keeps the epoch;
- AddPartitionsToTxn v5 in the brokers' form (verify, then add) and WriteTxnMarkers v2.

librdkafka's TV1 transactions are covered by test_transactions.py.
"""

from confluent_kafka import TopicPartition
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import AddPartitionsToTxnRequest, WriteTxnMarkersRequest

from compat_helpers import consume_n, consumer, create_topic, expect_no_more, unique
from tv2_wire import (
    INVALID_PRODUCER_EPOCH,
    NONE,
    PRODUCER_FENCED,
    TRANSACTION_ABORTABLE,
    admin,
    end_txn,
    init_producer,
    pinned,
    produce,
    retrying,
    send,
    txn_batch,
    txn_offset_commit,
)

def read_committed(bootstrap, topic, expected, idle=2.0):
    cons = consumer(bootstrap, **{"isolation.level": "read_committed"})
    try:
        cons.assign([TopicPartition(topic, 0, 0)])
        messages, _ = consume_n(cons, expected, 20) if expected else ([], [])
        messages += expect_no_more(cons, idle)
        return [m.value() for m in messages]
    finally:
        cons.close()


def committed_offset(bootstrap, group, topic):
    cons = consumer(bootstrap, **{"group.id": group})
    try:
        (tp,) = cons.committed([TopicPartition(topic, 0)], timeout=20)
        return tp.offset
    finally:
        cons.close()


def find_group_coordinator(client, group):
    """FindCoordinator for the group, which creates __consumer_offsets."""
    response = retrying(client, lambda: pinned(FindCoordinatorRequest, 3, key=group,
                                               key_type=0), lambda r: r.error_code)
    assert response.error_code == NONE


def test_a_tv2_transaction_needs_no_add_calls(shared_broker):
    bootstrap = shared_broker.bootstrap
    topic = create_topic(bootstrap, unique("tv2-out"), 1)
    source = create_topic(bootstrap, unique("tv2-in"), 1)
    group, txn_id = unique("tv2-group"), unique("tv2-txn")
    client = admin(bootstrap)
    try:
        producer = init_producer(client, txn_id)
        find_group_coordinator(client, group)
        batch = txn_batch([b"a", b"b"], producer[0], producer[1], 0)
        assert produce(client, txn_id, topic, batch) == NONE
        assert txn_offset_commit(client, txn_id, group, producer, source, 7) == NONE
        ended = end_txn(client, txn_id, producer, commit=True)
        assert ended.error_code == NONE
        assert (ended.producer_id, ended.producer_epoch) == (producer[0], producer[1] + 1)
    finally:
        client.close()
    assert read_committed(bootstrap, topic, 2) == [b"a", b"b"]
    assert committed_offset(bootstrap, group, source) == 7


def test_end_txn_v5_bumps_the_epoch_and_fences_the_old_one(shared_broker):
    bootstrap = shared_broker.bootstrap
    topic = create_topic(bootstrap, unique("tv2-fence"), 1)
    txn_id = unique("tv2-fence")
    client = admin(bootstrap)
    try:
        pid, epoch = init_producer(client, txn_id)
        assert produce(client, txn_id, topic, txn_batch([b"first"], pid, epoch, 0)) == NONE
        ended = end_txn(client, txn_id, (pid, epoch), commit=True)
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (NONE, pid, epoch + 1)
        # A late write of the old epoch is refused, as Kafka refuses it.
        late = produce(client, txn_id, topic, txn_batch([b"late"], pid, epoch, 1))
        assert late in (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED)
        # A retried EndTxn v5 of the old epoch is recognised and told the new epoch.
        retried = end_txn(client, txn_id, (pid, epoch), commit=True)
        assert (retried.error_code, retried.producer_epoch) == (NONE, epoch + 1)
        # The new epoch goes on with the next transaction, sequences from 0.
        assert produce(client, txn_id, topic, txn_batch([b"second"], pid, epoch + 1, 0)) == NONE
        old_end = end_txn(client, txn_id, (pid, epoch), commit=True)
        assert old_end.error_code == PRODUCER_FENCED
        again = end_txn(client, txn_id, (pid, epoch + 1), commit=True)
        assert (again.error_code, again.producer_epoch) == (NONE, epoch + 2)
    finally:
        client.close()
    assert read_committed(bootstrap, topic, 2) == [b"first", b"second"]


def test_end_txn_v5_abort_hides_the_records(shared_broker):
    bootstrap = shared_broker.bootstrap
    topic = create_topic(bootstrap, unique("tv2-abort"), 1)
    txn_id = unique("tv2-abort")
    client = admin(bootstrap)
    try:
        pid, epoch = init_producer(client, txn_id)
        assert produce(client, txn_id, topic, txn_batch([b"x", b"y"], pid, epoch, 0)) == NONE
        ended = end_txn(client, txn_id, (pid, epoch), commit=False)
        assert (ended.error_code, ended.producer_epoch) == (NONE, epoch + 1)
        batch = txn_batch([b"kept"], pid, epoch + 1, 0)
        assert produce(client, txn_id, topic, batch) == NONE
        assert end_txn(client, txn_id, (pid, epoch + 1), commit=True).error_code == NONE
    finally:
        client.close()
    assert read_committed(bootstrap, topic, 1) == [b"kept"]


def test_end_txn_v4_keeps_the_epoch(shared_broker):
    bootstrap = shared_broker.bootstrap
    topic = create_topic(bootstrap, unique("tv1"), 1)
    txn_id = unique("tv1")
    client = admin(bootstrap)
    try:
        pid, epoch = init_producer(client, txn_id)
        add = pinned(AddPartitionsToTxnRequest, 3, v3_and_below_transactional_id=txn_id,
                     v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                     v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                         name=topic, partitions=[0])])
        (added,) = send(client, add).results_by_topic_v3_and_below
        assert added.results_by_partition[0].partition_error_code == NONE
        batch = txn_batch([b"v1"], pid, epoch, 0)
        assert produce(client, txn_id, topic, batch, version=11) == NONE
        assert end_txn(client, txn_id, (pid, epoch), True, version=4).error_code == NONE
        # Still the same epoch: the next transaction carries on with it.
        send(client, add)
        batch = txn_batch([b"v1-again"], pid, epoch, 1)
        assert produce(client, txn_id, topic, batch, version=11) == NONE
        assert end_txn(client, txn_id, (pid, epoch), True, version=4).error_code == NONE
    finally:
        client.close()
    assert read_committed(bootstrap, topic, 2) == [b"v1", b"v1-again"]


def test_add_partitions_to_txn_v5_verifies_and_adds_and_write_txn_markers_v2(shared_broker):
    bootstrap = shared_broker.bootstrap
    topic = create_topic(bootstrap, unique("tv2-broker"), 1)
    txn_id = unique("tv2-broker")
    client = admin(bootstrap)
    try:
        pid, epoch = init_producer(client, txn_id)
        txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction

        def call(verify_only):
            request = pinned(AddPartitionsToTxnRequest, 5, transactions=[txn(
                transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                verify_only=verify_only, topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                    name=topic, partitions=[0])])])
            response = send(client, request)
            assert response.error_code == NONE
            (result,) = response.results_by_transaction
            return result.topic_results[0].results_by_partition[0].partition_error_code

        # Not in the transaction: TRANSACTION_ABORTABLE, as Kafka's coordinator answers.
        assert call(verify_only=True) == TRANSACTION_ABORTABLE
        assert call(verify_only=False) == NONE
        assert call(verify_only=True) == NONE
        assert end_txn(client, txn_id, (pid, epoch), commit=False).error_code == NONE

        marker = WriteTxnMarkersRequest.WritableTxnMarker
        request = pinned(WriteTxnMarkersRequest, 2, markers=[marker(
            producer_id=pid, producer_epoch=epoch + 2, transaction_result=False,
            coordinator_epoch=0, transaction_version=2,
            topics=[marker.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])])])
        response = send(client, request)
        assert response.version == 2
        (result,) = response.markers
        assert result.topics[0].partitions[0].error_code == NONE
    finally:
        client.close()
