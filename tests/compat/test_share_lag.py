"""DescribeShareGroupOffsets v1's lag (KIP-1226) around a real confluent-kafka
ShareConsumer: the records between the start offset and the high watermark that are not
yet delivered for good (neither accepted nor rejected), exactly; v0 answers the same
start offset without it."""

import json
import time

from confluent_kafka import AcknowledgeType

import share_offsets_wire as wire
from compat_helpers import create_topic, share_consumer, unique, wait_until
from test_share_group_offsets import cli, earliest
from test_share_groups import FAST_HEARTBEATS, produce_values, records_of

NONE = 0
VALUES = [f"v{i}".encode() for i in range(10)]
ACCEPTED = {0, 1, 2, 5, 6}
REJECTED = {7}
# The start offset stops at 3 (the first record not done); 5, 6 and 7 above it are
# done; 3, 4, 8 and 9 are not.
START, UNFINISHED = 3, 4


def test_the_v1_lag_counts_exactly_the_records_not_yet_done(broker_factory):
    broker = broker_factory(FAST_HEARTBEATS)
    bootstrap = broker.bootstrap
    topic, group = unique("share-lag"), unique("sg")
    create_topic(bootstrap, topic, partitions=1)
    produce_values(bootstrap, topic, VALUES)
    earliest(bootstrap, group)

    c = share_consumer(bootstrap, group, topic, explicit=True)
    seen, done = set(), set()
    try:
        def take():
            for m in records_of(c.poll(0.5)):
                offset = m.offset()
                seen.add(offset)
                if offset in ACCEPTED:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                    done.add(offset)
                elif offset in REJECTED:
                    c.acknowledge(m, AcknowledgeType.REJECT)
                    done.add(offset)
                else:
                    # Back to available (not done), so the poll can go on.
                    c.acknowledge(m, AcknowledgeType.RELEASE)
            c.commit_sync(10)
            return seen == set(range(len(VALUES))) and done == ACCEPTED | REJECTED

        wait_until(take, 40, "every record seen, and the chosen ones accepted or rejected")
    finally:
        c.close()

    def described(version):
        d = wire.describe(bootstrap, group, {topic: [0]}, version=version)
        assert d["error"] == NONE, d
        return d["topics"][topic][0]

    # The state is written before an acknowledgement is answered; a release at close
    # may trail it, so wait (bounded) for the final answer.
    deadline = time.monotonic() + 20
    while True:
        start, _epoch, error, lag = described(1)
        if (start, lag) == (START, UNFINISHED) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert error == NONE
    assert (start, lag) == (START, UNFINISHED), f"start {start} lag {lag}"

    # The CLI shows the broker's lag, not its upper bound (log end - start = 7).
    shown = json.loads(cli(broker, "share-group", "describe", group, "--output", "json").stdout)
    (row,) = [p for p in shown["partitions"] if p["topic"] == topic]
    assert (row["lag"], row["lag_is_upper_bound"]) == (UNFINISHED, False), shown

    # v0: the same start offset, no lag on the wire.
    start, _epoch, error = described(0)
    assert (start, error) == (START, NONE)

    # A share partition without state: start offset -1 and lag -1 at v1.
    other = unique("share-lag-none")
    create_topic(bootstrap, other, partitions=1)
    d = wire.describe(bootstrap, group, {other: [0]}, version=1)
    assert d["topics"][other][0][0] == -1 and d["topics"][other][0][3] == -1, d
