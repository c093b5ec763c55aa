"""Real `tidelog serve` processes for the compatibility tests.

Each broker gets its own free loopback ports and temporary data directory; its
stdout/stderr go to a log file whose tail is attached to the report of any test that
fails while the broker is alive in that test. Processes are always cleaned up.
"""

import shutil

import pytest

from broker_process import _LIVE_BROKERS, Broker


def _make_factory(tmp_path_factory, made):
    def make(settings=None, start=True):
        broker = Broker(tmp_path_factory.mktemp("broker"), settings)
        made.append(broker)
        if start:
            broker.start()
        return broker

    return make


@pytest.fixture
def broker_factory(tmp_path_factory):
    """`make(settings={...}, start=True)` -> a new Broker; all are killed at teardown."""
    made = []
    yield _make_factory(tmp_path_factory, made)
    for broker in made:
        broker.cleanup()
        shutil.rmtree(broker.data_dir, ignore_errors=True)


@pytest.fixture
def broker(broker_factory):
    """A fresh single-node broker with default settings."""
    return broker_factory()


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One broker for a whole module whose tests use distinct topics."""
    made = []
    yield _make_factory(tmp_path_factory, made)()
    for broker in made:
        broker.cleanup()
        shutil.rmtree(broker.data_dir, ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for broker in _LIVE_BROKERS:
            state = "alive" if broker.alive() else f"exited {broker.proc.returncode if broker.proc else '-'}"
            report.sections.append((f"tidelog broker {broker.bootstrap} ({state})", broker.log_tail()))
