"""The console's actions on a real broker (`admin.console.actions.enabled=true`), driven
in Debian's headless Chromium: add partitions, alter a topic's configs, delete records and
reset a group's offsets, each checked first (the check changes nothing) and done on
confirmation; every outcome is read back with confluent-kafka, not from the console. At
the HTTP level: a reset of a group with a live member is refused with Kafka's message and
NON_EMPTY_GROUP, and a delete past the high watermark with OFFSET_OUT_OF_RANGE."""

import time

from confluent_kafka.admin import ConfigResource, ResourceType

from compat_helpers import DeliveryLog, admin, consumer, create_topic, partition_count, produce_all, producer, unique, wait_until, watermarks
from console_browser import browser_context, commit, committed, post_action, watch_errors  # noqa: F401 - a fixture

RECORDS = 20
WAIT_MS = 20_000
NON_EMPTY_GROUP = 68
OFFSET_OUT_OF_RANGE = 1


def check_then_confirm(page, form, plan_text):
    """Clicks the form's Check, asserts the plan shown, and confirms."""
    page.locator(f"#{form}-check").click()
    page.locator(f"#{form}-confirm").wait_for(timeout=WAIT_MS)
    shown = page.locator(f"#{form}-result").inner_text()
    assert plan_text in shown, shown
    return shown


def confirm_and_wait(page, form, done_text):
    page.locator(f"#{form}-confirm").click()
    wait_until(lambda: done_text in page.locator(f"#{form}-result").inner_text(), 20, f"{form} done")


def test_console_actions_change_topics_records_and_offsets(broker_factory, browser_context):
    broker = broker_factory(settings={"admin.console.actions.enabled": "true"})
    bootstrap = broker.bootstrap
    topic = create_topic(bootstrap, unique("acted"), partitions=2)
    log = DeliveryLog()
    produce_all(producer(bootstrap), topic,
                [(i, f"k{i}".encode(), f"v{i}".encode(), None, None) for i in range(RECORDS)], log)
    assert not log.failed
    per_partition = {p: sum(1 for (q, _, _) in log.acked.values() if q == p) for p in (0, 1)}
    assert per_partition[0] >= 6, per_partition

    page = browser_context.new_page()
    errors = watch_errors(page)
    base = f"http://127.0.0.1:{broker.admin_port}/"
    page.goto(base + "#topics", wait_until="load")

    # Add partitions: 2 -> 4.
    page.locator("#partitions-topic").select_option(topic)
    page.locator("#partitions-count").fill("4")
    check_then_confirm(page, "partitions", f"{topic} goes from 2 to 4 partitions")
    assert partition_count(admin(bootstrap), topic) == 2, "a check must change nothing"
    confirm_and_wait(page, "partitions", f"{topic} has 4 partitions")
    wait_until(lambda: partition_count(admin(bootstrap), topic) == 4, 10, "4 partitions in metadata")

    # Alter configs: set retention.ms.
    page.locator("#configs-topic").select_option(topic)
    page.locator("#configs-set").fill("retention.ms=123456")
    check_then_confirm(page, "configs", "retention.ms=123456")
    resource = ConfigResource(ResourceType.TOPIC, topic)

    client = admin(bootstrap)

    def retention():
        described = client.describe_configs([resource])[resource].result(timeout=10)
        return described["retention.ms"].value

    assert retention() != "123456", "a check must change nothing"
    confirm_and_wait(page, "configs", f"{topic} now has retention.ms=123456")
    assert retention() == "123456"

    # Delete records: the first 5 of partition 0.
    page.locator("#delete-topic").select_option(topic)
    page.locator("#delete-partition").fill("0")
    page.locator("#delete-before").fill("5")
    check_then_confirm(page, "delete", f"{topic}-0: deletes 5 record(s), log start 0 → 5")
    assert watermarks(bootstrap, topic, 0)[0] == 0, "a check must change nothing"
    confirm_and_wait(page, "delete", f"{topic}-0: deleted 5 record(s)")
    assert watermarks(bootstrap, topic, 0) == (5, per_partition[0])

    # Reset offsets of an inactive group: committed 10 on partition 0 -> earliest (5).
    group = unique("reset")
    commit(bootstrap, group, topic, 10, partition=0)
    page.goto(base + f"#group/{group}")
    page.locator("#reset-topic").wait_for(timeout=WAIT_MS)
    page.locator("#reset-topic").fill(topic)
    page.locator("#reset-to").select_option("earliest")
    page.locator("#reset-partitions").fill("0, 1")
    check_then_confirm(page, "reset", f"Group {group} is Empty")
    rows = page.locator("#reset-plan tbody tr")
    assert [rows.nth(0).locator("td").nth(i).inner_text() for i in range(3)] == ["0", "10", "5"]
    assert [rows.nth(1).locator("td").nth(i).inner_text() for i in range(3)] == ["1", "–", "0"]
    assert committed(bootstrap, group, topic, [0])[0] == 10, "a dry run must commit nothing"
    confirm_and_wait(page, "reset", f"Committed for {group}")
    assert committed(bootstrap, group, topic, [0, 1]) == {0: 5, 1: 0}
    assert errors == [], errors


def test_console_actions_refuse_what_kafka_refuses(broker_factory):
    broker = broker_factory(settings={"admin.console.actions.enabled": "true"})
    bootstrap = broker.bootstrap
    topic = create_topic(bootstrap, unique("refuse"), partitions=1)
    log = DeliveryLog()
    produce_all(producer(bootstrap), topic, [(i, None, b"v", None, None) for i in range(5)], log)
    act = lambda path, body: post_action("127.0.0.1", broker.admin_port, path, body)  # noqa: E731

    status, answer = act(f"/v1/topics/{topic}/delete-records", {"offsets": {"0": 6}})
    assert (status, answer.get("error_code")) == (409, OFFSET_OUT_OF_RANGE), answer
    assert watermarks(bootstrap, topic, 0) == (0, 5)
    status, answer = act("/v1/topics/no-such-topic/configs", {"set": {"retention.ms": "1"}})
    assert status == 404, answer
    status, answer = act(f"/v1/topics/{topic}/configs", {"set": {"retention.ms": "soon"}})
    assert status == 400 and "retention.ms" in answer["error"], answer
    status, answer = act(f"/v1/topics/{topic}/partitions", {"count": 1})
    assert status == 400 and answer["error_code"] == 37, answer  # INVALID_PARTITIONS

    # A group with a live member: Kafka's tool refuses, and so does the console.
    group = unique("live")
    member = consumer(bootstrap, **{"group.id": group})
    try:
        member.subscribe([topic])
        deadline = time.monotonic() + 20
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.2)
        assert member.assignment(), "the member was never assigned"
        status, answer = act(f"/v1/groups/{group}/reset-offsets", {"topic": topic, "to": "latest"})
        assert (status, answer.get("error_code")) == (409, NON_EMPTY_GROUP), answer
        assert answer["error"] == (
            f"Assignments can only be reset if the group '{group}' is inactive, but the current state is Stable.")
    finally:
        member.close()
    status, answer = act(f"/v1/groups/{group}/reset-offsets", {"topic": topic, "to": "shift-by", "value": -2})
    assert status == 400 and "no committed offset" in answer["error"], answer
    status, answer = act(f"/v1/groups/{group}/reset-offsets", {"topic": topic, "to": "offset", "value": 99})
    assert status == 200 and answer["partitions"][0]["new_offset"] == 5, answer  # kept within the log
    status, answer = act(f"/v1/groups/{group}/reset-offsets", {"topic": topic, "to": "shift-by", "value": -2})
    assert status == 200 and answer["partitions"][0]["new_offset"] == 3, answer
    assert committed(bootstrap, group, topic, [0])[0] == 3
