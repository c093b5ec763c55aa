"""The web console on a real three-node cluster, in Debian's headless Chromium: every
node's console shows the three brokers (each one's bytes in and out, as its heartbeats
report them) and the three-voter controller quorum with one leader; it is read-only by default (no form, and a create-topic request is refused); and
the console of the node that coordinates a group that stopped on a topic
with a short retention (replicated three ways) opens with that group's at-risk banner.
With actions on, a topic created through one node's console, and that node's record and
offset actions reaching the other nodes' leaders and coordinators.
Screenshots go to $TIDELOG_ARTIFACTS (default tests/compat/artifacts/)."""

import json
import re
import urllib.error
import urllib.request

import pytest

from cluster_meta import create_topic, wait_full_isr
from compat_helpers import DeliveryLog, produce_all, producer, unique, wait_until, watermarks
from console_browser import ARTIFACTS, admin_json, browser_context, commit, committed, post_action, watch_errors  # noqa: F401 - a fixture

RECORDS = 30
RETENTION_MS = 300_000
WAIT_MS = 20_000


def test_cluster_console_shows_the_quorum_and_the_coordinator_shows_the_group_at_risk(
    cluster_factory, browser_context,
):
    cluster = cluster_factory(settings={"admin.console.lag.history.interval.ms": 1000})
    topic = create_topic(cluster, unique("console"), 1, 3, {"retention.ms": str(RETENTION_MS)})
    log = DeliveryLog()
    produce_all(producer(cluster.bootstrap), topic, [(i, None, b"v", None, None) for i in range(RECORDS)], log)
    assert not log.failed
    wait_full_isr(cluster, topic, 1, 30)
    group = unique("stopped")
    commit(cluster.bootstrap, group, topic, 0)

    def coordinator():
        for node in cluster.nodes.values():
            summary = admin_json(node.host, node.admin_port, "/v1/lag-history")
            if any(g["group"] == group and g["at_risk"] and g["samples"] >= 3 for g in summary["groups"]):
                return node
        return None

    coordinating = wait_until(coordinator, 30, f"a node to find {group} at risk")
    others = [n for n in cluster.nodes.values() if n is not coordinating]

    page = browser_context.new_page()
    errors = watch_errors(page)
    for node in [coordinating, *others]:
        page.goto(f"http://{node.host}:{node.admin_port}/", wait_until="load")
        voters = page.locator("#voters tbody tr")
        wait_until(lambda: voters.count() == 3, 20, f"three voters on node {node.node_id}'s console")
        roles = [voters.nth(i).locator("td").nth(2).inner_text() for i in range(3)]
        assert sorted(roles) == ["follower", "follower", "leader"], roles
        assert page.locator("#brokers tbody tr").count() == 3
        banner = page.locator(f'#risks .banner[data-group="{group}"]')
        # Every broker's bytes, from the heartbeats' figures: as totals on every node
        # (the topic's three replicas took the records in: its leader from the producer,
        # the followers by fetching), and as rates on the console.
        def every_brokers_bytes():
            brokers = admin_json(node.host, node.admin_port, "/v1/cluster")["brokers"]
            return all(b["bytes_in_total"] is not None and b["traffic_sampled_at_ms"] for b in brokers) and brokers

        brokers = wait_until(every_brokers_bytes, 20, f"every broker's bytes on node {node.node_id}")
        assert sum(b["bytes_in_total"] for b in brokers) >= RECORDS, brokers
        if node is coordinating:
            rates = page.locator("#brokers tbody tr td:nth-child(6)")
            wait_until(lambda: all(rates.nth(i).inner_text().endswith("/s") for i in range(3)), 20,
                       "a bytes-in rate for every broker")
            banner.wait_for(timeout=WAIT_MS)
            assert re.fullmatch(
                rf"group {re.escape(group)}: retention deletes unread records in \d+ (s|min) at the current trend",
                banner.inner_text().strip(),
            ), banner.inner_text()
            page.screenshot(path=str(ARTIFACTS / "cluster3-coordinator.png"))
        else:
            # Only the coordinator keeps a group's history.
            assert banner.count() == 0

    # Read-only by default: no form, and the action itself is refused.
    page.goto(f"http://{coordinating.host}:{coordinating.admin_port}/#topics")
    page.locator(f'details[data-topic="{topic}"]').wait_for(timeout=WAIT_MS)
    assert page.locator("#create-name").count() == 0
    assert admin_json(coordinating.host, coordinating.admin_port, "/v1/console")["actions_enabled"] is False
    refused = urllib.request.Request(
        f"http://{coordinating.host}:{coordinating.admin_port}/v1/topics", method="POST",
        data=json.dumps({"name": unique("refused")}).encode(),
        headers={"Content-Type": "application/json", "X-Tidelog-Console": "1"},
    )
    with pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.urlopen(refused, timeout=5)
    assert answer.value.code == 403

    page.goto(f"http://{coordinating.host}:{coordinating.admin_port}/#group/{group}")
    rows = page.locator("#lag-table tbody tr")
    rows.first.wait_for(timeout=WAIT_MS)
    assert rows.first.locator("td").nth(1).inner_text() == str(RECORDS)
    page.screenshot(path=str(ARTIFACTS / "cluster3-group.png"), full_page=True)
    assert errors == [], errors


def test_cluster_console_actions_reach_the_leaders_and_the_coordinator_from_any_node(
    cluster_factory, browser_context,
):
    """With actions on, a topic is created through one node's console (checked, then
    confirmed). Records and offsets belong to partition leaders and a group's coordinator:
    that node's console deletes records on partitions the other nodes lead (answered once
    their followers moved too) and resets groups wherever they are coordinated."""
    cluster = cluster_factory(settings={"admin.console.actions.enabled": "true"})
    acting = cluster.nodes[1]
    topic = unique("acted")
    page = browser_context.new_page()
    errors = watch_errors(page)
    page.goto(f"http://{acting.host}:{acting.admin_port}/#topics", wait_until="load")
    page.locator("#create-name").fill(topic)
    page.locator("#create-partitions").fill("3")
    page.locator("#create-replication").fill("3")
    page.locator("#create-check").click()
    page.locator("#create-confirm").wait_for(timeout=WAIT_MS)
    assert f"Creates {topic}: 3 partition(s), replication factor 3." in page.locator("#create-result").inner_text()
    page.locator("#create-confirm").click()
    wait_until(lambda: "Created topic" in page.locator("#create-result").inner_text(), 20, "the topic created")
    wait_full_isr(cluster, topic, 3, 30)
    shown = next(t for t in admin_json(acting.host, acting.admin_port, "/v1/topics")["topics"] if t["name"] == topic)
    leaders = {p["partition"]: p["leader"] for p in shown["partitions"]}
    assert set(leaders.values()) - {acting.node_id}, f"every partition led by the acting node: {leaders}"
    assert errors == [], errors
    log = DeliveryLog()
    produce_all(producer(cluster.bootstrap), topic,
                [(i, f"k{i}".encode(), b"v", None, None) for i in range(RECORDS)], log)
    assert not log.failed
    wait_full_isr(cluster, topic, 3, 30)
    ends = {p: watermarks(cluster.bootstrap, topic, p)[1] for p in range(3)}
    acting = cluster.nodes[1]
    act = lambda path, body: post_action(acting.host, acting.admin_port, path, body)  # noqa: E731

    status, answer = act(f"/v1/topics/{topic}/delete-records", {"offsets": {"0": 1, "1": 1, "2": -1}})
    assert status == 200, answer
    assert {p["partition"]: p["new_log_start_offset"] for p in answer["partitions"]} == {0: 1, 1: 1, 2: ends[2]}
    for p, low in ((0, 1), (1, 1), (2, ends[2])):
        assert watermarks(cluster.bootstrap, topic, p) == (low, ends[p])

    coordinators = set()
    for n in range(20):  # until a group coordinated on another node was reset too
        group = unique(f"reset{n}")
        status, answer = act(f"/v1/groups/{group}/reset-offsets", {"topic": topic, "to": "earliest"})
        assert status == 200 and answer["state"] == "Dead", answer
        assert committed(cluster.bootstrap, group, topic, [0, 1, 2]) == {0: 1, 1: 1, 2: ends[2]}
        coordinators.add(answer["coordinator"])
        if coordinators - {acting.node_id}:
            break
    assert coordinators - {acting.node_id}, coordinators


def test_the_coordinator_reports_the_lag_of_partitions_other_nodes_lead(cluster_factory):
    """A group's coordinator holds no replica of partitions that other nodes lead alone
    (replication factor 1): their lag comes from those leaders."""
    cluster = cluster_factory(settings={"admin.console.lag.history.interval.ms": 1000})
    ids = sorted(cluster.nodes)
    topic = create_topic(cluster, unique("spread"), assignment=[[i] for i in ids])
    prod = producer(cluster.bootstrap)
    for p in range(len(ids)):
        for _ in range(10):
            prod.produce(topic, b"v", partition=p)
    assert prod.flush(30) == 0
    group = unique("spread-group")
    for p in range(len(ids)):
        commit(cluster.bootstrap, group, topic, 4, partition=p)

    def every_partition_on_the_coordinator():
        for node in cluster.nodes.values():
            for g in admin_json(node.host, node.admin_port, "/v1/groups")["groups"]:
                if g["group"] == group and len(g["partitions"]) == len(ids):
                    return g["partitions"]
        return None

    partitions = wait_until(every_partition_on_the_coordinator, 30,
                            f"the lag of all {len(ids)} partitions of {topic} on {group}'s coordinator")
    for p in partitions:
        assert (p["committed_offset"], p["high_watermark"], p["lag_messages"]) == (4, 10, 6), p
        assert p["time_lag_seconds"] > 0, p
