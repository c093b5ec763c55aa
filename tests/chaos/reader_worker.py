"""A group reader in a process of its own, so that it can be SIGKILLed (a consumer crash):
the group's other members take its partitions over from the committed offsets once its
session times out. It is a `workload.Reader` (subscribe, asynchronous commits of its
position) writing to its own history file; each incarnation is a reader of its own name,
since a new one starts again from the committed offsets.

Usage: python tests/chaos/reader_worker.py BOOTSTRAP TOPIC PARTITIONS GROUP NAME HISTORY_FILE CLIENT_LOG
"""

import signal
import sys

try:
    from .history import History
    from .workload import Reader, client_logger
except ImportError:  # run as a script
    from history import History
    from workload import Reader, client_logger


def main():
    bootstrap, topic, partitions, group, name, history_file, client_log = sys.argv[1:8]
    history = History(history_file)
    reader = Reader(history, bootstrap, topic, int(partitions), name, group)
    reader.logger = client_logger(client_log)
    signal.signal(signal.SIGTERM, lambda *_: reader.stopping.set())
    history.record("client_start", worker=name)
    reader.run()


if __name__ == "__main__":
    main()
