"""Consume-transform-produce copier run as a subprocess by test_cluster_coordinators.

Copies each source partition to the same sink partition inside transactions that also
commit the consumed offsets (send_offsets_to_transaction). On any client error it exits
with status 3, as a crashed application would; the test restarts it, and the new
instance's init_transactions fences the old one and aborts its open transaction.

A transaction that overruns TRANSACTION_DEADLINE_S kills the copier (SIGALRM, whose
default action ends the process), as an application's watchdog would: librdkafka's
send_offsets_to_transaction can block past its own timeout, indefinitely, when the
group coordinator's broker has died and left the cluster's metadata (librdkafka issues
#5456 and #5511, open for 2.14-2.16; Kafka drops a dead broker from Metadata as tidelog
does). The restarted copier fences the stuck one, as after any crash.

Usage: txn_copier.py BOOTSTRAP SOURCE SINK GROUP TRANSACTIONAL_ID BATCH_SIZE PAUSE_MS
(at most BATCH_SIZE records per transaction, PAUSE_MS between transactions: slow enough
for the test to kill a broker while it copies)
"""

import faulthandler
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

# Longer than any one step's own timeout (30 s) plus the rest of a transaction.
TRANSACTION_DEADLINE_S = 45


def step(what):
    """A timestamped line per transaction step: a copier that stops making progress
    shows in its log where it stopped."""
    print(f"{time.time():.3f} {what}", flush=True)


def copy_forever(cons, prod, source, sink, batch_size, pause_s):
    while True:
        time.sleep(pause_s)
        batch = [m for m in cons.consume(num_messages=batch_size, timeout=1.0) if m.error() is None]
        if not batch:
            continue
        step(f"begin ({len(batch)} records)")
        signal.alarm(TRANSACTION_DEADLINE_S)
        prod.begin_transaction()
        positions = {}
        for m in batch:
            prod.produce(sink, key=m.key(), value=m.value(), partition=m.partition())
            positions[m.partition()] = m.offset() + 1
        offsets = [TopicPartition(source, p, o) for p, o in positions.items()]
        step("send offsets")
        prod.send_offsets_to_transaction(offsets, cons.consumer_group_metadata(), 30)
        step("commit")
        prod.commit_transaction(30)
        signal.alarm(0)
        print("committed", len(batch), flush=True)


def main():
    # The test sends SIGUSR1 before giving up on the copier: every thread's stack.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    bootstrap, source, sink, group, txn_id, batch_size, pause_ms = sys.argv[1:8]
    cons = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "isolation.level": "read_committed",
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
    })
    prod = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5,
                     "transaction.timeout.ms": 15000})
    try:
        prod.init_transactions(60)
        cons.subscribe([source])
        copy_forever(cons, prod, source, sink, int(batch_size), int(pause_ms) / 1000)
    except KafkaException as err:
        print("error", err, flush=True)
        try:
            cons.close()  # leave the group now rather than after the session timeout
        except KafkaException:
            pass
        sys.exit(3)


if __name__ == "__main__":
    main()
