"""Per share partition metrics on the admin port's /metrics: records in flight, acquired,
lag, redelivered, archived (dead-lettered has its own test, test_share_dead_letter.py).
A member on the wire (share_fetch_wire.py) moves records through their states; every
wait is bounded."""

import pytest

from compat_helpers import wait_until
from share_fetch_wire import ACCEPT, REJECT, RELEASE, Member, share_topic_with_records

LOCK_MS = 30000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from broker_process import Broker

    broker = Broker(
        tmp_path_factory.mktemp("broker"),
        {"group.share.heartbeat.interval.ms": "500", "group.share.min.heartbeat.interval.ms": "500"},
    )
    broker.start()
    yield broker
    broker.cleanup()


def share_metrics(broker, group):
    """{metric name without the tidelog_share_partition_ prefix: value} of `group`'s one
    share partition."""
    out = {}
    prefix = "tidelog_share_partition_"
    for line in broker.metrics().splitlines():
        if line.startswith(prefix) and f'group="{group}"' in line:
            name = line[len(prefix):].split("{", 1)[0]
            out[name] = float(line.rsplit(" ", 1)[1])
    return out


def test_share_partition_metrics_follow_the_records(broker):
    bootstrap = broker.bootstrap
    topic, group = share_topic_with_records(bootstrap, [b"accept", b"release", b"reject"], LOCK_MS)
    member = Member(bootstrap, group)
    topic_id = member.join(topic)
    assert member.acquire(topic_id) == [(0, 2, 1)]
    wait_until(lambda: share_metrics(broker, group).get("acquired_records") == 3, 10, "3 acquired")
    assert share_metrics(broker, group) == {
        "in_flight_records": 3,
        "acquired_records": 3,
        "lag": 3,
    }, "no redelivery or archive yet: those counters have no series"

    error, _, partition_error = member.acknowledge(topic_id, [(0, 2, [ACCEPT, RELEASE, REJECT])])
    assert (error, partition_error) == (0, 0)
    got = share_metrics(broker, group)
    # Offset 1 is available again; 0 is done (the start moved to 1), 2 was given up on.
    assert got["in_flight_records"] == 1
    assert got["acquired_records"] == 0
    assert got["lag"] == 1, "offsets 1 and 2 lie between the start and the high watermark; 2 is finished"
    assert got["archived_records_total"] == 1

    assert member.acquire(topic_id) == [(1, 1, 2)]
    got = share_metrics(broker, group)
    assert got["redelivered_records_total"] == 1
    assert got["acquired_records"] == 1
    assert topic in broker.metrics(), "the series name the topic"
