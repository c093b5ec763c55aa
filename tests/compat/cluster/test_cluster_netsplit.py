"""A network partition: the leader cut off from the other two nodes.

Each node runs in its own network namespace on a bridge (netns.py); the test stays in
the root namespace and still reaches every node. The cut drops packets silently in both
directions between the leader and its peers.

- The isolated leader acknowledges no acks=all write sent to it after the cut (Produce
  straight to it, no client routing: any success would be a write the majority never got).
- The majority elects a new leader and keeps acknowledging writes.
- After healing, the old leader truncates what it appended alone (counted in its
  log_truncations metric, whenever it did append alone: an acks=1 write to it after the
  cut tells), rejoins the ISR, and — made leader again by a preferred
  election — serves exactly the records the majority acknowledged, none of its own.

A shorter cut with the default liveness settings (9 s sessions) must not look like a
dead node: no FIN arrives and nothing refuses a connection, so the controller leader
elected by the majority, which never heard the cut-off node's heartbeats, still leaves
it unfenced and leading until its session times out.

Needs root and `ip netns`; skipped otherwise.
"""

import time


import cluster_wire
from cluster_load import produce_batch, read_log, values_of
from cluster_meta import WIRE_ERRORS, create_topic, elect_preferred, full_isr, partition, view, wait_partition
from compat_helpers import unique

ISOLATED_WRITE_S = 8.0  # keep writing to the cut-off leader this long (4 session timeouts)
ELECTION_TIMEOUT_S = 20.0
TRUNCATIONS = "tidelog_log_truncations_total"
REQUEST_TIMED_OUT = 7
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20


def batch(tag, n=100):
    return [f"{tag}-{i:04d}".encode() for i in range(n)]


def test_isolated_leader_acknowledges_nothing_and_truncates_after_healing(netns_lab, cluster_factory):
    cluster = cluster_factory(size=3, voters=3, lab=netns_lab)
    # The node cut off leads the partition and, when DescribeQuorum names it, the controller
    # quorum too: the majority must replace both.
    isolated = cluster_wire.describe_quorum_leader(cluster.node(1).bootstrap) or 1
    rest = [n for n in (1, 2, 3) if n != isolated]
    topic = create_topic(cluster, unique("split"), config={"min.insync.replicas": "2"},
                         assignment=[[isolated] + rest])
    wait_partition(cluster, topic, 0, lambda s: s.leader == isolated and full_isr(s), 30,
                   f"leader {isolated}, full ISR")
    old = cluster.node(isolated)
    majority = ",".join(cluster.node(n).bootstrap for n in rest)

    before = batch("before")
    acked, failed = produce_batch(cluster.bootstrap, topic, before)
    assert not failed and len(acked) == len(before), failed
    truncations_before = old.metrics().get(TRUNCATIONS, 0.0)

    netns_lab.isolate(isolated)
    # acks=1 needs no follower: if the cut-off leader still appends, this is answered, and
    # those records are exactly the divergence it must truncate after healing.
    try:
        error, _ = cluster_wire.produce(old.bootstrap, topic, 0, [b"isolated-acks1"], acks=1, timeout_ms=2000)
        appended_alone = error == 0
    except WIRE_ERRORS:
        appended_alone = False
    isolated_acks, outcomes = [], []
    deadline = time.monotonic() + ISOLATED_WRITE_S
    n = 0
    while time.monotonic() < deadline:
        values = [f"isolated-{n:04d}-{i}".encode() for i in range(5)]
        n += 1
        try:
            error, offset = cluster_wire.produce(old.bootstrap, topic, 0, values, acks=-1, timeout_ms=2000)
        except WIRE_ERRORS as err:
            outcomes.append(type(err).__name__)
            continue
        outcomes.append(error)
        if error == 0:
            isolated_acks.append((values, offset))
        # Timed out or short of replicas after the append: written locally, never replicated.
        appended_alone = appended_alone or error in (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        time.sleep(0.05)
    assert not isolated_acks, f"the cut-off leader acknowledged acks=all writes: {isolated_acks[:3]}"
    assert outcomes, "no write reached the isolated leader"

    # Meanwhile the majority has elected one of its own and takes writes.
    wait_partition(cluster, topic, 0, lambda s: s.leader in rest and isolated not in s.isr, ELECTION_TIMEOUT_S,
                   f"nodes {rest} electing a leader among themselves", via=rest[0])
    during = batch("during")
    acked, failed = produce_batch(majority, topic, during)
    assert not failed and len(acked) == len(during), f"the majority refused writes: {list(failed.values())[:3]}"

    netns_lab.heal()
    wait_partition(cluster, topic, 0, full_isr, 45, "the old leader back in the ISR after healing", via=rest[0])
    if appended_alone:
        assert old.metrics().get(TRUNCATIONS, 0.0) > truncations_before, (
            "the old leader did not report truncating the records it appended alone")
    after = batch("after")
    acked, failed = produce_batch(cluster.bootstrap, topic, after)
    assert not failed and len(acked) == len(after), failed

    # Make the old leader lead again and read what it serves.
    elect_preferred(cluster, topic, 0)
    wait_partition(cluster, topic, 0, lambda s: s.leader == isolated, ELECTION_TIMEOUT_S,
                   f"node {isolated} leading again", via=isolated)
    expected = before + during + after
    served = values_of(read_log(old.bootstrap, topic, 1, at_least={0: len(expected)}))
    leaked = [v for v in served if v.startswith(b"isolated-")]
    assert not leaked, f"the old leader serves {len(leaked)} records it appended while cut off, e.g. {leaked[:3]}"
    assert served == expected
    assert partition(cluster, topic, 0, via=isolated).leader == isolated


def test_a_short_cut_does_not_fence_the_controller_leader(netns_lab, cluster_factory):
    cluster = cluster_factory(size=3, voters=3, lab=netns_lab, settings={
        "broker.session.timeout.ms": "9000", "broker.heartbeat.interval.ms": "2000",
        "replica.lag.time.max.ms": "30000"})
    isolated = cluster_wire.describe_quorum_leader(cluster.node(1).bootstrap) or 1
    rest = [n for n in (1, 2, 3) if n != isolated]
    topic = create_topic(cluster, unique("short-cut"), config={"min.insync.replicas": "2"},
                         assignment=[[isolated] + rest])
    wait_partition(cluster, topic, 0, lambda s: s.leader == isolated and full_isr(s), 30,
                   f"leader {isolated}, full ISR")
    netns_lab.isolate(isolated)
    try:
        deadline = time.monotonic() + 4.0
        seen = 0
        while time.monotonic() < deadline:
            answer = view(cluster, [topic], via=rest[0])
            if answer is not None and topic in answer.topics:
                seen += 1
                assert isolated in answer.brokers, f"node {isolated} fenced within 4 s of a silent cut"
                assert answer.topics[topic][1][0].leader == isolated, "leadership moved within 4 s of a silent cut"
            time.sleep(0.2)
        assert seen, "the majority answered no Metadata during the cut"
    finally:
        netns_lab.heal()
