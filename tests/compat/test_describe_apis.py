"""APIs Kafka 3.x/4.x tools call that tidelog answers since Kafka 4.2 parity: DescribeLogDirs,
DescribeTopicPartitions (cursor paging), ListConfigResources, through kafka-python's
admin client, which sends them as Kafka's own admin tools do."""

from kafka.admin import KafkaAdminClient

from compat_helpers import create_topic, produce_all, producer, DeliveryLog, unique


def kafka_admin(bootstrap):
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)


def test_describe_log_dirs_reports_partition_sizes_and_space(shared_broker):
    name = create_topic(shared_broker.bootstrap, unique("logdirs"), 2)
    log = DeliveryLog()
    records = [(i, f"k{i}".encode(), b"x" * 1000, None, None) for i in range(20)]
    produce_all(producer(shared_broker.bootstrap), name, records, log)
    assert len(log.acked) == 20 and not log.failed
    client = kafka_admin(shared_broker.bootstrap)
    try:
        (broker,) = client.describe_log_dirs()
        (log_dir,) = broker["log_dirs"]
        assert log_dir["error_code"] == 0
        assert log_dir["log_dir"] == str(shared_broker.data_dir.resolve())
        assert log_dir["total_bytes"] > 0 and 0 <= log_dir["usable_bytes"] <= log_dir["total_bytes"]
        topics = {t["name"]: t for t in log_dir["topics"]}
        sizes = {p["partition_index"]: p["partition_size"] for p in topics[name]["partitions"]}
        assert sorted(sizes) == [0, 1]
        assert sum(sizes.values()) >= 20 * 1000
        assert all(p["offset_lag"] == 0 and not p["is_future_key"] for p in topics[name]["partitions"])

        (only,) = client.describe_log_dirs(topic_partitions={name: [1]})
        (one_dir,) = only["log_dirs"]
        assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in one_dir["topics"]] == [(name, [1])]
    finally:
        client.close()


def test_describe_topic_partitions_pages_with_a_cursor(shared_broker):
    prefix = unique("paged")
    first = create_topic(shared_broker.bootstrap, f"{prefix}-a", 3)
    second = create_topic(shared_broker.bootstrap, f"{prefix}-b", 2)
    client = kafka_admin(shared_broker.bootstrap)
    try:
        seen = []
        cursor = None
        pages = 0
        while True:
            page = client.describe_topic_partitions(
                [first, second, f"{prefix}-missing"], response_partition_limit=2, cursor=cursor)
            pages += 1
            for topic in page["topics"]:
                if topic["name"] == f"{prefix}-missing":
                    assert topic["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
                    continue
                assert topic["error_code"] == 0
                assert topic["topic_authorized_operations"] == 3576  # every topic operation
                seen += [(topic["name"], p["partition_index"]) for p in topic["partitions"]]
                assert all(p["leader_id"] == 1 and p["replica_nodes"] == [1] for p in topic["partitions"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
            assert pages < 10
        assert seen == [(first, 0), (first, 1), (first, 2), (second, 0), (second, 1)]
        assert pages == 3
    finally:
        client.close()


def test_list_config_resources(shared_broker):
    name = create_topic(shared_broker.bootstrap, unique("configs"), 1)
    client = kafka_admin(shared_broker.bootstrap)
    try:
        everything = client.list_config_resources()
        assert name in everything["topic"]
        assert everything["broker"] == ["1"]
        only_brokers = client.list_config_resources(["BROKER"])
        assert only_brokers == {"broker": ["1"]}
    finally:
        client.close()
