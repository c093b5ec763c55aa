"""One classic group of a librdkafka member (confluent-kafka) and tidelog's native
member (`tidelog consume --group`, which runs tidelog-client's join/sync steps, its
range assignor and its ConsumerProtocol encodings). Whichever of the two leads, the
other decodes the leader's assignment and the leader decodes the other's subscription:
the four partitions are split two and two, and each record is read by exactly the
member that owns its partition. Every wait is bounded.
"""

import json
import subprocess
from collections import Counter

import pytest

from compat_helpers import create_topic, producer, unique, wait_until
from test_groups import group_consumer


def described(broker, group):
    out = subprocess.run(
        [str(broker.binary), "group", "describe", group, "--window-ms", "200",
         "--output", "json", "--bootstrap", broker.bootstrap],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def member_count(broker, group):
    """Members of `group` as `tidelog group describe` shows them; 0 while the group
    does not exist yet (the native member has not joined)."""
    out = subprocess.run(
        [str(broker.binary), "group", "describe", group, "--window-ms", "200",
         "--output", "json", "--bootstrap", broker.bootstrap],
        capture_output=True, text=True, timeout=60,
    )
    if out.returncode != 0 and "does not exist" in out.stderr:
        return 0
    assert out.returncode == 0, out.stderr
    return len(json.loads(out.stdout)["members"])


def owned(member):
    return sorted(p for a in member["assignment"] for p in a["partitions"])


@pytest.mark.parametrize("native_leads", [True, False], ids=["native-leads", "librdkafka-leads"])
def test_a_native_and_a_librdkafka_member_split_a_topic(broker_factory, native_leads):
    broker = broker_factory({"group.initial.rebalance.delay.ms": "0"})
    topic = create_topic(broker.bootstrap, unique("mixed"), partitions=4)
    group = unique("mixed")
    assigned = []
    rd = group_consumer(broker.bootstrap, group, **{"partition.assignment.strategy": "range"})

    def on_assign(_consumer, partitions):
        assigned[:] = sorted(tp.partition for tp in partitions)

    def start_native():
        return subprocess.Popen(
            [str(broker.binary), "consume", topic, "--group", group, "--from-beginning",
             "--format", "%p %o %v", "--timeout-ms", "20000", "--bootstrap", broker.bootstrap],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    native = None
    try:
        if native_leads:
            native = start_native()
            wait_until(lambda: member_count(broker, group) == 1, 30, "native member joined")
        rd.subscribe([topic], on_assign=on_assign)
        if not native_leads:
            wait_until(lambda: rd.poll(0.1) is None and len(assigned) == 4, 30, "librdkafka member owns all")
            native = start_native()

        def split():
            rd.poll(0.1)
            members = described(broker, group)["members"]
            return (len(members) == 2 and len(assigned) == 2
                    and sorted(p for m in members for p in owned(m)) == [0, 1, 2, 3])

        wait_until(split, 60, "two members with two partitions each")
        members = described(broker, group)["members"]
        theirs = next(owned(m) for m in members if owned(m) != assigned)
        assert sorted(assigned + theirs) == [0, 1, 2, 3]

        prod = producer(broker.bootstrap)
        for i in range(400):
            prod.produce(topic, value=f"r{i}".encode(), partition=i % 4)
        assert prod.flush(60) == 0
        seen = Counter()

        def rd_done():
            for msg in rd.consume(num_messages=500, timeout=0.2):
                if msg.error() is None:
                    seen[(msg.partition(), msg.offset())] += 1
            return len(seen) >= 200

        wait_until(rd_done, 60, "librdkafka member read its partitions")
        out, err = native.communicate(timeout=60)
        assert native.returncode == 0, err
    finally:
        if native is not None and native.poll() is None:
            native.kill()
        rd.close()

    assert sorted({p for p, _ in seen}) == assigned
    assert all(n == 1 for n in seen.values())
    assert sorted(seen) == [(p, o) for p in assigned for o in range(100)]
    printed = Counter()
    for line in out.splitlines():
        p, o, _value = line.split(" ", 2)
        printed[(int(p), int(o))] += 1
    assert sorted(printed) == [(p, o) for p in theirs for o in range(100)], "the native member read its own"
    assert all(n == 1 for n in printed.values())
