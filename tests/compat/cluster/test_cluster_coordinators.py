"""Consumer groups and transactions on a 3-node cluster whose coordinator's broker is
killed (-9) mid-test. Coordinators live with the leadership of their internal topic's
partition (__consumer_offsets / __transaction_state, RF 3), so a new one must take over
with the committed state intact.

- A group of two members consumes a topic, committing as it goes; the group
  coordinator's broker dies; every record is still consumed, committed offsets never go
  back, and the group ends with everything committed. Once with the classic protocol,
  once with KIP-848's (`group.protocol=consumer`): the new coordinator must also load
  the consumer group's members and epochs from the log.
- A consume-transform-produce copier (transactions with send_offsets_to_transaction)
  runs while the transaction coordinator's broker dies; the copier is restarted if it
  gives up; read_committed output equals the input exactly once, per partition, in order.
- The group's coordinator moves away (by reassignment and preferred election, no kill)
  from the node that coordinates the transaction and kept its offsets; the commit must
  still make them the group's committed offsets on the new node.
- The group's coordinator, keeping a transaction coordinated elsewhere's offsets, is
  killed before the commit; its successor must find them in the group's log.
"""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

import cluster_wire
from cluster_load import read_log, values_of
from cluster_meta import WIRE_ERRORS, coordinator_partition, create_topic, elect_preferred, partition, wait_partition
from compat_helpers import (
    TRANSIENT_CONSUMER_ERRORS, DeliveryLog, client_logger, produce_all, producer, unique, wait_until,
)

COPIER = Path(__file__).resolve().parent / "txn_copier.py"
PARTITIONS = 4


def fill(cluster, topic, count):
    log = DeliveryLog()
    records = [(i, str(i).encode(), f"r{i:06d}".encode(), None, None) for i in range(count)]
    produce_all(producer(cluster.bootstrap, **{"enable.idempotence": True}), topic, records, log)
    assert not log.failed and len(log.acked) == count
    return log.acked


def coordinator(cluster, key, key_type, exclude=()):
    """The node FindCoordinator names (asked of serving nodes until one answers without error)."""
    def ask():
        for node in cluster.serving(exclude):
            try:
                error, node_id = cluster_wire.find_coordinator(node.bootstrap, key, key_type)
            except WIRE_ERRORS:
                continue
            if error == 0 and node_id not in exclude:
                return node_id
        return None

    what = f"a coordinator for {key!r}" + (f" other than killed node(s) {list(exclude)}" if exclude else "")
    return wait_until(ask, 30, what)


def committed(cluster, group, topic, tolerate_errors=False, partitions=PARTITIONS):
    """{partition: committed offset} from the group coordinator; None on an error when
    `tolerate_errors` (a progress probe while the coordinator moves)."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group}, logger=client_logger("committed"))
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
        return {tp.partition: tp.offset for tp in tps}
    except KafkaException:
        if tolerate_errors:
            return None
        raise
    finally:
        c.close()


# The consumer protocol's timings are the broker's: short ones, within bounds lowered to allow them.
KIP848_SETTINGS = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "100",
}


def group_member(cluster, group, topic, name, protocol="classic"):
    timings = ({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500} if protocol == "classic"
               else {"group.protocol": "consumer"})
    c = Consumer({
        "bootstrap.servers": cluster.bootstrap, "group.id": group, "client.id": name,
        "enable.auto.commit": False, "auto.offset.reset": "earliest", **timings,
    }, logger=client_logger(name))
    c.subscribe([topic])
    return c


def poll_and_commit(member, seen, acknowledged):
    """Consume a batch and commit it synchronously; `acknowledged` keeps, per partition,
    the highest offset whose commit the coordinator answered without error."""
    got = 0
    for msg in member.consume(num_messages=500, timeout=0.1):
        err = msg.error()
        if err is not None:
            if err.fatal() or err.code() not in TRANSIENT_CONSUMER_ERRORS:
                raise KafkaException(err)
            continue
        seen.add((msg.partition(), msg.offset()))
        got += 1
    if got:
        commit_and_note(member, acknowledged)
    return got


def commit_and_note(member, acknowledged):
    try:
        done = member.commit(asynchronous=False)
    except KafkaException:
        return  # coordinator moving or generation changed: committed again with the next batch
    for tp in done or []:
        if tp.error is None and tp.offset >= 0:
            acknowledged[tp.partition] = max(acknowledged.get(tp.partition, -1), tp.offset)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_consumes_everything_with_the_coordinators_broker_killed(cluster_factory, protocol):
    cluster = cluster_factory(settings=KIP848_SETTINGS if protocol == "consumer" else None)
    topic = create_topic(cluster, unique("grp"), PARTITIONS, 3, {"min.insync.replicas": "2"})
    acked = fill(cluster, topic, 20_000)
    expected = {(p, o) for p, o, _ in acked.values()}
    ends = {p: 1 + max(o for q, o in expected if q == p) for p in range(PARTITIONS)}
    group = unique("g")
    seen = set()
    acknowledged = {}
    members = [group_member(cluster, group, topic, f"m{i}", protocol) for i in range(2)]
    killed = None
    try:
        deadline = time.monotonic() + 150
        while seen != expected and time.monotonic() < deadline:
            for m in members:
                poll_and_commit(m, seen, acknowledged)
            if killed is None and len(seen) >= 6_000:
                killed = coordinator(cluster, group, cluster_wire.COORDINATOR_GROUP)
                before = committed(cluster, group, topic)
                acked_before = dict(acknowledged)
                assert acked_before, "no commit acknowledged before the kill"
                cluster.node(killed).kill9()
                moved_to = coordinator(cluster, group, cluster_wire.COORDINATOR_GROUP, exclude=(killed,))
                after = committed(cluster, group, topic)
                lost = {p: (o, after[p]) for p, o in acked_before.items() if after[p] < o}
                assert not lost, (f"acknowledged commits lost when the coordinator moved "
                                  f"(partition: (acknowledged, now)): {lost}")
                regressed = {p: (before[p], after[p]) for p in before if after[p] < before[p]}
                assert not regressed, (f"offsets OffsetFetch had served went back when the coordinator moved "
                                       f"(partition: (served, now)): {regressed}")
        assert killed is not None, "never got far enough to kill the coordinator"
        assert seen == expected, f"{len(expected - seen)} records never consumed after the coordinator died"

        def all_committed():
            for m in members:
                poll_and_commit(m, seen, acknowledged)
                commit_and_note(m, acknowledged)
            return committed(cluster, group, topic, tolerate_errors=True) == ends

        wait_until(all_committed, 60, f"committed offsets reaching the ends {ends}")
    finally:
        for m in members:
            m.close()
    assert moved_to != killed


def with_copier_log(tmp_path, wait, copier):
    """Run `wait`; a failure carries the tail of the copier's output, ending with the
    stacks of its threads (`copier()` is the running copier process)."""
    try:
        wait()
    except AssertionError as err:
        process = copier()
        if process.poll() is None:
            process.send_signal(signal.SIGUSR1)
            time.sleep(1)
        lines = (tmp_path / "copier.log").read_text(errors="replace").splitlines()
        tail = "\n".join(line for line in lines if "GETPID" not in line)[-3000:]
        raise AssertionError(f"{err}\n--- copier.log (tail):\n{tail}") from None


def test_copier_exactly_once_with_the_transaction_coordinators_broker_killed(cluster, tmp_path):
    source = create_topic(cluster, unique("eos-in"), PARTITIONS, 3, {"min.insync.replicas": "2"})
    sink = create_topic(cluster, unique("eos-out"), PARTITIONS, 3, {"min.insync.replicas": "2"})
    total = 6_000
    acked = fill(cluster, source, total)
    assert len(acked) == total
    source_log = read_log(cluster.bootstrap, source, PARTITIONS)
    group, txn_id = unique("copier"), unique("copier-tx")
    ends = {p: len(source_log[p]) for p in range(PARTITIONS)}
    out = open(tmp_path / "copier.log", "ab")
    restarts = []

    def start():
        return subprocess.Popen(
            [sys.executable, str(COPIER), cluster.bootstrap, source, sink, group, txn_id, "100", "50"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    copier = start()
    killed = None
    try:
        def supervise():
            """Restart the copier if it gave up; returns the group's committed offsets (or None)."""
            nonlocal copier
            if copier.poll() is not None:
                restarts.append(copier.returncode)
                assert len(restarts) <= 10, f"the copier keeps failing (exit codes {restarts}); see copier.log"
                copier = start()
            return committed(cluster, group, source, tolerate_errors=True)

        with_copier_log(tmp_path, lambda: wait_until(lambda: (progress := supervise()) and sum(max(o, 0) for o in progress.values()) >= total // 10,
                   60, f"the copier committing {total // 10} of {total} records"), lambda: copier)
        killed = coordinator(cluster, txn_id, cluster_wire.COORDINATOR_TRANSACTION)
        cluster.node(killed).kill9()
        with_copier_log(tmp_path, lambda: wait_until(lambda: supervise() == ends, 120,
                        f"the copier finishing after transaction coordinator {killed} was killed"), lambda: copier)
    finally:
        if copier.poll() is None:
            copier.kill()
            copier.wait(timeout=10)
        out.close()
    moved_to = coordinator(cluster, txn_id, cluster_wire.COORDINATOR_TRANSACTION, exclude=(killed,))
    assert moved_to != killed
    got = read_log(cluster.bootstrap, sink, PARTITIONS, isolation="read_committed")
    for p in range(PARTITIONS):
        assert values_of(got, p) == values_of(source_log, p), (
            f"partition {p}: {len(got[p])} committed records, {len(source_log[p])} in the source")


def expect_committed_output(cluster, sink, values):
    """The sink's partition 0 reads back exactly `values` with read_committed, once the
    transaction's marker reached it (markers are written after EndTxn is answered, and
    a killed leader's partition gets its marker once a new leader is elected)."""
    wait_until(lambda: values_of(read_log(cluster.bootstrap, sink, 1, isolation="read_committed"), 0) == values,
               30, f"{len(values)} committed records in {sink}")


def open_copy_transaction(cluster, group, txn_id, source, sink, name):
    """A consumer in `group` reads the 10 records of `source`; a producer with `txn_id`
    copies them to `sink` and sends the consumer's offset (10) in a transaction left
    open. Returns (consumer, producer, records read); the caller closes the consumer."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"},
                        logger=client_logger(f"{name}-consumer"))
    try:
        prod = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id},
                        logger=client_logger(f"{name}-producer"))
        consumer.subscribe([source])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            got += [m for m in consumer.consume(num_messages=10, timeout=1.0) if m.error() is None]
        assert len(got) == 10, f"consumed {len(got)} of 10 records"
        prod.init_transactions(30)
        prod.begin_transaction()
        for m in got:
            prod.produce(sink, key=m.key(), value=m.value(), partition=0)
        prod.send_offsets_to_transaction([TopicPartition(source, 0, 10)], consumer.consumer_group_metadata(), 30)
    except BaseException:
        consumer.close()
        raise
    return consumer, prod, got


def test_transaction_offsets_follow_the_group_when_its_coordinator_moves(cluster):
    """The group's coordinator moves to another node between send_offsets_to_transaction
    (when one node coordinated both the group and the transaction, so the offsets are
    kept with the transaction) and the commit. The transaction's coordinator must hand
    the offsets to the group's new coordinator before its marker: after the commit the
    group's committed offset is the transaction's."""
    source = create_topic(cluster, unique("hand-in"), 1, 3)
    sink = create_topic(cluster, unique("hand-out"), 1, 3)
    fill(cluster, source, 10)

    def same_coordinator():
        group, txn_id = unique("hand-g"), unique("hand-tx")
        at = coordinator(cluster, group, cluster_wire.COORDINATOR_GROUP)
        return (group, txn_id, at) if coordinator(cluster, txn_id, cluster_wire.COORDINATOR_TRANSACTION) == at else None

    group, txn_id, home = wait_until(same_coordinator, 60, "a group and a transactional id coordinated by one node")
    consumer, prod, got = open_copy_transaction(cluster, group, txn_id, source, sink, "hand")
    try:
        offsets_partition = coordinator_partition(group)
        replicas = partition(cluster, "__consumer_offsets", offsets_partition).replicas
        away = next(r for r in replicas if r != home)
        target = [away] + [r for r in replicas if r != away]
        move = subprocess.run(
            [str(cluster.binary), "partition", "reassign", "--topic", "__consumer_offsets",
             "--partition", str(offsets_partition), "--replicas", ",".join(map(str, target)),
             "--bootstrap", cluster.bootstrap],
            capture_output=True, text=True, timeout=60)
        assert move.returncode == 0, f"tidelog partition reassign failed: {move.stdout}{move.stderr}"
        elect_preferred(cluster, "__consumer_offsets", offsets_partition)
        wait_partition(cluster, "__consumer_offsets", offsets_partition, lambda s: s.leader == away, 30,
                       f"node {away} leading the group's offsets partition")

        def coordinator_views():
            return {n.node_id: (cluster_wire.find_coordinator(n.bootstrap, group, cluster_wire.COORDINATOR_GROUP),
                                partition(cluster, "__consumer_offsets", offsets_partition, via=n.node_id))
                    for n in cluster.serving()}
        try:
            wait_until(lambda: coordinator(cluster, group, cluster_wire.COORDINATOR_GROUP) == away, 15,
                       f"FindCoordinator naming node {away} for the group")
        except AssertionError as err:
            raise AssertionError(f"{err}; target {target}; per node: {coordinator_views()}") from None
        assert coordinator(cluster, txn_id, cluster_wire.COORDINATOR_TRANSACTION) == home

        prod.commit_transaction(30)
        wait_until(lambda: committed(cluster, group, source, tolerate_errors=True, partitions=1) == {0: 10}, 30,
                   f"the transaction's offset committed by the group's new coordinator (node {away})")
    finally:
        consumer.close()
    expect_committed_output(cluster, sink, [m.value() for m in got])


def test_transaction_offsets_kept_by_another_group_coordinator_survive_its_death(cluster):
    """The group and the transaction are coordinated by different nodes, so the group's
    coordinator keeps the transaction's offsets until the transaction's marker. That node
    is killed (-9) between send_offsets_to_transaction and the commit: the group's next
    coordinator must find the undecided offsets in the group's log, and the commit must
    make them the group's committed offset."""
    source = create_topic(cluster, unique("keep-in"), 1, 3)
    sink = create_topic(cluster, unique("keep-out"), 1, 3, {"min.insync.replicas": "2"})
    fill(cluster, source, 10)

    def apart():
        group, txn_id = unique("keep-g"), unique("keep-tx")
        keeper = coordinator(cluster, group, cluster_wire.COORDINATOR_GROUP)
        txn_home = coordinator(cluster, txn_id, cluster_wire.COORDINATOR_TRANSACTION)
        return (group, txn_id, keeper, txn_home) if keeper != txn_home else None

    group, txn_id, keeper, txn_home = wait_until(apart, 60, "a group and a transactional id coordinated apart")
    consumer, prod, got = open_copy_transaction(cluster, group, txn_id, source, sink, "keep")
    try:
        prod.flush(30)

        cluster.node(keeper).kill9()
        successor = coordinator(cluster, group, cluster_wire.COORDINATOR_GROUP, exclude=(keeper,))
        prod.commit_transaction(60)
        wait_until(lambda: committed(cluster, group, source, tolerate_errors=True, partitions=1) == {0: 10}, 60,
                   f"the transaction's offset committed by the group's next coordinator (node {successor}) "
                   f"after node {keeper}, which kept it, was killed")
    finally:
        consumer.close()
    expect_committed_output(cluster, sink, [m.value() for m in got])
