"""The transactional client, a process of its own so that it can be SIGKILLed in the
middle of a transaction (a client crash). Read-process-write: it consumes the data topic
in group GROUP and, in each transaction, sends one new value per record consumed to the
sink topic and commits the consumed offsets with them (send_offsets_to_transaction).
Some transactions are aborted on purpose (seeded). Its events go to its own history file
(same clock as the driver's); the runner restarts it when it exits, with the same
transactional.id, so the new one fences the old and its open transaction is aborted.

Usage: python tests/chaos/txn_worker.py BOOTSTRAP SOURCE SINK GROUP TRANSACTIONAL_ID
       HISTORY_FILE SEED INCARNATION   (INCARNATION "fence": fence the previous one, exit)
"""

import random
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

try:
    from .history import History
except ImportError:  # run as a script
    from history import History

BATCH = 20
SEND_PAUSE_S = 0.02  # between sends: a transaction stays open long enough to be killed in
ABORT_SHARE = 0.15
# librdkafka's transactional calls can block past their own timeouts when a coordinator
# dies (see tests/compat/cluster/txn_copier.py); an application watchdog ends the process.
TRANSACTION_DEADLINE_S = 60
# The incarnation that only fences the last one (its open transaction is aborted) and
# exits: run before the final read, whose read_committed pass waits for open transactions.
FENCE_ONLY = "fence"


def run_transactions(history, cons, group, prod, sink, rng, prefix):
    n = 0
    while True:
        batch = [m for m in cons.consume(num_messages=BATCH, timeout=1.0) if m.error() is None]
        if not batch:
            continue
        txn = f"{prefix}-{n}"
        n += 1
        signal.alarm(TRANSACTION_DEADLINE_S)
        history.record("txn_begin", txn=txn)
        prod.begin_transaction()
        positions = {}
        try:
            for i, m in enumerate(batch):
                value = f"{txn}-{i}|{m.partition()}:{m.offset()}"
                history.record("txn_send", txn=txn, topic=sink, value=value)
                prod.produce(sink, value.encode(), partition=m.partition())
                positions[m.partition()] = m.offset() + 1
                prod.poll(0)
                time.sleep(SEND_PAUSE_S)
            offsets = [TopicPartition(m.topic(), p, o) for p, o in positions.items()]
            history.record("txn_offsets", txn=txn, group=group,
                           offsets=[[tp.topic, tp.partition, tp.offset] for tp in offsets])
            prod.send_offsets_to_transaction(offsets, cons.consumer_group_metadata(), 30)
            if rng.random() < ABORT_SHARE:
                prod.abort_transaction(30)
                history.record("txn_abort_ok", txn=txn)
            else:
                history.record("txn_commit_invoke", txn=txn)
                prod.commit_transaction(30)
                history.record("txn_commit_ok", txn=txn)
        except KafkaException as err:
            history.record("txn_fail", txn=txn, error=str(err))
            if not err.args[0].txn_requires_abort():
                raise  # fatal, or a commit of unknown outcome: the runner starts a new process
            prod.abort_transaction(30)
            history.record("txn_abort_ok", txn=txn)
        signal.alarm(0)


def main():
    bootstrap, source, sink, group, txn_id, history_file, seed, incarnation = sys.argv[1:9]
    history = History(history_file)
    rng = random.Random(f"{seed}-{incarnation}")
    cons = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "isolation.level": "read_committed",
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
    })
    prod = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5,
                     "transaction.timeout.ms": 15000})
    history.record("client_start", worker=txn_id, incarnation=incarnation)
    try:
        prod.init_transactions(60)
        if incarnation == FENCE_ONLY:
            history.record("client_exit", worker=txn_id, error=None)
            return
        cons.subscribe([source])
        run_transactions(history, cons, group, prod, sink, rng, f"{txn_id}#{incarnation}")
    except KafkaException as err:
        history.record("client_exit", worker=txn_id, error=str(err))
        sys.exit(3)


if __name__ == "__main__":
    main()
