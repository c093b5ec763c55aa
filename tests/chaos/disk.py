"""A full disk on one node: its data directory is a tmpfs of its own (as root), and the
disk-full fault fills it with a ballast file, holds, and deletes it.

tmpfs is used because it can be mounted without a block device and filled instantly
with posix_fallocate; it holds only what is written, in memory. Where mounting is not
allowed, `DataDirMount.try_mount` says why and the fault is left out.
"""

import os
import subprocess

MOUNT_SIZE = "1g"
MOUNT_TIMEOUT_S = 10


class DataDirMount:
    def __init__(self, node):
        self.node = node
        self.path = node.data_dir
        self.mounted = False

    def try_mount(self):
        """None when mounted, else why not."""
        if os.geteuid() != 0:
            return "mounting a tmpfs needs root"
        self.path.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={MOUNT_SIZE}", "tmpfs", str(self.path)],
                                capture_output=True, text=True, timeout=MOUNT_TIMEOUT_S)
        if result.returncode != 0:
            return f"mount failed: {result.stderr.strip()}"
        self.mounted = True
        return None

    @property
    def ballast(self):
        return self.path / "chaos-ballast"

    def fill(self):
        """Take every free byte: the node's next write gets ENOSPC."""
        stat = os.statvfs(self.path)
        free = stat.f_bavail * stat.f_frsize
        fd = os.open(self.ballast, os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            os.posix_fallocate(fd, 0, max(free, 1))
        except OSError:
            pass  # a byte or two short of full is still full for a log append
        finally:
            os.close(fd)

    def free(self):
        try:
            self.ballast.unlink()
        except FileNotFoundError:
            pass

    def unmount(self):
        """After the node is dead; lazy so that a straggler cannot keep it mounted."""
        if self.mounted:
            self.free()
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True, timeout=MOUNT_TIMEOUT_S)
            self.mounted = False
