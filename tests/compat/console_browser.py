"""Debian's chromium driven by Playwright for the console tests (tests/compat/test_console.py,
tests/compat/cluster/test_cluster_console.py): a fresh profile per test, the flags that keep
it off the network, and a clean skip with the reason when it cannot run here. Playwright's
own browser downloads are never used (`playwright install` is never run)."""

import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from compat_helpers import consumer

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
ARTIFACTS = Path(os.environ.get("TIDELOG_ARTIFACTS") or Path(__file__).parent / "artifacts") / "console"


def admin_json(host, admin_port, path):
    with urllib.request.urlopen(f"http://{host}:{admin_port}{path}", timeout=5) as resp:
        return json.load(resp)


def post_action(host, admin_port, path, body):
    """A console action as the console sends it: (HTTP status, JSON answer)."""
    request = urllib.request.Request(
        f"http://{host}:{admin_port}{path}", method="POST", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "X-Tidelog-Console": "1"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as refused:
        text = refused.read().decode()
        try:
            return refused.code, json.loads(text)
        except ValueError:
            return refused.code, {"error": text.strip()}


def commit(bootstrap, group, topic, offset, partition=0):
    """Commits `offset` for one partition as `group` would, then leaves."""
    cons = consumer(bootstrap, **{"group.id": group, "enable.auto.commit": False})
    try:
        cons.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    finally:
        cons.close()


def committed(bootstrap, group, topic, partitions):
    """The group's committed offset of each partition (-1001: none)."""
    cons = consumer(bootstrap, **{"group.id": group, "enable.auto.commit": False})
    try:
        found = cons.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
        return {tp.partition: tp.offset for tp in found}
    finally:
        cons.close()


def watch_errors(page):
    """The page's console errors and uncaught exceptions, as they come."""
    errors = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda err: errors.append(str(err)))
    return errors


def _playwright():
    """Playwright's sync API once chromium can run here, else a skip saying why."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    return sync_api


def _launched(start):
    """`start()`'s browser, or a skip when chromium cannot start here."""
    try:
        return start()
    except Exception as err:  # noqa: BLE001 - any launch failure means "cannot run here"
        pytest.skip(f"chromium cannot start here: {err}")


@pytest.fixture
def browser_context():
    profile = tempfile.mkdtemp(prefix="tidelog-chromium-")
    try:
        with _playwright().sync_playwright() as playwright:
            context = _launched(lambda: playwright.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                viewport={"width": 1280, "height": 800},
            ))
            try:
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def chromium():
    """A launched chromium whose contexts a test makes itself (`chromium.new_context(...)`),
    e.g. with the credentials a login prompt would take (`http_credentials`)."""
    with _playwright().sync_playwright() as playwright:
        browser = _launched(lambda: playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS))
        try:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            yield browser
        finally:
            browser.close()
