"""A simulated power cut on the shim node: what the page cache held and the disk did not
is lost.

The fault shim keeps a journal of what is durable (faultshim.c, CHAOS_SHIM_SYNCED): the
size of each file at its last fsync/fdatasync or syncfs, carried over renames. After
the node is killed with SIGKILL, every segment file (`<20 digits>.log` in a partition
directory) is cut to a length drawn between that durable size (0 if it was never
synced) and its current size: the tail the kernel had not yet written back is gone, and
the cut may fall inside a batch. Other files (indexes, snapshots, checkpoints, the
metadata quorum's log) are left as they are: they are replaced through a synced
temporary file, or rebuilt and checked on recovery, and a cut of them would model a
filesystem that loses renames, which this does not.
"""

import os
import re
from pathlib import Path

SEGMENT = re.compile(r"^\d{20}\.log$")
PARTITION_DIR = re.compile(r"^.+-\d+$")


def durable_sizes(journal):
    """{absolute path: size known durable}, from the shim's journal."""
    sizes = {}
    try:
        text = Path(journal).read_text(errors="replace")
    except FileNotFoundError:
        return sizes
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[0] == "S" and parts[1].isdigit():
            sizes[parts[2]] = int(parts[1])
        elif len(parts) == 3 and parts[0] == "R":
            moved = sizes.pop(parts[1], None)
            sizes.pop(parts[2], None)
            if moved is not None:
                sizes[parts[2]] = moved
    return sizes


def cut_unsynced_tails(data_dir, journal, rng):
    """Cuts every segment file of `data_dir` back to a length between its durable size
    and its size now; returns (files cut, bytes lost). The node must be dead."""
    sizes = durable_sizes(journal)
    cut, lost = 0, 0
    root = os.path.realpath(data_dir)
    for partition in sorted(Path(root).iterdir()):
        if not partition.is_dir() or not PARTITION_DIR.match(partition.name):
            continue
        for segment in sorted(partition.iterdir()):
            if not SEGMENT.match(segment.name):
                continue
            size = segment.stat().st_size
            durable = min(sizes.get(str(segment), 0), size)
            if size > durable:
                keep = rng.randint(durable, size)
                if keep < size:
                    os.truncate(segment, keep)
                    cut += 1
                    lost += size - keep
    return cut, lost
