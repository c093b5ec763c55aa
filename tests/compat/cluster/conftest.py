"""Fixtures for the cluster tests: clusters of real `tidelog serve` processes, and a
network-namespace lab for the partition test. Everything started is killed at teardown,
failed or not; a failed test's report carries the tail of every node's log (the full
logs stay in the test's tmp dir: `node<N>/node.log`).

Run only these: `.venv/bin/python -m pytest tests/compat/cluster -q`
(TIDELOG_BIN picks the binary; default target/release/tidelog).
"""

import pytest

from cluster_nodes import LIVE_CLUSTERS, Cluster
from netns import NetnsLab, unavailable_reason


@pytest.fixture
def cluster_factory(tmp_path):
    """`make(size=3, voters=3, settings={...}, start=True, lab=None)` -> a Cluster.

    Nodes 1..voters are controller voters and brokers; the rest are brokers only."""
    made = []

    def make(size=3, voters=3, settings=None, start=True, lab=None):
        cluster = Cluster(tmp_path / f"cluster{len(made) + 1}", size, voters, settings, lab)
        made.append(cluster)
        if start:
            cluster.start()
        return cluster

    yield make
    for cluster in made:
        cluster.cleanup()


@pytest.fixture
def cluster(cluster_factory):
    """Three nodes, each broker and controller voter, with the test settings."""
    return cluster_factory()


@pytest.fixture
def netns_lab():
    """Three network namespaces on a bridge (see netns.py); skipped where `ip netns` cannot work."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"network namespaces unavailable: {reason}")
    lab = NetnsLab(3)
    try:
        yield lab.setup()
    finally:
        lab.teardown()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for cluster in LIVE_CLUSTERS:
            report.sections.extend(cluster.report())
