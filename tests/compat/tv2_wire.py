"""Transaction version 2 (KIP-890 part 2) requests, one by one at pinned versions with
kafka-python's protocol classes (no client library drives TV2 against tidelog): the
helpers of test_transactions_tv2.py and cluster/test_cluster_tv2.py. `node` is the
broker a request goes to (1 on a single node)."""

import struct
import time

from kafka.admin import KafkaAdminClient
from kafka.protocol.producer import (
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
)

import record_batches

NONE = 0
INVALID_PRODUCER_EPOCH = 47
PRODUCER_FENCED = 90
TRANSACTION_ABORTABLE = 120
# Answers that ask the client to try again while the coordinator gets ready.
RETRIABLE = {14, 15, 16, 51}  # LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT


def admin(bootstrap):
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)


def send(client, request, node=1):
    async def go():
        return await client._manager.send(request, node_id=node)
    return client._manager.run(go)


def pinned(request_class, version, **fields):
    return request_class(min_version=version, max_version=version, **fields)


def retrying(client, make, error_of, timeout=30, node=1):
    """Sends `make()` until its error is not a retriable one; returns the response."""
    deadline = time.monotonic() + timeout
    while True:
        response = send(client, make(), node)
        if error_of(response) not in RETRIABLE or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def init_producer(client, txn_id, node=1):
    response = retrying(client, lambda: pinned(
        InitProducerIdRequest, 4, transactional_id=txn_id, transaction_timeout_ms=60000,
        producer_id=-1, producer_epoch=-1), lambda r: r.error_code, node=node)
    assert response.error_code == NONE
    return response.producer_id, response.producer_epoch


def txn_batch(values, producer_id, epoch, sequence):
    """A transactional batch (attribute bit 4) of `values` for the producer."""
    records = b"".join(record_batches.record(i, v, v) for i, v in enumerate(values))
    ts = int(time.time() * 1000)
    count = len(values)
    after_crc = struct.pack(">hiqqqhii", 0x10, count - 1, ts, ts, producer_id, epoch,
                            sequence, count) + records
    crc = record_batches.crc32c(after_crc)
    return struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc) + after_crc


def produce(client, txn_id, topic, batch, version=12, partition=0, node=1):
    data = ProduceRequest.TopicProduceData
    request = pinned(ProduceRequest, version, transactional_id=txn_id, acks=-1,
                     timeout_ms=10000, topic_data=[data(name=topic, partition_data=[
                         data.PartitionProduceData(index=partition, records=batch)])])
    (topic_response,) = send(client, request, node).responses
    (partition,) = topic_response.partition_responses
    return partition.error_code


def end_txn(client, txn_id, producer, commit, version=5, node=1):
    return retrying(client, lambda: pinned(
        EndTxnRequest, version, transactional_id=txn_id, producer_id=producer[0],
        producer_epoch=producer[1], committed=commit), lambda r: r.error_code, node=node)


def txn_offset_commit(client, txn_id, group, producer, topic, offset):
    topic_cls = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    part = topic_cls.TxnOffsetCommitRequestPartition(
        partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
        committed_metadata=None)

    def make():
        return pinned(TxnOffsetCommitRequest, 5, transactional_id=txn_id, group_id=group,
                      producer_id=producer[0], producer_epoch=producer[1], generation_id=-1,
                      member_id="", group_instance_id=None,
                      topics=[topic_cls(name=topic, partitions=[part])])

    response = retrying(client, make, lambda r: r.topics[0].partitions[0].error_code)
    return response.topics[0].partitions[0].error_code
