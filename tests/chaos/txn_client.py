"""Runs txn_worker.py as a child process and starts a new incarnation whenever one ends."""

import subprocess
import sys
from pathlib import Path

from .supervisor import EXIT_TIMEOUT_S, Supervised

WORKER = Path(__file__).resolve().parent / "txn_worker.py"
FENCE_TIMEOUT_S = 90


class TxnClient(Supervised):
    """`crash()` SIGKILLs it most likely inside a transaction (the worker pauses between
    the sends of one); the next incarnation fences it, so its open transaction is aborted."""

    def __init__(self, history, history_file, bootstrap, source, sink, group, txn_id, seed, log_path):
        super().__init__(history, txn_id, log_path)
        self.args = [bootstrap, source, sink, group, txn_id, str(history_file), str(seed)]

    def command(self, incarnation):
        return [sys.executable, str(WORKER), *self.args, str(incarnation)]

    def stop(self):
        """Kill the running incarnation, then fence it so its open transaction is aborted:
        returns True when the fencing incarnation succeeded."""
        self.stop_running()
        fence = self.launch("fence")
        try:
            return fence.wait(FENCE_TIMEOUT_S) == 0
        except subprocess.TimeoutExpired:
            fence.kill()
            fence.wait(EXIT_TIMEOUT_S)
            return False
