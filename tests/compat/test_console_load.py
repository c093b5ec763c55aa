"""The console on a node with 1,000 partitions (10 topics of 100, each partition holding a
record, plus `__consumer_offsets`), in Debian's headless Chromium: the topics view draws a
row for every partition and the cluster view its counts. The load times (navigation to
every row drawn, median of 3) are written to $TIDELOG_ARTIFACTS/console/load-1000.json;
docs/performance.md reports them. Nothing here asserts a time: the machines are shared."""

import json
import statistics
import time

from compat_helpers import DeliveryLog, admin, produce_all, producer, unique, wait_until
from confluent_kafka.admin import NewTopic
from console_browser import ARTIFACTS, admin_json, browser_context, watch_errors  # noqa: F401 - a fixture

TOPICS = 10
PARTITIONS = 100
LOADS = 3


def test_console_draws_a_thousand_partitions(broker_factory, browser_context):
    broker = broker_factory()
    client = admin(broker.bootstrap)
    names = [unique(f"load{i}") for i in range(TOPICS)]
    futures = client.create_topics([NewTopic(n, num_partitions=PARTITIONS, replication_factor=1) for n in names],
                                   operation_timeout=60, request_timeout=60)
    for f in futures.values():
        f.result(timeout=90)
    log = DeliveryLog()
    records = [(i, None, b"v", None, None) for i in range(TOPICS * PARTITIONS)]
    prod = producer(broker.bootstrap)
    for n, name in enumerate(names):
        for p in range(PARTITIONS):
            prod.produce(name, value=b"v", partition=p, on_delivery=log.callback(n * PARTITIONS + p))
    produce_all(prod, names[0], [], log)  # flushes what is queued
    assert not log.failed and len(log.acked) == len(records)

    page = browser_context.new_page()
    errors = watch_errors(page)
    base = f"http://127.0.0.1:{broker.admin_port}/"
    rows = page.locator("#view details.topic tbody tr")
    timings = []
    for _ in range(LOADS):
        page.goto("about:blank")
        started = time.monotonic()
        page.goto(base + "#topics", wait_until="commit")
        wait_until(lambda: rows.count() >= TOPICS * PARTITIONS, 30, "every partition drawn")
        timings.append(time.monotonic() - started)
    assert rows.count() == TOPICS * PARTITIONS
    ours = [t for t in admin_json("127.0.0.1", broker.admin_port, "/v1/topics")["topics"] if t["name"] in names]
    assert sum(len(t["partitions"]) for t in ours) == TOPICS * PARTITIONS
    assert all(p["high_watermark"] == 1 for t in ours for p in t["partitions"])
    view_bytes = len(json.dumps(admin_json("127.0.0.1", broker.admin_port, "/v1/topics")))
    fetch_started = time.monotonic()
    admin_json("127.0.0.1", broker.admin_port, "/v1/topics")
    fetch_seconds = time.monotonic() - fetch_started
    page.goto(base + "#cluster")
    page.locator("#brokers tbody tr").first.wait_for(timeout=20_000)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    report = {"partitions": TOPICS * PARTITIONS, "load_seconds": timings, "median_seconds": statistics.median(timings),
              "topics_view_bytes": view_bytes, "topics_view_fetch_seconds": fetch_seconds}
    (ARTIFACTS / "load-1000.json").write_text(json.dumps(report, indent=2))
    print(f"console load with {TOPICS * PARTITIONS} partitions: {report}")
    assert errors == [], errors
