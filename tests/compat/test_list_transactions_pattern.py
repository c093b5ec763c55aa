"""ListTransactions v2 (KIP-1152): kafka-python's list_transactions with a
transactional_id_pattern, over transactions confluent-kafka producers ran."""

import pytest
from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError as KafkaPythonError

from compat_helpers import create_topic, unique


def run_transaction(bootstrap, transactional_id, topic):
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(20)
    producer.begin_transaction()
    producer.produce(topic, b"v")
    producer.commit_transaction(20)


def listed_ids(client, **filters):
    by_broker = client.list_transactions(**filters)
    return sorted(t.transactional_id for ts in by_broker.values() for t in ts)


def test_list_transactions_by_pattern(shared_broker):
    topic = create_topic(shared_broker.bootstrap, unique("txn-pattern"), 1)
    prefix = unique("pat")
    ids = [f"{prefix}-app-1", f"{prefix}-app-2", f"{prefix}-billing"]
    for transactional_id in ids:
        run_transaction(shared_broker.bootstrap, transactional_id, topic)
    client = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap)
    try:
        assert set(ids) <= set(listed_ids(client))
        assert listed_ids(client, transactional_id_pattern=f"{prefix}-app-[0-9]+") == ids[:2]
        # The whole id must match, as Java's Matcher.matches().
        assert listed_ids(client, transactional_id_pattern="app-[0-9]+") == []
        assert listed_ids(client, transactional_id_pattern=f"{prefix}-(billing|none)") == [ids[2]]
        with pytest.raises(KafkaPythonError) as excinfo:
            listed_ids(client, transactional_id_pattern=f"{prefix}-(")
        assert getattr(excinfo.value, "errno", None) == 128  # INVALID_REGULAR_EXPRESSION
    finally:
        client.close()
