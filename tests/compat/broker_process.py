"""A real `tidelog serve` process for the compatibility tests: free loopback ports, a
temporary data directory, a log file, restart on the same ports, cleanup. The fixtures
in conftest.py hand these out; tests that start brokers their own way (test_tls.py)
import this module directly, since `conftest` names a different module in each test
directory.
"""

import atexit
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from compat_helpers import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
LOG_TAIL_LINES = 60
# A port found free can be taken by another process before tidelog binds it; a first
# start that fails that way is retried on new ports this many times.
FIRST_START_ATTEMPTS = 4
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")

# Brokers alive in the current test (function-scoped ones and shared ones alike).
_LIVE_BROKERS = []


class BrokerError(Exception):
    """The broker did not start or did not become ready."""


def tidelog_bin():
    path = Path(os.environ.get("TIDELOG_BIN", REPO_ROOT / "target" / "release" / "tidelog"))
    if not path.is_absolute():
        path = REPO_ROOT / path
    if not path.is_file():
        pytest.fail(f"tidelog binary not found at {path} (build it, or set TIDELOG_BIN)", pytrace=False)
    return path


class Broker:
    """One `tidelog serve` process, restartable on the same ports and data dir."""

    def __init__(self, workdir, settings=None, node_id=1):
        self.binary = tidelog_bin()
        self.workdir = Path(workdir)
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / "broker.log"
        self.settings = dict(settings or {})
        self.node_id = node_id
        self.port = free_port()
        self.admin_port = free_port()
        self.proc = None
        self.starts = 0
        # An HTTPS admin port (admin.listener.security.protocol=SSL): the scheme of
        # readyz_url and the context that trusts its certificate.
        self.admin_scheme = "http"
        self.admin_ssl_context = None

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    @property
    def readyz_url(self):
        return f"{self.admin_scheme}://127.0.0.1:{self.admin_port}/readyz"

    def command(self):
        cmd = [str(self.binary), "serve", "--node-id", str(self.node_id)]
        # `listeners` and --listen are exclusive: a broker given Kafka's listeners
        # (its own ports among them) is started without the flag.
        if "listeners" not in self.settings:
            cmd += ["--listen", self.bootstrap]
        cmd += ["--admin-listen", f"127.0.0.1:{self.admin_port}", "--data-dir", str(self.data_dir)]
        for name, value in self.settings.items():
            cmd += ["--set", f"{name}={value}"]
        return cmd

    def start(self):
        if self.alive():
            raise BrokerError("broker already running")
        if self.starts > 0:
            # A restart keeps its ports: clients and the test know them.
            return self._start_once()
        for attempt in range(FIRST_START_ATTEMPTS):
            try:
                return self._start_once()
            except BrokerError:
                if attempt + 1 == FIRST_START_ATTEMPTS or not self._lost_port_race():
                    raise
                if not self.choose_new_ports():
                    raise
        raise BrokerError("unreachable")

    def choose_new_ports(self):
        """Picks other free ports for a first start that lost a port race; False when this
        broker's ports cannot be changed (a subclass that baked them into its settings)."""
        self.port = free_port()
        self.admin_port = free_port()
        return True

    def _lost_port_race(self):
        """Whether the last start exited because a port was already in use."""
        if self.alive():
            return False
        marker = f"===== start #{self.starts}:"
        text = self.log_path.read_text(errors="replace")
        return "Address already in use" in text.rsplit(marker, 1)[-1]

    def _start_once(self):
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts}: {' '.join(self.command())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.workdir, start_new_session=True,
            )
        if self not in _LIVE_BROKERS:
            _LIVE_BROKERS.append(self)
        self.wait_ready()
        return self

    def wait_ready(self, timeout=READY_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        last_problem = "no answer yet"
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                raise BrokerError(f"tidelog serve exited with {code} before ready\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.readyz_url, timeout=1.0, context=self.admin_ssl_context) as resp:
                    if resp.status == 200:
                        return
                    last_problem = f"/readyz answered {resp.status}"
            except urllib.error.HTTPError as err:
                last_problem = f"/readyz answered {err.code}"
            except (urllib.error.URLError, OSError) as err:
                last_problem = f"/readyz: {err}"
            time.sleep(0.1)
        raise BrokerError(f"not ready after {timeout} s ({last_problem})\n{self.log_tail()}")

    def is_ready(self):
        try:
            with urllib.request.urlopen(self.readyz_url, timeout=2.0, context=self.admin_ssl_context) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def metrics(self):
        """The node's /metrics exposition (Prometheus text)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}/metrics", timeout=10) as response:
            return response.read().decode()

    def authentications(self, listener, mechanism, result):
        """`tidelog_authentication_total` of `mechanism` with `result` (success or failure),
        on `listener`, or summed over every listener when it is None."""
        total = 0.0
        for line in self.metrics().splitlines():
            if (line.startswith("tidelog_authentication_total{")
                    and (listener is None or f'listener="{listener}"' in line)
                    and f'mechanism="{mechanism}"' in line and f'result="{result}"' in line):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        """SIGKILL: no chance to flush or write a clean-shutdown marker."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=STOP_TIMEOUT_S)

    def stop(self, timeout=STOP_TIMEOUT_S):
        """SIGTERM, then SIGKILL if still running after `timeout`. Returns the exit code."""
        if self.proc is None:
            return None
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout)
                raise BrokerError(f"did not exit within {timeout} s of SIGTERM\n{self.log_tail()}")
        return self.proc.returncode

    def restart(self):
        """Start again on the same ports and data directory (stopping it first if alive)."""
        if self.alive():
            self.stop()
        return self.start()

    def log_tail(self, lines=LOG_TAIL_LINES):
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as err:
            return f"(no broker log: {err})"
        tail = ANSI_ESCAPE.sub("", text).splitlines()[-lines:]
        return f"--- last {len(tail)} lines of {self.log_path}\n" + "\n".join(tail)

    def partition_dirs(self, topic):
        """Directories under the data dir named `<topic>-<n>` (Kafka's layout)."""
        prefix = f"{topic}-"
        found = []
        for path in self.data_dir.rglob(f"{topic}-*"):
            suffix = path.name[len(prefix):]
            if path.is_dir() and suffix.isdigit():
                found.append(path)
        return sorted(found)

    def cleanup(self):
        if self.proc is not None and self.alive():
            self.proc.kill()
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pass
        if self in _LIVE_BROKERS:
            _LIVE_BROKERS.remove(self)


@atexit.register
def _kill_leftovers():
    for broker in list(_LIVE_BROKERS):
        broker.cleanup()


class SaslListenersBroker(Broker):
    """A PLAINTEXT listener (the operator's, for set-up as a super user), a
    SASL_PLAINTEXT and a SASL_SSL one (with `keystore`); the SASL settings are the
    caller's."""

    def __init__(self, workdir, keystore):
        self.sasl_port = free_port()
        self.sasl_ssl_port = free_port()
        super().__init__(workdir, {})
        self.settings.update({
            "listeners": self.listeners(),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
        })

    def listeners(self):
        return (f"PLAINTEXT://127.0.0.1:{self.port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},"
                f"SASL_SSL://127.0.0.1:{self.sasl_ssl_port}")

    def choose_new_ports(self):
        super().choose_new_ports()
        self.sasl_port = free_port()
        self.sasl_ssl_port = free_port()
        self.settings["listeners"] = self.listeners()
        return True

    @property
    def sasl_bootstrap(self):
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def sasl_ssl_bootstrap(self):
        return f"127.0.0.1:{self.sasl_ssl_port}"
