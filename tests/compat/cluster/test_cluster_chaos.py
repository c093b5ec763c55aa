"""The chaos checker's CI slice: fixed seeds of tests/chaos (workload, seeded faults,
healing, final read, checker), two on a 3-node cluster and one on 5 nodes (where a
majority/minority split and moving a replica to a node that held none join the menu), in
network namespaces when they can be made (as root), so partitions are among the faults;
without them the run says so and uses the other faults.

A failure prints the checker's report: each anomaly with the history excerpt that shows
it, and where the run's directory (history, node logs) was kept. Longer runs and soaks:
`python -m tests.chaos run|soak` (docs/reliability.md).
"""

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from chaos.runner import Options, run  # noqa: E402

# Fault phase per seed: the three runs stay within about four minutes on two loaded cores.
FAULT_SECONDS = 30
RUNS = ((11, 3), (12, 3), (13, 5))  # (seed, nodes)
# Every fault is in the menu: a node that stops itself on a failed metadata write after
# a fault on its own disk (fail-stop) is restarted by the scheduler, as a supervisor would.
WITHOUT = ()


@pytest.mark.parametrize("seed,nodes", RUNS)
def test_chaos_seed_finds_no_anomaly(seed, nodes, tmp_path_factory):
    workdir = tmp_path_factory.mktemp(f"chaos-{seed}")
    outcome = run(Options(seed=seed, seconds=FAULT_SECONDS, workdir=workdir, nodes=nodes, without=WITHOUT))
    print(outcome.report)
    assert not outcome.errors, outcome.report
    assert not outcome.result.anomalies, outcome.report
    stats = outcome.result.stats
    assert stats["faults"] >= 2, outcome.report
    assert stats["acknowledged"] > 0 and stats["final_read"] >= stats["acknowledged"], outcome.report
    assert stats["transactions"].get("committed", 0) > 0, outcome.report
    shutil.rmtree(workdir / "cluster", ignore_errors=True)  # the history and report stay
