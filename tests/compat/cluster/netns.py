"""Network namespaces for the partition test: one namespace per node, a bridge between.

Layout (as root): a bridge `<tag>br` in the root namespace holding 10.<a>.<b>.254/24 and
one veth pair per node; the node's end is renamed `eth0` inside namespace `<tag>n<i>` and
holds 10.<a>.<b>.<i>/24. The test process stays in the root namespace and reaches every
node through the bridge, so it can keep talking to a node that the other nodes cannot.

Each namespace also holds a veth pair `void0`/`void1` that leads nowhere. A cut routes
the peer's /32 into `void0` on both sides, with a permanent neighbour entry so no ARP
failure is reported: the frames reach `void1`, which is not their destination and drops
them. Packets vanish silently, as behind a broken switch, rather than being refused
(tc filters would do the same but need kernel modules containers often lack). Healing
deletes the routes. `teardown` deletes the namespaces (their veth
ends, and so the pairs, go with them) and the bridge; it runs from the fixture's
finalizer and from atexit, and never raises.
"""

import atexit
import os
import shutil
import subprocess

IP_TIMEOUT_S = 10
# Names and subnets the lab may take; `scripts/netns-cleanup` removes leftovers by prefix.
NAME_PREFIX = "tlc"
# Frames for a cut peer go out of `void0` to this address: `void1`, the other end of the
# pair, is not it and drops them.
VOID_MAC = "02:00:00:00:00:99"


class NetnsUnavailable(Exception):
    """`ip netns` cannot be used here (not root, no iproute2, no CAP_NET_ADMIN)."""


def _ip(*args, check=True):
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip() or result.returncode}")
    return result


def unavailable_reason():
    """None when namespaces, veth pairs and bridges can be made; else why not."""
    if shutil.which("ip") is None:
        return "iproute2 `ip` is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"{NAME_PREFIX}probe{os.getpid() % 100000}"
    try:
        made = _ip("netns", "add", probe, check=False)
        if made.returncode != 0:
            return f"`ip netns add` failed: {made.stderr.strip()}"
        bridge = _ip("link", "add", f"{probe}b", "type", "bridge", check=False)
        if bridge.returncode != 0:
            return f"cannot create a bridge: {bridge.stderr.strip()}"
        return None
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"`ip` failed: {err}"
    finally:
        _ip("link", "del", f"{probe}b", check=False)
        _ip("netns", "del", probe, check=False)


class NetnsLab:
    """`size` namespaces on one bridge. Use as a context manager or call teardown()."""

    def __init__(self, size):
        self.size = size
        self.tag = f"{NAME_PREFIX}{os.getpid() % 100000:05d}"
        # A /24 of 10.0.0.0/8 chosen by pid, away from the common 10.0.x and 10.1.x.
        self.subnet = f"10.{200 + os.getpid() % 50}.{os.getpid() % 250}"
        self.bridge = f"{self.tag}br"
        self.cuts = set()  # nodes whose interface drops traffic to and from the others
        self.made = False

    def namespace(self, node):
        return f"{self.tag}n{node}"

    def address(self, node):
        return f"{self.subnet}.{node}"

    def exec_prefix(self, node):
        """Prefix for a command that must run inside the node's namespace."""
        return ["ip", "netns", "exec", self.namespace(node)]

    def setup(self):
        atexit.register(self.teardown)
        self.made = True
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.subnet}.254/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for node in range(1, self.size + 1):
            ns, host_end, node_end = self.namespace(node), f"{self.tag}h{node}", f"{self.tag}p{node}"
            _ip("netns", "add", ns)
            _ip("link", "add", host_end, "type", "veth", "peer", "name", node_end)
            _ip("link", "set", node_end, "netns", ns)
            _ip("-n", ns, "link", "set", node_end, "name", "eth0")
            _ip("-n", ns, "addr", "add", f"{self.address(node)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "add", "void0", "type", "veth", "peer", "name", "void1")
            _ip("-n", ns, "link", "set", "void0", "up")
            _ip("-n", ns, "link", "set", "void1", "up")
            _ip("link", "set", host_end, "master", self.bridge)
            _ip("link", "set", host_end, "up")
        return self

    def _route(self, src, dst, add):
        """In src's namespace, send packets for dst into the void pair (or stop doing so)."""
        ns, addr = self.namespace(src), self.address(dst)
        if add:
            _ip("-n", ns, "neigh", "replace", addr, "lladdr", VOID_MAC, "dev", "void0", "nud", "permanent")
            _ip("-n", ns, "route", "add", f"{addr}/32", "dev", "void0")
            self.cuts.add((src, dst))
        else:
            _ip("-n", ns, "route", "del", f"{addr}/32", "dev", "void0", check=False)
            _ip("-n", ns, "neigh", "del", addr, "dev", "void0", check=False)
            self.cuts.discard((src, dst))

    def isolate(self, node):
        """Cut `node` off from every other node, both directions; the root namespace still reaches it."""
        self.split({node})

    def split(self, side):
        """Cut the nodes in `side` off from every node outside it, both directions: two
        groups that each still reach their own members (and the root namespace reaches all)."""
        for node in side:
            for other in range(1, self.size + 1):
                if other not in side:
                    self._route(node, other, True)
                    self._route(other, node, True)

    def heal(self):
        for src, dst in list(self.cuts):
            self._route(src, dst, False)

    def teardown(self):
        if not self.made:
            return
        self.made = False
        for node in range(1, self.size + 1):
            # The host end goes with the namespace's end, but only once the kernel gets
            # round to destroying the namespace; deleting it first makes it immediate.
            for args in (("link", "del", f"{self.tag}h{node}"), ("netns", "del", self.namespace(node))):
                try:
                    _ip(*args, check=False)
                except (OSError, subprocess.TimeoutExpired):
                    pass
        try:
            _ip("link", "del", self.bridge, check=False)
        except (OSError, subprocess.TimeoutExpired):
            pass
        atexit.unregister(self.teardown)

    def __enter__(self):
        try:
            return self.setup()
        except BaseException:
            self.teardown()
            raise

    def __exit__(self, *exc):
        self.teardown()
