"""How fast a kill -9 is noticed, and that a pause is not mistaken for one.

Default liveness settings here (9 s broker sessions, 2 s heartbeats, 30 s replica lag),
not the fast test ones: the point is that a dead process is fenced on evidence (its
connections close and nothing listens at its address any more) well before its session
times out, while a paused one (SIGSTOP: sockets open, the kernel still accepts) keeps its
session and its leaderships.

- kill -9 of a partition leader that is not the controller leader, three times: a
  survivor's Metadata names another leader within 3 s, and idempotent acks=all writes
  flow again within 3 s; every acknowledged value is read back at its offset.
- kill -9 of the controller leader's node: a new controller leader (DescribeQuorum) and
  new leaders for what the node led within 3 s.
- SIGSTOP of a partition leader for 4 s: its leadership and the ISR stay as they were.
"""

import os
import statistics
import time

import cluster_wire
from cluster_load import ContinuousProducer, acked_ends, check_acknowledged, read_log
from cluster_meta import create_topic, view, wait_full_isr
from compat_helpers import unique

DEFAULT_LIVENESS = {
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
    "replica.lag.time.max.ms": "30000",
}
PARTITIONS = 3
# More for a measurement: FAILOVER_KILLS=10 FAILOVER_CONTROLLER_KILLS=10 ... -s
KILLS = int(os.environ.get("FAILOVER_KILLS", "3"))
CONTROLLER_KILLS = int(os.environ.get("FAILOVER_CONTROLLER_KILLS", "1"))
BOUND_S = 3.0
REJOIN_TIMEOUT_S = 45.0


def quorum_leader(cluster, exclude=()):
    for node in cluster.serving(exclude):
        leader = cluster_wire.describe_quorum_leader(node.bootstrap, timeout=1.0)
        if leader is not None and leader not in exclude:
            return leader
    return None


def leaders_now(cluster, topic, exclude=()):
    answer = view(cluster, [topic], exclude=exclude)
    if answer is None or topic not in answer.topics:
        return None
    return {p: s for p, s in answer.topics[topic][1].items()}


def summary(took):
    for name, values in (("new controller leader", [c for c, _ in took]),
                         ("partitions moved", [p for _, p in took])):
        values = [v for v in values if v is not None]
        if values:
            print(f"controller leader kill -9 -> {name}: median {statistics.median(values):.2f} s, "
                  f"max {max(values):.2f} s over {len(values)}")


def seconds_until(predicate, limit):
    """Polls `predicate` every 20 ms; the seconds it took, or None after `limit` s."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if predicate():
            return time.monotonic() - start
        time.sleep(0.02)
    return None


def moved_off(cluster, topic, victim, partitions):
    def check():
        states = leaders_now(cluster, topic, exclude=(victim,))
        return states is not None and all(
            states[p].leader >= 0 and states[p].leader != victim for p in partitions)
    return check


def test_kill9_of_a_partition_leader_fails_over_within_bounds(cluster_factory):
    cluster = cluster_factory(settings=DEFAULT_LIVENESS)
    topic = create_topic(cluster, unique("failover-time"), PARTITIONS, 3, {"min.insync.replicas": "2"})
    prod = ContinuousProducer(cluster.bootstrap, topic, "v", rate=200).start()
    took = []
    try:
        prod.wait_acked(200, 30, "acks=all writes before the first kill")
        for kill in range(KILLS):
            wait_full_isr(cluster, topic, PARTITIONS, REJOIN_TIMEOUT_S)
            controller = quorum_leader(cluster)
            states = leaders_now(cluster, topic)
            victim = next((s.leader for s in states.values() if s.leader != controller), None)
            assert victim is not None, f"kill {kill}: every partition is led by the controller leader"
            led = [p for p, s in states.items() if s.leader == victim]
            acked_before = len(prod.acked)
            cluster.node(victim).kill9()
            killed_at = time.monotonic()
            seconds = seconds_until(moved_off(cluster, topic, victim, led), 15)
            assert seconds is not None, f"kill {kill}: node {victim}'s partitions {led} not moved in 15 s"
            took.append(seconds)
            remaining = max(0.1, BOUND_S - (time.monotonic() - killed_at))
            prod.wait_acked(acked_before + 50, remaining,
                            f"kill {kill}: idempotent writes within {BOUND_S} s of killing node {victim}")
            cluster.node(victim).start()
        wait_full_isr(cluster, topic, PARTITIONS, REJOIN_TIMEOUT_S)
    finally:
        prod.stop(flush_timeout=60)
    print(f"partition leader kill -9 -> new leader in Metadata: {[round(s, 2) for s in took]} s, "
          f"median {statistics.median(took):.2f} s, max {max(took):.2f} s")
    prod.check_finished()
    check_acknowledged(prod, read_log(cluster.bootstrap, topic, PARTITIONS, at_least=acked_ends(prod)))
    assert max(took) < BOUND_S, f"failover took {took} s; bound {BOUND_S} s"


def test_kill9_of_the_controller_leader_fails_over_within_bounds(cluster_factory):
    cluster = cluster_factory(settings=DEFAULT_LIVENESS)
    topic = create_topic(cluster, unique("failover-ctl"), PARTITIONS, 3, {"min.insync.replicas": "2"})
    took = []
    for kill in range(CONTROLLER_KILLS):
        wait_full_isr(cluster, topic, PARTITIONS, REJOIN_TIMEOUT_S)
        victim = quorum_leader(cluster)
        assert victim is not None, "no controller leader"
        led = [p for p, s in leaders_now(cluster, topic).items() if s.leader == victim]
        cluster.node(victim).kill9()
        killed_at = time.monotonic()
        controller = seconds_until(lambda: quorum_leader(cluster, exclude=(victim,)) is not None, 15)
        moved = seconds_until(moved_off(cluster, topic, victim, led), 15)
        partitions = None if moved is None else time.monotonic() - killed_at
        took.append((controller, partitions))
        print(f"controller leader kill -9 #{kill}: new controller leader after {controller} s, "
              f"its partitions {led} moved {partitions} s after the kill")
        assert controller is not None and controller < BOUND_S, f"new controller leader after {controller} s"
        assert partitions is not None and partitions < BOUND_S, f"partitions {led} moved {partitions} s after the kill"
        cluster.node(victim).start()
    summary(took)


def test_a_paused_partition_leader_keeps_its_leadership(cluster_factory):
    cluster = cluster_factory(settings=DEFAULT_LIVENESS)
    topic = create_topic(cluster, unique("paused"), PARTITIONS, 3, {"min.insync.replicas": "2"})
    wait_full_isr(cluster, topic, PARTITIONS, REJOIN_TIMEOUT_S)
    controller = quorum_leader(cluster)
    before = leaders_now(cluster, topic)
    victim = next((s.leader for s in before.values() if s.leader != controller), None)
    assert victim is not None, "every partition is led by the controller leader"
    node = cluster.node(victim)
    odd = []
    node.pause()
    try:
        deadline = time.monotonic() + 4.0
        while time.monotonic() < deadline:
            answer = view(cluster, [topic], exclude=(victim,))
            if answer is not None:
                assert victim in answer.brokers, f"paused node {victim} fenced after a pause shorter than its session"
                if answer.topics.get(topic, (None,))[0] != 0:
                    # Pre-existing (main's binary too, about 1 run in 6): a survivor
                    # sometimes answers UNKNOWN_TOPIC_OR_PARTITION for the topic while
                    # another node is paused. Not a leader change; recorded, reported.
                    odd.append(answer.topics)
                    time.sleep(0.1)
                    continue
                now = answer.topics[topic][1]
                for p, s in before.items():
                    assert now[p].leader == s.leader, f"partition {p}: leader {s.leader} -> {now[p].leader} in a pause"
                    assert sorted(now[p].isr) == sorted(s.isr), f"partition {p}: ISR {s.isr} -> {now[p].isr}"
            time.sleep(0.1)
    finally:
        node.resume()
    if odd:
        print(f"survivors answered {len(odd)} Metadata requests with a topic error during the pause: {odd[:2]}")
    time.sleep(1.0)
    after = leaders_now(cluster, topic)
    assert {p: s.leader for p, s in after.items()} == {p: s.leader for p, s in before.items()}
