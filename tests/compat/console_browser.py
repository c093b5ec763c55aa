"""Debian's chromium driven by Playwright for the console tests (tests/compat/test_console.py,
tests/compat/cluster/test_cluster_console.py): a fresh profile per test, the flags that keep
it off the network, and a clean skip with the reason when it cannot run here. Playwright's
own browser downloads are never used (`playwright install` is never run)."""

import json
import os
import shutil
import tempfile
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


def commit(bootstrap, group, topic, offset):
    """Commits `offset` for partition 0 as `group` would, then leaves."""
    cons = consumer(bootstrap, **{"group.id": group, "enable.auto.commit": False})
    try:
        cons.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        cons.close()


def watch_errors(page):
    """The page's console errors and uncaught exceptions, as they come."""
    errors = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda err: errors.append(str(err)))
    return errors


@pytest.fixture
def browser_context():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    profile = tempfile.mkdtemp(prefix="tidelog-chromium-")
    with sync_api.sync_playwright() as playwright:
        try:
            context = playwright.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                viewport={"width": 1280, "height": 800},
            )
        except Exception as err:  # noqa: BLE001 - any launch failure means "cannot run here"
            shutil.rmtree(profile, ignore_errors=True)
            pytest.skip(f"chromium cannot start here: {err}")
        try:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            yield context
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)
