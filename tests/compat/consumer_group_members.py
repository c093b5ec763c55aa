"""KIP-848 consumer-group members for the tests (confluent-kafka, `group.protocol=consumer`):
who holds which partition, from each member's callbacks, and a member to run as its own
process (so a test can kill it)."""

import textwrap
import time

from confluent_kafka import Consumer


class Ownership:
    """Who holds which partition, from the members' callbacks; refuses a second owner."""

    def __init__(self):
        self.owner = {}
        self.held = {}
        self.revoked = {}
        self.assigned = {}
        self.violations = []
        self.callbacks = {}

    def member(self, name, bootstrap, group, **extra):
        self.held[name] = set()
        self.revoked[name] = []
        self.assigned[name] = []

        def on_assign(consumer, partitions):
            for tp in partitions:
                key = tp.partition
                other = self.owner.get(key)
                if other is not None and other != name:
                    self.violations.append((key, other, name))
                self.owner[key] = name
                self.held[name].add(key)
                self.assigned[name].append(key)

        def on_revoke(consumer, partitions):
            for tp in partitions:
                key = tp.partition
                if self.owner.get(key) == name:
                    del self.owner[key]
                self.held[name].discard(key)
                self.revoked[name].append(key)

        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
        conf.update(extra)
        self.callbacks[name] = (on_assign, on_revoke)
        return Consumer(conf)

    def subscribe(self, name, consumer, topic):
        on_assign, on_revoke = self.callbacks[name]
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)


def poll_all(consumers, seconds, sink=None):
    """Polls every consumer for `seconds`; messages go to `sink[name]` if given."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for name, c in consumers.items():
            msg = c.poll(0.02)
            if msg is not None and msg.error() is None and sink is not None:
                sink.setdefault(name, []).append((msg.partition(), msg.offset()))


def settle(own, consumers, expected, timeout=30):
    """Polls until every member holds `expected[name]` partitions."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        poll_all(consumers, 0.2)
        if all(len(own.held[n]) == k for n, k in expected.items()):
            return
    counts = {n: sorted(own.held[n]) for n in consumers}
    raise AssertionError(f"group did not settle on {expected} within {timeout} s: {counts}")


def close_all(consumers):
    for c in consumers.values():
        c.close()


MEMBER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                  "group.protocol": "consumer", "enable.auto.commit": False})
    c.subscribe([sys.argv[3]], on_assign=lambda c, ps: print("assigned", len(ps), flush=True))
    while True:
        c.poll(0.1)
    """
)
