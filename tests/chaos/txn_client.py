"""Runs txn_worker.py as a child process and starts a new incarnation whenever one ends
(a crash, a fatal client error, the watchdog), as an application's supervisor would."""

import subprocess
import sys
import threading
from pathlib import Path

from cluster_nodes import node_environment

WORKER = Path(__file__).resolve().parent / "txn_worker.py"
EXIT_TIMEOUT_S = 30
FENCE_TIMEOUT_S = 90
RESTART_PAUSE_S = 1.0


class TxnClient:
    def __init__(self, history, history_file, bootstrap, source, sink, group, txn_id, seed, log_path):
        self.history, self.history_file = history, history_file
        self.args = [bootstrap, source, sink, group, txn_id]
        self.txn_id, self.seed, self.log_path = txn_id, seed, log_path
        self.incarnation = 0
        self.proc = None
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._supervise, daemon=True, name="txn-client")

    def _launch(self, incarnation):
        cmd = [sys.executable, str(WORKER), *self.args, str(self.history_file), str(self.seed), str(incarnation)]
        with open(self.log_path, "ab") as log:
            return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env=node_environment())

    def start(self):
        self._thread.start()
        return self

    def _supervise(self):
        while not self.stopping.is_set():
            with self._lock:
                if self.stopping.is_set():
                    return  # stop() came between the check above and here
                self.incarnation += 1
                self.proc = self._launch(self.incarnation)
            code = self.proc.wait()
            if not self.stopping.is_set():
                self.history.record("client_exited", worker=self.txn_id, code=code)
            self.stopping.wait(RESTART_PAUSE_S)

    def crash(self):
        """SIGKILL the running incarnation, most likely inside a transaction (it pauses
        between the sends of one); the supervisor starts the next."""
        with self._lock:
            proc = self.proc
        if proc is not None and proc.poll() is None:
            self.history.record("client_crash", worker=self.txn_id, pid=proc.pid)
            proc.kill()

    def stop(self):
        """Kill the running incarnation, then fence it so its open transaction is aborted:
        returns True when the fencing incarnation succeeded."""
        self.stopping.set()
        with self._lock:
            proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(EXIT_TIMEOUT_S)
        self._thread.join(EXIT_TIMEOUT_S)
        fence = self._launch("fence")
        try:
            return fence.wait(FENCE_TIMEOUT_S) == 0
        except subprocess.TimeoutExpired:
            fence.kill()
            fence.wait(EXIT_TIMEOUT_S)
            return False

    def cleanup(self):
        self.stopping.set()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
