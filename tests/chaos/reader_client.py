"""Runs reader_worker.py as a child process, restarted whenever it ends; a fault kills it."""

import sys
from pathlib import Path

from .supervisor import Supervised

WORKER = Path(__file__).resolve().parent / "reader_worker.py"


class CrashableReader(Supervised):
    def __init__(self, history, history_file, bootstrap, topic, partitions, group, name, workdir):
        super().__init__(history, name, Path(workdir) / f"{name}.log")
        self.args = [bootstrap, topic, str(partitions), group]
        self.history_file, self.client_log = str(history_file), str(Path(workdir) / "clients.log")

    def command(self, incarnation):
        return [sys.executable, str(WORKER), *self.args, f"{self.name}#{incarnation}", self.history_file,
                self.client_log]
