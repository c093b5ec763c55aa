"""One classic cooperative-sticky group (KIP-429) of librdkafka members
(confluent-kafka, `partition.assignment.strategy=cooperative-sticky`) and tidelog's
native member (the `cooperative_member` example of tidelog-client). Whoever leads, the
other reads its owned partitions and generation from the subscription: the native
member gets a share, nothing is owned twice, and every record is read exactly once.
A group mixing cooperative and eager (`range`) members is refused, as Kafka refuses it.

The example binary is looked up next to TIDELOG_BIN (`release/examples/`), or in
TIDELOG_EXAMPLES; build it with
`cargo build --release -p tidelog-client --example cooperative_member`.
"""

import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from compat_helpers import create_topic, producer, unique, wait_until
from test_groups import group_consumer
from test_native_mixed_group import described


def example_binary(broker):
    folder = os.environ.get("TIDELOG_EXAMPLES") or Path(broker.binary).parent / "examples"
    path = Path(folder) / "cooperative_member"
    if not path.exists():
        pytest.fail(f"{path} not found: cargo build --release -p tidelog-client "
                    "--example cooperative_member", pytrace=False)
    return path


def owned(member):
    return sorted(p for a in member["assignment"] for p in a["partitions"])


@pytest.mark.parametrize("native_leads", [True, False], ids=["native-leads", "librdkafka-leads"])
def test_native_and_librdkafka_cooperative_members_share_a_topic(broker_factory, native_leads):
    broker = broker_factory({"group.initial.rebalance.delay.ms": "0"})
    topic = create_topic(broker.bootstrap, unique("coop"), partitions=6)
    group = unique("coop")
    example = example_binary(broker)
    rd = group_consumer(broker.bootstrap, group,
                        **{"partition.assignment.strategy": "cooperative-sticky"})
    rd_owned = set()
    revoked_by_rd = []

    def on_assign(_consumer, partitions):
        rd_owned.update(tp.partition for tp in partitions)

    def on_revoke(_consumer, partitions):
        revoked_by_rd.append(sorted(tp.partition for tp in partitions))
        rd_owned.difference_update(tp.partition for tp in partitions)

    def start_native():
        return subprocess.Popen(
            [str(example), broker.bootstrap, topic, group, "25"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    native = None
    try:
        if native_leads:
            native = start_native()
            wait_until(lambda: len(described(broker, group).get("members", [])) == 1
                       if _exists(broker, group) else False, 30, "native member joined")
        rd.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        if not native_leads:
            wait_until(lambda: rd.poll(0.1) is None and len(rd_owned) == 6, 30,
                       "librdkafka member owns all")
            native = start_native()

        def split():
            rd.poll(0.1)
            members = described(broker, group)["members"]
            shares = [owned(m) for m in members]
            everything = sorted(p for s in shares for p in s)
            return len(members) == 2 and everything == list(range(6)) and all(
                len(s) == 3 for s in shares) and len(rd_owned) == 3

        wait_until(split, 60, "three partitions each")
        mine = set(rd_owned)  # close() revokes them all later
        if not native_leads:
            # Cooperative: librdkafka gave up only the three that moved, once.
            assert len(revoked_by_rd) == 1 and len(revoked_by_rd[0]) == 3, revoked_by_rd

        prod = producer(broker.bootstrap)
        for i in range(300):
            prod.produce(topic, value=f"r{i}".encode(), partition=i % 6)
        assert prod.flush(60) == 0
        seen = Counter()

        def rd_done():
            for msg in rd.consume(num_messages=500, timeout=0.2):
                if msg.error() is None:
                    seen[(msg.partition(), msg.offset())] += 1
            return len(seen) >= 150

        wait_until(rd_done, 60, "librdkafka member read its partitions")
        out, err = native.communicate(timeout=90)
        assert native.returncode == 0, err
    finally:
        if native is not None and native.poll() is None:
            native.kill()
        rd.close()

    theirs = set(range(6)) - mine
    assert sorted({p for p, _ in seen}) == sorted(mine)
    assert all(n == 1 for n in seen.values())
    printed = Counter()
    for line in out.splitlines():
        if line.startswith("record "):
            _, name, offset = line.split(" ")
            printed[(int(name.rsplit("-", 1)[1]), int(offset))] += 1
    assert sorted(printed) == [(p, o) for p in sorted(theirs) for o in range(50)], out
    assert all(n == 1 for n in printed.values())


def _exists(broker, group):
    out = subprocess.run(
        [str(broker.binary), "group", "describe", group, "--window-ms", "200",
         "--output", "json", "--bootstrap", broker.bootstrap],
        capture_output=True, text=True, timeout=60,
    )
    return out.returncode == 0


def test_cooperative_and_eager_members_in_one_group_are_refused(broker_factory):
    broker = broker_factory({"group.initial.rebalance.delay.ms": "0"})
    topic = create_topic(broker.bootstrap, unique("mixed"), partitions=2)
    group = unique("mixed")
    native = subprocess.Popen(
        [str(example_binary(broker)), broker.bootstrap, topic, group, "15"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    errors = []
    rd = group_consumer(broker.bootstrap, group, **{
        "partition.assignment.strategy": "range",
        "error_cb": lambda e: errors.append(e),
    })
    try:
        wait_until(lambda: _exists(broker, group)
                   and len(described(broker, group)["members"]) == 1, 30, "native member joined")
        rd.subscribe([topic])

        def refused():
            try:
                msg = rd.poll(0.2)
                if msg is not None and msg.error() is not None:
                    errors.append(msg.error())
            except KafkaException as e:
                errors.append(e.args[0])
            return any("INCONSISTENT_GROUP_PROTOCOL" in str(e) or
                       "nconsistent" in str(e) for e in errors)

        wait_until(refused, 30, "the eager member is refused")
        assert len(described(broker, group)["members"]) == 1
    finally:
        rd.close()
        native.kill()
        native.wait(10)
