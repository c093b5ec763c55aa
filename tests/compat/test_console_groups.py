"""The members of a group as the admin port shows them (`/v1/groups`, `member_details`) and
the console draws them: a classic group of two confluent-kafka consumers (client id, host,
the partitions the leader assigned each, read from the embedded consumer protocol) and a
KIP-848 group of two (member epochs, current and target assignments), each member's
partitions with their lag. Who holds what is taken from the clients' own callbacks, not
from the broker."""

import json
import urllib.request

from confluent_kafka import TopicPartition

from compat_helpers import create_topic, producer, unique, wait_until
from console_browser import ARTIFACTS, browser_context, watch_errors  # noqa: F401 - a fixture
from consumer_group_members import Ownership, close_all, poll_all, settle

PARTITIONS = 4
RECORDS = 40
WAIT_MS = 20_000
SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.min.heartbeat.interval.ms": "100",
}


def group_view(broker, group):
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.admin_port}/v1/groups", timeout=5) as resp:
        return next((g for g in json.load(resp)["groups"] if g["group"] == group), None)


def held_by_client(view):
    """client id -> the partitions the broker says the member holds."""
    return {m["client_id"]: sorted(p for t in m["assigned"] for p in t["partitions"]) for m in view["member_details"]}


def members_as_clients_see_them(broker, protocol, topic, group):
    own = Ownership()
    consumers = {}
    for name in ("one", "two"):
        extra = {"client.id": f"{group}-{name}"}
        if protocol == "classic":
            extra.update({"group.protocol": "classic", "session.timeout.ms": 10000})
        consumers[name] = own.member(name, broker.bootstrap, group, **extra)
        own.subscribe(name, consumers[name], topic)
    settle(own, consumers, {"one": PARTITIONS // 2, "two": PARTITIONS // 2})
    return own, consumers


def test_classic_and_consumer_protocol_members_with_their_partitions_and_lag(broker_factory, browser_context):
    broker = broker_factory(SETTINGS)
    topic = create_topic(broker.bootstrap, unique("members"), partitions=PARTITIONS)
    prod = producer(broker.bootstrap)
    for i in range(RECORDS):
        prod.produce(topic, value=b"v", partition=i % PARTITIONS)
    assert prod.flush(30) == 0

    for protocol in ("classic", "consumer"):
        group = unique(f"g-{protocol}")
        own, consumers = members_as_clients_see_them(broker, protocol, topic, group)
        try:
            poll_all(consumers, 0.5)
            expected = {f"{group}-{n}": sorted(own.held[n]) for n in consumers}

            def shown():
                view = group_view(broker, group)
                return view if view and len(view["member_details"]) == 2 and held_by_client(view) == expected else None

            view = wait_until(shown, 15, f"the {protocol} members as their clients hold them")
            assert view["group_type"] == protocol and view["members"] == 2
            for m in view["member_details"]:
                assert m["client_host"].endswith("127.0.0.1"), m
                assert [t["topic"] for t in m["assigned"]] == [topic]
                if protocol == "consumer":
                    assert m["member_epoch"] >= 1 and m["target"] == m["assigned"], m
                    assert m["reconciliation"] == "Stable"
                else:
                    assert m["member_epoch"] is None and m["target"] is None, m

            if protocol == "consumer":
                # Each member commits offset 3 of its partitions: 7 unread on each.
                for name, c in consumers.items():
                    c.commit(offsets=[TopicPartition(topic, p, 3) for p in own.held[name]], asynchronous=False)

                def lag_rows():
                    view = group_view(broker, group)
                    return view if view and len(view["partitions"]) == PARTITIONS else None

                view = wait_until(lag_rows, 15, "committed offsets of every partition")
                page = browser_context.new_page()
                errors = watch_errors(page)
                page.goto(f"http://127.0.0.1:{broker.admin_port}/#group/{group}", wait_until="load")
                rows = page.locator("#group-members tbody tr")
                rows.first.wait_for(timeout=WAIT_MS)
                assert rows.count() == 2
                cells = {rows.nth(i).locator("td").nth(1).inner_text(): rows.nth(i).locator("td") for i in range(2)}
                for client_id, held in expected.items():
                    row = cells[client_id]
                    assert row.nth(5).inner_text() == f"{topic}: {', '.join(map(str, held))}"
                    lag = sum(p["lag_messages"] for p in view["partitions"] if p["partition"] in held)
                    assert lag == len(held) * (RECORDS // PARTITIONS - 3), view["partitions"]
                    assert row.nth(8).inner_text() == f"{lag:,}"
                page.screenshot(path=str(ARTIFACTS / "group-members-1280x800.png"), full_page=True)
                # On a narrow screen the members table scrolls in its own box.
                page.set_viewport_size({"width": 390, "height": 844})
                page.wait_for_timeout(300)
                overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
                assert overflow <= 1, f"the page is {overflow} px wider than a 390 px screen"
                page.screenshot(path=str(ARTIFACTS / "group-members-390x844.png"), full_page=True)
                assert errors == [], errors
                page.close()
        finally:
            close_all(consumers)
