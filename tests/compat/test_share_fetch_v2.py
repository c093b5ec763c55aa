"""ShareFetch and ShareAcknowledge v2 (Kafka 4.2) on the wire. KIP-1222's RENEW
acknowledgement: a member keeps a record past its acquisition lock by renewing it,
another member does not get it meanwhile, and version 1 refuses RENEW as Kafka does.
KIP-1206's acquire mode: record_limit acquires no more than MaxRecords.

The group's lock is made short with its own `share.record.lock.duration.ms` (a GROUP
config, IncrementalAlterConfigs); every wait is bounded."""

import time

import pytest

from share_fetch_wire import ACCEPT, INVALID_RECORD_STATE, INVALID_REQUEST, RENEW, Member, share_topic_with_records

LOCK_MS = 6000  # long enough that a loaded CI machine keeps to the timings below


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from broker_process import Broker

    broker = Broker(
        tmp_path_factory.mktemp("broker"),
        {
            # The broker's floor for a group's lock duration, so the group may go short.
            "group.share.min.record.lock.duration.ms": "1000",
            "group.share.heartbeat.interval.ms": "500",
            "group.share.min.heartbeat.interval.ms": "500",
        },
    )
    broker.start()
    yield broker
    broker.cleanup()


def test_a_renewed_record_is_not_redelivered_after_its_first_lock(broker):
    bootstrap = broker.bootstrap
    topic, group = share_topic_with_records(bootstrap, [b"slow-work"], LOCK_MS)
    holder, other = Member(bootstrap, group), Member(bootstrap, group)
    topic_id = holder.join(topic)
    assert other.join(topic) == topic_id

    acquired = holder.acquire(topic_id)
    acquired_at = time.monotonic()
    assert acquired == [(0, 0, 1)]

    # Halfway through the lock: renew it.
    time.sleep(LOCK_MS / 2000)
    error, lock_ms, partition_error = holder.acknowledge(topic_id, [(0, 0, [RENEW])], renew=True)
    assert (error, lock_ms, partition_error) == (0, LOCK_MS, 0)

    # Past the first lock, well within the renewed one: the other member fetches for a
    # second and gets nothing (without the renewal it would get offset 0 at once).
    time.sleep(max(0.0, acquired_at + LOCK_MS / 1000 + 0.3 - time.monotonic()))
    error, _, part = other.fetch(topic_id, max_wait_ms=1000, min_bytes=1)
    assert error == 0
    assert not (part and part["acquired"]), f"the renewed record went to another member: {part}"

    # The holder still holds it, with its first delivery count, and accepts it.
    error, _, partition_error = holder.acknowledge(topic_id, [(0, 0, [ACCEPT])])
    assert (error, partition_error) == (0, 0)
    # Accepted: nobody gets it, not even once the renewed lock would have run out.
    time.sleep(max(0.0, acquired_at + LOCK_MS / 500 + 0.3 - time.monotonic()))
    error, _, part = other.fetch(topic_id, max_wait_ms=500, min_bytes=1)
    assert error == 0
    assert not (part and part["acquired"]), f"an accepted record came back: {part}"


def test_a_renewing_share_fetch_only_acknowledges(broker):
    bootstrap = broker.bootstrap
    topic, group = share_topic_with_records(bootstrap, [b"a", b"b"], LOCK_MS)
    member = Member(bootstrap, group)
    topic_id = member.join(topic)
    assert member.acquire(topic_id) == [(0, 1, 1)]

    # A renewing fetch must not ask for records.
    error, _, _ = member.fetch(topic_id, acks=[(0, 0, [RENEW])], renew=True, max_wait_ms=100)
    assert error == INVALID_REQUEST
    error, lock_ms, part = member.fetch(
        topic_id, acks=[(0, 1, [RENEW])], renew=True, max_bytes=0, max_records=0
    )
    assert (error, lock_ms) == (0, LOCK_MS)
    assert part["ack_error"] == 0 and part["acquired"] == [], part
    error, _, part = member.fetch(topic_id, acks=[(0, 1, [ACCEPT])], max_wait_ms=200)
    assert error == 0 and part["ack_error"] == 0, part


def test_renew_is_refused_before_version_2_and_after_the_lock(broker):
    bootstrap = broker.bootstrap
    topic, group = share_topic_with_records(bootstrap, [b"a"], LOCK_MS)
    member = Member(bootstrap, group)
    topic_id = member.join(topic)
    assert member.acquire(topic_id) == [(0, 0, 1)]
    acquired_at = time.monotonic()

    # Version 1 has no RENEW: an acknowledge type it does not know.
    error, lock_ms, partition_error = member.acknowledge(topic_id, [(0, 0, [RENEW])], version=1)
    assert (error, lock_ms, partition_error) == (0, None, INVALID_REQUEST)
    error, _, part = member.fetch(topic_id, acks=[(0, 0, [RENEW])], version=1, max_wait_ms=0)
    assert error == 0 and part["ack_error"] == INVALID_REQUEST, part
    # Version 2, but only a record the member still holds can be renewed.
    time.sleep(max(0.0, acquired_at + LOCK_MS / 1000 + 0.3 - time.monotonic()))
    error, _, partition_error = member.acknowledge(topic_id, [(0, 0, [RENEW])], renew=True)
    assert (error, partition_error) == (0, INVALID_RECORD_STATE)
    # It came back as an ordinary redelivery.
    assert member.acquire(topic_id) == [(0, 0, 2)]


def test_a_group_may_turn_renewals_off(broker):
    bootstrap = broker.bootstrap
    topic, group = share_topic_with_records(bootstrap, [b"a"], LOCK_MS, renew_enabled=False)
    member = Member(bootstrap, group)
    topic_id = member.join(topic)
    assert member.acquire(topic_id) == [(0, 0, 1)]
    error, _, partition_error = member.acknowledge(topic_id, [(0, 0, [RENEW])], renew=True)
    assert (error, partition_error) == (0, INVALID_RECORD_STATE)
    # The record is still the member's to finish.
    error, _, partition_error = member.acknowledge(topic_id, [(0, 0, [ACCEPT])])
    assert (error, partition_error) == (0, 0)


def test_record_limit_acquires_no_more_than_max_records(broker):
    bootstrap = broker.bootstrap
    topic, group = share_topic_with_records(bootstrap, [b"a", b"b", b"c"], LOCK_MS)
    member = Member(bootstrap, group)
    topic_id = member.join(topic)
    error, _, _ = member.fetch(topic_id, acquire_mode=2, max_wait_ms=0)
    assert error == INVALID_REQUEST, "an acquire mode Kafka 4.2 does not have"
    deadline = time.monotonic() + 15
    while True:
        error, _, part = member.fetch(topic_id, acquire_mode=1, max_records=1, max_wait_ms=1000, min_bytes=1)
        assert error == 0
        if part and part["acquired"]:
            break
        assert time.monotonic() < deadline, "nothing acquired"
    assert part["acquired"] == [(0, 0, 1)], "one record, though its batch holds three"
