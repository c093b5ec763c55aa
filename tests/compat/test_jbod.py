"""Several log directories (Kafka's `log.dirs`, JBOD): each new partition goes to the
directory holding the fewest, DescribeLogDirs answers per directory as Kafka's admin
tools read it, every partition is found again in its own directory after a restart
with its records intact, and a deleted topic's directories are renamed aside where they
were."""

from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from broker_process import BrokerError
from compat_helpers import (
    DeliveryLog, assign_from, consume_n, consumer, create_topic, producer,
    unique, wait_until,
)


def partition_dirs(root, topic):
    """{partition: directory name} of `topic`'s partition directories in `root`."""
    found = {}
    for entry in root.iterdir():
        name = entry.name
        if entry.is_dir() and name.startswith(f"{topic}-") and "." not in name:
            found[int(name.rsplit("-", 1)[1])] = name
    return found


def hosted_partitions(root):
    """Every live partition directory in `root` (not the metadata, not renamed aside)."""
    return [
        e.name for e in root.iterdir()
        if e.is_dir() and "-" in e.name and not e.name.endswith("-delete") and e.name != "__cluster_metadata"
    ]


def described(bootstrap):
    """{absolute log dir: {topic: sorted partitions}} from DescribeLogDirs."""
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        (broker,) = client.describe_log_dirs()
    finally:
        client.close()
    out = {}
    for log_dir in broker["log_dirs"]:
        assert log_dir["error_code"] == 0
        assert log_dir["total_bytes"] > 0
        out[log_dir["log_dir"]] = {
            t["name"]: sorted(p["partition_index"] for p in t["partitions"]) for t in log_dir["topics"]
        }
    return out


def test_partitions_spread_over_log_dirs_and_stay_there_across_a_restart(broker_factory, tmp_path):
    disks = [tmp_path / "disk2", tmp_path / "disk3"]
    broker = broker_factory(start=False)
    all_dirs = [broker.data_dir, *disks]
    broker.settings["log.dirs"] = ",".join(str(d) for d in all_dirs)
    broker.start()

    topic = create_topic(broker.bootstrap, unique("jbod"), partitions=6)
    per_dir = [partition_dirs(d, topic) for d in all_dirs]
    # Six new partitions over three empty directories (the data directory also holds
    # nothing but metadata): two each, every partition exactly once.
    assert sorted(len(p) for p in per_dir) == [2, 2, 2], per_dir
    assert sorted(p for dirs in per_dir for p in dirs) == list(range(6))

    view = described(broker.bootstrap)
    assert sorted(view) == sorted(str(d.resolve()) for d in all_dirs)
    for d, on_disk in zip(all_dirs, per_dir):
        assert view[str(d.resolve())].get(topic, []) == sorted(on_disk), (d, view)

    log = DeliveryLog()
    records = [(i, f"k{i}".encode(), f"v{i}".encode() * 50, None, None) for i in range(600)]
    prod = producer(broker.bootstrap)
    for msg_id, key, value, _, _ in records:
        prod.produce(topic, key=key, value=value, partition=msg_id % 6, on_delivery=log.callback(msg_id))
    assert prod.flush(60) == 0
    assert len(log.acked) == 600 and not log.failed

    broker.stop()
    broker.start()
    assert [partition_dirs(d, topic) for d in all_dirs] == per_dir, "a partition moved or was re-created"
    cons = consumer(broker.bootstrap)
    try:
        assign_from(cons, topic, 6, 0)
        messages, _ = consume_n(cons, 600, 60)
    finally:
        cons.close()
    got = {(m.partition(), m.offset()): (m.key(), m.value()) for m in messages}
    want = {log.acked[i][:2]: (k, v) for i, k, v, _, _ in records}
    assert got == want

    # A second topic keeps the directories even (the consumer's group may have made
    # __consumer_offsets meanwhile: its partitions count too).
    second = create_topic(broker.bootstrap, unique("jbod2"), partitions=3)
    assert sum(len(partition_dirs(d, second)) for d in all_dirs) == 3
    hosted = [len(hosted_partitions(d)) for d in all_dirs]
    assert max(hosted) - min(hosted) <= 1, hosted

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([topic], operation_timeout=20)[topic].result(timeout=30)

    def renamed_aside():
        for d, on_disk in zip(all_dirs, per_dir):
            names = {e.name for e in d.iterdir()}
            if any(name in names for name in on_disk.values()):
                return False
            aside = [n for n in names if n.startswith(f"{topic}-") and n.endswith("-delete")]
            if len(aside) != len(on_disk):
                return False
        return True

    wait_until(renamed_aside, 30, "each deleted partition renamed aside in its own log directory")


def refused_start(broker):
    """Starts `broker` expecting it to exit before it is ready; returns its log."""
    try:
        broker.start()
    except BrokerError:
        return broker.log_path.read_text(errors="replace")
    raise AssertionError("the broker started")


def test_a_log_dir_listed_twice_is_refused_at_start_up(broker_factory, tmp_path):
    broker = broker_factory(start=False)
    broker.settings["log.dirs"] = f"{broker.data_dir},{tmp_path / 'x'},{tmp_path / 'x'}"
    assert f"lists {tmp_path / 'x'} twice" in refused_start(broker)


def test_a_log_dir_of_another_node_is_refused(broker_factory, tmp_path):
    disk = tmp_path / "disk2"
    broker = broker_factory(start=False)
    broker.settings["log.dirs"] = f"{broker.data_dir},{disk}"
    broker.start()
    topic = create_topic(broker.bootstrap, unique("owned"), partitions=2)
    assert len(partition_dirs(disk, topic)) == 1
    broker.stop()
    meta = disk / "meta.properties"
    text = meta.read_text()
    assert "node.id=1" in text and "cluster.id=" in text
    # The disk now claims to be node 7's, as if moved over from another broker.
    meta.write_text(text.replace("node.id=1", "node.id=7"))
    assert "belongs to cluster.id" in refused_start(broker)
    assert partition_dirs(disk, topic), "the other node's partition was left alone"
