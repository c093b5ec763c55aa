"""InitProducerId without a transactional id, as Kafka's coordinator answers it: a fresh
producer id at epoch 0 every time, also when the producer names its current id and epoch
(KIP-360's reset after a lost batch). Reusing the id with a bumped epoch would let the
old id's sequence state and its requests still in flight meet the new session."""

from kafka.protocol.producer import InitProducerIdRequest

from tv2_wire import NONE, admin, pinned, retrying


def init(client, producer_id=-1, epoch=-1, version=4):
    response = retrying(client, lambda: pinned(
        InitProducerIdRequest, version, transactional_id=None, transaction_timeout_ms=60000,
        producer_id=producer_id, producer_epoch=epoch), lambda r: r.error_code)
    assert response.error_code == NONE
    return response.producer_id, response.producer_epoch


def test_an_idempotent_producer_gets_a_fresh_id_each_time(shared_broker):
    client = admin(shared_broker.bootstrap)
    try:
        first = init(client)
        assert first[0] >= 0 and first[1] == 0
        again = init(client, *first)
        assert again[1] == 0 and again[0] != first[0], f"{first} -> {again}: the id was reused"
        plain = init(client, version=2)
        assert plain[1] == 0 and plain[0] not in (first[0], again[0])
    finally:
        client.close()
