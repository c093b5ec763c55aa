"""DeleteRecords on a replicated partition answers once every in-sync replica has moved
its log start, so the deleted records stay deleted when the leader dies right after the
answer: the new leader starts its log where the old one did."""

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from cluster_meta import create_topic, leaders, wait_full_isr, wait_partition
from compat_helpers import DeliveryLog, admin, consume_n, consumer, produce_all, producer, unique, wait_until


def test_deleted_records_stay_deleted_after_the_leader_dies(cluster):
    topic = create_topic(cluster, unique("delete-records"), 1, 3, {"min.insync.replicas": "2"})
    log = DeliveryLog()
    records = [(i, None, f"v{i}".encode(), None, None) for i in range(50)]
    produce_all(producer(cluster.bootstrap), topic, records, log, flush_timeout=30)
    wait_full_isr(cluster, topic, 1, 30)

    tp = TopicPartition(topic, 0, 20)
    client = admin(cluster.bootstrap)  # kept alive until the answer: its futures die with it
    result = client.delete_records([tp], request_timeout=20)[tp].result(timeout=20)
    assert result.low_watermark == 20

    # At once, before any follower's next fetch could bring it the news.
    old_leader = leaders(cluster, topic, 1)[0]
    cluster.node(old_leader).kill9()
    wait_partition(cluster, topic, 0, lambda s: s.leader >= 0 and s.leader != old_leader, 15,
                   "a new leader", exclude=(old_leader,))

    cons = consumer(cluster.bootstrap)
    try:
        wait_until(lambda: cons.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
                   == (20, 50), 15, "watermarks (20, 50) on the new leader")
        cons.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        messages, _ = consume_n(cons, 30, 30)
    finally:
        cons.close()
    assert [(m.offset(), m.value()) for m in messages] == [(i, f"v{i}".encode()) for i in range(20, 50)]
