"""tidelog-chaos: a workload under seeded faults on a real cluster, and a checker over
the recorded history (see docs/reliability.md).

The package reuses the cluster harness of tests/compat/cluster (nodes, network
namespaces, metadata helpers); those modules are imported by their own names, so their
directories are put on sys.path here rather than copied.
"""

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parent.parent
for _harness in (_TESTS / "compat", _TESTS / "compat" / "cluster"):
    if str(_harness) not in sys.path:
        sys.path.insert(0, str(_harness))
