"""The history: one JSON object per line, each with `t` (CLOCK_MONOTONIC seconds, shared
by every process on the machine, so the transactional worker's own file merges with the
driver's) and `type`. Lines are flushed one by one: a process killed with SIGKILL loses
at most a half-written last line, which `load` skips.
"""

import json
import threading
import time


class History:
    """Appends events to a JSON lines file; safe to share between threads."""

    def __init__(self, path):
        self.path = path
        self._file = open(path, "a", encoding="utf-8")
        self._lock = threading.Lock()

    def record(self, type_, **fields):
        event = {"t": round(time.monotonic(), 6), "type": type_, **fields}
        line = json.dumps(event, sort_keys=True)
        with self._lock:
            if not self._file.closed:
                self._file.write(line + "\n")
                self._file.flush()
        return event

    def close(self):
        with self._lock:
            self._file.close()


def load(*paths):
    """Every event of the given files in time order (ties keep file order)."""
    events = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # the torn last line of a killed writer
    events.sort(key=lambda e: e["t"])
    return events
