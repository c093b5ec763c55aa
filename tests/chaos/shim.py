"""Clock jumps, a slow disk, failing writes and failing reads (EIO) on one node, and the journal
of what is durable for a simulated power cut (power.py), through the LD_PRELOAD shim faultshim.c, compiled into the run's directory with the system C compiler (`cc`).

`NodeShim.attach` makes the node start under the shim (its command is prefixed with
`env LD_PRELOAD=...`, so restarts keep it); `set` rewrites the control file the shim
re-reads every 100 ms. Where there is no C compiler the faults are left out, and the run
says so.
"""

import os
import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "faultshim.c"
BUILD_TIMEOUT_S = 120


def build(workdir):
    """(path of the built shim, None) or (None, why not)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None, "no C compiler for the fault shim"
    out = Path(workdir) / "faultshim.so"
    result = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(out), str(SOURCE), "-ldl", "-lpthread"],
                            capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    if result.returncode != 0:
        return None, f"the fault shim did not build: {result.stderr.strip()[:300]}"
    return out, None


class NodeShim:
    def __init__(self, node, library, workdir):
        self.node = node
        self.library = library
        self.control = Path(workdir) / f"shim-node{node.node_id}.ctl"
        self.synced = Path(workdir) / f"shim-node{node.node_id}.synced"
        self.set()

    def attach(self):
        plain = self.node.command
        prefix = ["env", f"LD_PRELOAD={self.library}", f"CHAOS_SHIM_CTL={self.control}",
                  f"CHAOS_SHIM_DIR={os.path.realpath(self.node.data_dir)}",
                  f"CHAOS_SHIM_SYNCED={self.synced}"]
        self.node.command = lambda: prefix + plain()
        return self

    def set(self, clock_offset_ms=0, slow_ms=0, eio=False, read_eio=False):
        """Atomically (rename), so the shim never reads half a line."""
        staged = self.control.with_suffix(".new")
        staged.write_text(f"{int(clock_offset_ms)} {int(slow_ms)} {1 if eio else 0} {1 if read_eio else 0}\n")
        staged.replace(self.control)
