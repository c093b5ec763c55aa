"""A client process of its own, restarted whenever it ends (a crash, a fatal client
error, a watchdog), as an application's supervisor would; `crash()` is SIGKILL.

Subclasses say how to start incarnation N (`command`); each incarnation writes its
events to its own history file, on the same clock as the driver's.
"""

import subprocess
import threading

from cluster_nodes import node_environment

EXIT_TIMEOUT_S = 30
RESTART_PAUSE_S = 1.0


class Supervised:
    def __init__(self, history, name, log_path):
        self.history, self.name, self.log_path = history, name, log_path
        self.incarnation = 0
        self.proc = None
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._supervise, daemon=True, name=name)

    def command(self, incarnation):
        raise NotImplementedError

    def launch(self, incarnation):
        with open(self.log_path, "ab") as log:
            return subprocess.Popen(self.command(incarnation), stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env=node_environment())

    def start(self):
        self._thread.start()
        return self

    def _supervise(self):
        while not self.stopping.is_set():
            with self._lock:
                if self.stopping.is_set():
                    return  # stop() came between the check above and here
                self.incarnation += 1
                self.proc = self.launch(self.incarnation)
            code = self.proc.wait()
            if not self.stopping.is_set():
                self.history.record("client_exited", worker=self.name, code=code)
            self.stopping.wait(RESTART_PAUSE_S)

    def crash(self):
        """SIGKILL the running incarnation; the supervisor starts the next."""
        with self._lock:
            proc = self.proc
        if proc is not None and proc.poll() is None:
            self.history.record("client_crash", worker=self.name, pid=proc.pid)
            proc.kill()

    def stop_running(self):
        """No more incarnations; kill the running one."""
        self.stopping.set()
        with self._lock:
            proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(EXIT_TIMEOUT_S)
        self._thread.join(EXIT_TIMEOUT_S)
        return not self._thread.is_alive()

    def cleanup(self):
        self.stopping.set()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
