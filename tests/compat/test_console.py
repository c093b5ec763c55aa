"""The web console on the admin port (`http://ADMIN/`), driven in Debian's headless
Chromium through Playwright against a real broker with console actions on: a topic is
created through the console (checked first, created on confirmation); a group that stopped reading a topic
with a short retention shows up as the at-risk banner first, and its lag chart, the
chart's table and the per-partition table carry the broker's numbers; the topics view
and the partition's live tail show what was produced. The page logs no
console errors and lays out at 1280x800 and on a narrow screen. Screenshots go to
$TIDELOG_ARTIFACTS (default tests/compat/artifacts/).

Skips with the reason when Playwright is not installed or Chromium cannot start here;
the test command (scripts/test) installs both.
"""

import re

from console_browser import ARTIFACTS, admin_json, browser_context, commit, watch_errors  # noqa: F401 - a fixture
from compat_helpers import DeliveryLog, produce_all, producer, unique, wait_until

RECORDS = 40
RETENTION_MS = 300_000
WAIT_MS = 20_000


def api(broker, path):
    return admin_json("127.0.0.1", broker.admin_port, path)


def test_console_shows_the_group_retention_will_overtake(broker_factory, browser_context):
    broker = broker_factory(settings={
        "admin.console.lag.history.interval.ms": 1000,
        "admin.console.actions.enabled": "true",
    })
    bootstrap = broker.bootstrap
    page = browser_context.new_page()
    errors = watch_errors(page)
    base = f"http://127.0.0.1:{broker.admin_port}/"

    # The topic is created through the console: checked first, created on confirmation.
    topic = unique("console")
    page.goto(base + "#topics", wait_until="load")
    page.locator("#create-name").fill(topic)
    page.locator("#create-partitions").fill("1")
    page.locator("#create-configs").fill(f"retention.ms={RETENTION_MS}")
    page.locator("#create-check").click()
    page.locator("#create-confirm").wait_for(timeout=WAIT_MS)
    plan = page.locator("#create-result").inner_text()
    assert f"Creates {topic}: 1 partition(s), replication factor 1, retention.ms={RETENTION_MS}" in plan, plan
    assert all(t["name"] != topic for t in api(broker, "/v1/topics")["topics"]), "a check must create nothing"
    page.locator("#create-confirm").click()
    wait_until(lambda: "Created topic" in page.locator("#create-result").inner_text(), 20, "the topic created")
    page.locator(f'details[data-topic="{topic}"]').wait_for(timeout=WAIT_MS)
    created = next(t for t in api(broker, "/v1/topics")["topics"] if t["name"] == topic)
    assert created["configs"] == {"retention.ms": str(RETENTION_MS)} and len(created["partitions"]) == 1
    page.screenshot(path=str(ARTIFACTS / "topics-created-1280x800.png"))

    log = DeliveryLog()
    records = [(i, f"k{i}".encode(), f"v{i}".encode(), [("trace", f"t{i}".encode())], None) for i in range(RECORDS)]
    produce_all(producer(bootstrap), topic, records, log)
    assert not log.failed and len(log.acked) == RECORDS
    stopped, current = unique("stopped"), unique("current")
    commit(bootstrap, stopped, topic, 0)  # read nothing, and stopped
    commit(bootstrap, current, topic, RECORDS)  # read everything

    def at_risk():
        summary = {g["group"]: g for g in api(broker, "/v1/lag-history")["groups"]}
        g = summary.get(stopped)
        return g if g and g["at_risk"] and g["samples"] >= 3 and current in summary else None

    risk = wait_until(at_risk, 20, "the stopped group to be at risk in /v1/lag-history")
    assert risk["latest"]["lag_messages"] == RECORDS
    assert 0 < risk["projected_loss_seconds"] <= RETENTION_MS / 1000
    summary = {g["group"]: g for g in api(broker, "/v1/lag-history")["groups"]}
    assert not summary[current]["at_risk"] and summary[current]["latest"]["lag_messages"] == 0

    # The first thing one sees: the banner of the group at risk, and only of that one.
    page.goto(base, wait_until="load")
    banner = page.locator(f'#risks .banner[data-group="{stopped}"]')
    banner.wait_for(timeout=WAIT_MS)
    text = banner.inner_text()
    match = re.fullmatch(
        rf"group {re.escape(stopped)}: retention deletes unread records in (\d+) (s|min) at the current trend",
        text.strip(),
    )
    assert match, text
    shown = int(match.group(1)) * (60 if match.group(2) == "min" else 1)
    expected = api(broker, "/v1/lag-history")
    loss = next(g for g in expected["groups"] if g["group"] == stopped)["projected_loss_seconds"]
    assert abs(shown - loss) <= 60, (text, loss)
    assert page.locator(f'#risks .banner[data-group="{current}"]').count() == 0
    page.locator("#brokers tbody tr").first.wait_for(timeout=WAIT_MS)
    broker_cells = page.locator("#brokers tbody tr").first.locator("td")
    assert broker_cells.first.inner_text() == "1"
    cluster = api(broker, "/v1/cluster")
    assert broker_cells.nth(4).inner_text() == str(cluster["brokers"][0]["partitions_led"])
    assert cluster["brokers"][0]["bytes_in_total"] >= RECORDS * 2  # keys and values at least
    # This node's bytes in as a rate, from two refreshes.
    wait_until(lambda: broker_cells.nth(5).inner_text().endswith("/s"), 10, "a bytes-in rate")
    # A cluster of one: this node is the quorum's only voter, and its leader.
    voters = page.locator("#voters tbody tr")
    voters.first.wait_for(timeout=WAIT_MS)
    assert voters.count() == 1
    assert [voters.first.locator("td").nth(i).inner_text() for i in (0, 2)] == ["1", "leader"]
    page.screenshot(path=str(ARTIFACTS / "cluster-1280x800.png"))

    # The group: chart, its table, and the per-partition lag.
    banner.locator("a").click()
    page.locator("#lag-chart polyline[data-series=lag-seconds]").wait_for(timeout=WAIT_MS)
    assert page.locator("#group-name").inner_text() == stopped
    assert page.locator("#group-risk").inner_text().startswith(f"group {stopped}: retention deletes unread records in")
    assert page.locator("#lag-chart polyline[data-series=retention-edge]").count() == 1
    drawn = int(page.locator("#lag-chart polyline[data-series=lag-seconds]").get_attribute("data-points"))
    rows = page.locator("#lag-table tbody tr")
    assert drawn >= 3 and rows.count() == drawn, (drawn, rows.count())
    newest = rows.first.locator("td")
    assert newest.nth(1).inner_text() == str(RECORDS)
    lag_seconds = float(newest.nth(2).inner_text())
    headroom = float(newest.nth(3).inner_text())
    # The oldest unread record is as old as the test, and retention is 5 minutes.
    assert 0 < lag_seconds < 120 and RETENTION_MS / 1000 - 150 < headroom + lag_seconds <= RETENTION_MS / 1000 + 5
    partition = page.locator("#group-partitions tbody tr").first.locator("td")
    assert partition.nth(0).inner_text() == topic
    assert partition.nth(2).inner_text() == "0"
    assert partition.nth(4).inner_text() == str(RECORDS)
    page.screenshot(path=str(ARTIFACTS / "group-1280x800.png"), full_page=True)

    # Topics: the partition's offsets as the broker has them.
    page.goto(base + "#topics")
    topic_box = page.locator(f'details[data-topic="{topic}"]')
    topic_box.wait_for(timeout=WAIT_MS)
    cells = topic_box.locator("tbody tr").first.locator("td")
    assert cells.nth(5).inner_text() == str(RECORDS) and cells.nth(6).inner_text() == str(RECORDS)
    assert topic_box.locator("text=retention.ms").count() == 1

    # The live tail of the partition: newest first, with key, value and headers.
    topic_box.locator("a", has_text="tail").first.click()
    tail_rows = page.locator("#tail tbody tr")
    tail_rows.first.wait_for(timeout=WAIT_MS)
    assert page.locator("#tail-partition").inner_text() == f"{topic}-0"
    assert tail_rows.count() == RECORDS
    newest = tail_rows.first.locator("td")
    last = RECORDS - 1
    assert [newest.nth(i).inner_text() for i in (0, 2, 3, 4)] == [str(last), f"k{last}", f"v{last}", f"trace=t{last}"]

    # A narrow screen: nothing wider than the screen but the tables' own scroll boxes.
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(base + "#group/" + stopped)
    page.locator("#lag-chart").wait_for(timeout=WAIT_MS)
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"the page is {overflow} px wider than a 390 px screen"
    chart_width = page.evaluate("document.getElementById('lag-chart').getBoundingClientRect().width")
    assert 300 < chart_width <= 390
    page.screenshot(path=str(ARTIFACTS / "group-390x844.png"), full_page=True)

    assert errors == [], errors


def test_the_live_tail_pages_through_a_partition(broker_factory, browser_context):
    """120 records: the newest 50, then Older twice down to the log start, Newer back up,
    Newest following the end again; the same pages from the JSON view."""
    from compat_helpers import create_topic

    broker = broker_factory()
    topic = create_topic(broker.bootstrap, unique("paged"))
    prod = producer(broker.bootstrap)
    for i in range(120):
        prod.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
    assert prod.flush(30) == 0
    records = f"/v1/topics/{topic}/partitions/0/records?limit=50"

    def offsets(query=""):
        page = api(broker, records + query)
        return [r["offset"] for r in page["records"]], page["from_offset"], page["next_offset"]

    assert offsets() == (list(range(70, 120)), 70, 120)
    assert offsets("&before=70") == (list(range(20, 70)), 20, 70)
    assert offsets("&before=20") == (list(range(0, 20)), 0, 20)
    assert offsets("&offset=100") == (list(range(100, 120)), 100, 120)

    page = browser_context.new_page()
    errors = watch_errors(page)
    page.goto(f"http://127.0.0.1:{broker.admin_port}/#tail/{topic}/0", wait_until="load")
    rows = page.locator("#tail tbody tr")

    def shown():
        cells = rows.locator("td:first-child").all_inner_texts()
        return (cells[0], cells[-1], len(cells)) if cells else None

    wait_until(lambda: shown() == ("119", "70", 50), 10, "the newest page")
    assert page.locator("#tail-newer").get_attribute("href") is None, "no newer page than the newest"
    page.locator("#tail-older").click()
    wait_until(lambda: shown() == ("69", "20", 50), 10, "the page before it")
    page.locator("#tail-older").click()
    wait_until(lambda: shown() == ("19", "0", 20), 10, "the first page")
    assert page.locator("#tail-older").get_attribute("href") is None, "nothing before the log start"
    page.screenshot(path=str(ARTIFACTS / "tail-first-page-1280x800.png"), full_page=True)
    page.locator("#tail-newer").click()
    wait_until(lambda: shown() == ("69", "20", 50), 10, "forward again")
    page.locator("#tail-newest").click()
    wait_until(lambda: shown() == ("119", "70", 50), 10, "the newest again")
    assert errors == [], errors
