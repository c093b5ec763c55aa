"""The driver's clients, each in its own thread, each recording what it saw.

- `Sender`: one acks=all producer (idempotent or not) sending unique values
  `<name>-<seq>` round-robin over the partitions at a fixed rate.
- `Reader`: a consumer, either in a group (subscribe, synchronous commits of its
  position) or assigned every partition from offset 0; every record it is served is a
  `poll` event, every assignment change a `reader_reset`.
- `CommittedWatcher`: asks OffsetFetch of each group's committed offsets once a second.

Client errors that librdkafka retries by itself are not events: only outcomes are.
"""

import logging
import os
import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

CLIENT_TIMEOUT_MS = 10000
# librdkafka debug contexts for the group readers (e.g. "cgrp,protocol"), into clients.log.
READER_DEBUG = os.environ.get("CHAOS_READER_DEBUG", "")
SENDER_DEBUG = os.environ.get("CHAOS_SENDER_DEBUG", "")
# What librdkafka logs (debug facility CGRPQUERY) while its group coordinator is cached on
# a broker handle it has decommissioned (confluentinc/librdkafka#5511): from then on it
# never asks for a coordinator again, and close() waits for its commits forever.
COORDINATOR_LOST = "no broker available for coordinator query"
MESSAGE_TIMEOUT_MS = 30000  # a send unacknowledged this long is a send_fail (outcome unknown)


def client_logger(path):
    """librdkafka's own log lines (connection refused while a node is down...) go to a file
    in the run's directory rather than to the terminal."""
    logger = logging.getLogger(f"chaos-clients-{path}")
    if not logger.handlers:
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
        # librdkafka's debug lines arrive at DEBUG: kept only when they were asked for.
        logger.setLevel(logging.DEBUG if READER_DEBUG else logging.INFO)
    return logger


class Worker:
    def __init__(self, name):
        self.name = name
        self.stopping = threading.Event()
        self.logger = logging.getLogger("chaos-clients")  # the runner sets client_logger(...)
        self.error = None  # an unexpected exception ends the worker and fails the run
        self._thread = threading.Thread(target=self._guarded, daemon=True, name=name)

    def start(self):
        self._thread.start()
        return self

    def _guarded(self):
        try:
            self.run()
        except Exception as err:  # noqa: BLE001 - reported by the runner
            self.error = f"{self.name}: {type(err).__name__}: {err}"

    def watched_client_log(self, keep):
        """A child of the client log for this worker's librdkafka handle: every line goes
        through `keep(record)` (which may note it), and only those it keeps are written."""
        logger = logging.getLogger(f"{self.logger.name}.{self.name}")
        logger.setLevel(logging.DEBUG)
        logger.filters.clear()
        logger.addFilter(keep)
        return logger

    def client_error(self, err):
        """librdkafka's error_cb: a fatal error (the client gives up) says why only here,
        so every error goes to the history with the client's name."""
        self.history.record("client_error", client=self.name, fatal=err.fatal(), code=err.code(), error=err.str())

    def stop(self, timeout=60):
        self.stopping.set()
        self._thread.join(timeout)
        return not self._thread.is_alive()


class Sender(Worker):
    def __init__(self, history, bootstrap, topic, partitions, name, idempotent, rate):
        super().__init__(name)
        self.history, self.topic, self.partitions = history, topic, partitions
        self.idempotent, self.rate = idempotent, rate
        self.acked = set()  # values acknowledged, for the runner's drain
        self.conf = {
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": idempotent,
            "linger.ms": 5, "message.timeout.ms": MESSAGE_TIMEOUT_MS, "request.timeout.ms": CLIENT_TIMEOUT_MS,
            "retry.backoff.ms": 100, "error_cb": self.client_error,
        }
        if idempotent:
            # Its epoch bumps and their reasons (debug facility EOS): a bump re-sends what
            # was in flight under new sequence numbers, which no broker can deduplicate
            # (librdkafka#4953), so a duplicate is read next to the bump that caused it.
            self.conf["debug"] = ",".join(filter(None, ["eos", SENDER_DEBUG]))

    def _client_log(self):
        """Records librdkafka's epoch bumps in the history and keeps only those of its EOS
        debug lines."""

        def keep(record):
            if record.levelno > logging.DEBUG:
                return True
            text = record.getMessage()
            if "epoch bump" in text or "bumped epoch" in text.lower():
                self.history.record("client_epoch_bump", client=self.name, message=text[:300])
                return True
            return bool(SENDER_DEBUG)

        return self.watched_client_log(keep)

    def _delivered(self, seq, err, msg):
        value = msg.value().decode()
        if err is None:
            self.acked.add(value)
            self.history.record("send_ok", producer=self.name, idempotent=self.idempotent, seq=seq,
                                topic=msg.topic(), partition=msg.partition(), offset=msg.offset(), value=value)
        else:
            self.history.record("send_fail", producer=self.name, idempotent=self.idempotent, seq=seq,
                                value=value, error=str(err))

    def run(self):
        producer = Producer(self.conf, logger=self._client_log() if self.idempotent else self.logger)
        seq = 0
        period = 1.0 / self.rate
        next_at = time.monotonic()
        while not self.stopping.is_set():
            value = f"{self.name}-{seq}"
            try:
                producer.produce(self.topic, value.encode(), partition=seq % self.partitions,
                                 on_delivery=lambda err, msg, seq=seq: self._delivered(seq, err, msg))
                seq += 1
            except BufferError:
                pass  # the local queue is full while the cluster is unavailable: try again later
            producer.poll(0)
            next_at += period
            delay = next_at - time.monotonic()
            if delay > 0:
                self.stopping.wait(delay)
            else:
                next_at = time.monotonic()  # fell behind (a stalled cluster): do not burst
        left = producer.flush(MESSAGE_TIMEOUT_MS / 1000 + 5)
        if left:
            raise RuntimeError(f"{left} sends neither acknowledged nor failed after the message timeout")


class Reader(Worker):
    """`group` set: subscribe and commit; else assign every partition from 0."""

    def __init__(self, history, bootstrap, topic, partitions, name, group=None, isolation="read_committed"):
        super().__init__(name)
        self.history, self.topic, self.partitions, self.group = history, topic, partitions, group
        self.isolation = isolation
        self.served = set()  # values served, for the runner's drain
        self.pending = {}  # (partition, offset) -> when its commit was asked for
        self.conf = {
            "bootstrap.servers": bootstrap, "group.id": group or f"chaos-assign-{name}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "isolation.level": isolation,
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "socket.timeout.ms": CLIENT_TIMEOUT_MS,
            "on_commit": self._committed, "error_cb": self.client_error,
        }
        # Group readers always log their coordinator lookups, to recognise #5511 above;
        # the debug lines are kept in the client log only when CHAOS_READER_DEBUG asks.
        if group:
            self.conf["debug"] = ",".join(filter(None, [READER_DEBUG, "cgrp"]))
        self.closing_since = None  # when close() was called
        self.coordinator_lost_at = None  # when COORDINATOR_LOST was last logged

    def coordinator_lost_while_closing(self):
        """Whether librdkafka showed #5511 after close() began: a close that never returns
        is then the client's known bug, not the broker's doing."""
        return (self.closing_since is not None and self.coordinator_lost_at is not None
                and self.coordinator_lost_at >= self.closing_since)

    def _client_log(self):
        """Notes COORDINATOR_LOST and drops the debug lines nobody asked for."""

        def keep(record):
            if COORDINATOR_LOST in record.getMessage():
                self.coordinator_lost_at = time.monotonic()
            return record.levelno > logging.DEBUG or bool(READER_DEBUG)

        return self.watched_client_log(keep)

    def _reset(self, _consumer, partitions):
        self.history.record("reader_reset", reader=self.name, partitions=[p.partition for p in partitions])

    def run(self):
        consumer = Consumer(self.conf, logger=self._client_log() if self.group else self.logger)
        try:
            if self.group:
                consumer.subscribe([self.topic], on_assign=self._reset, on_revoke=self._reset, on_lost=self._reset)
            else:
                consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
                self._reset(consumer, [])
            last_commit = time.monotonic()
            while not self.stopping.is_set():
                for msg in consumer.consume(num_messages=500, timeout=0.5):
                    if msg.error() is not None:
                        continue  # transient (leader moved, partition EOF): librdkafka carries on
                    self.served.add(msg.value().decode())
                    self.history.record("poll", reader=self.name, isolation=self.isolation, topic=msg.topic(),
                                        partition=msg.partition(), offset=msg.offset(), value=msg.value().decode())
                if self.group and time.monotonic() - last_commit > 1.0:
                    self._commit(consumer)
                    last_commit = time.monotonic()
        finally:
            self.closing_since = time.monotonic()
            consumer.close()
            self.history.record("client_closed", client=self.name,
                                seconds=round(time.monotonic() - self.closing_since, 3))

    def _commit(self, consumer):
        """Asynchronous: a synchronous commit can block for minutes while the group
        coordinator moves. The outcome is recorded when librdkafka reports it."""
        assigned = consumer.assignment()
        if not assigned:
            return
        positions = [tp for tp in consumer.position(assigned) if tp.offset >= 0]
        if not positions:
            return
        invoked = time.monotonic()
        for tp in positions:
            self.pending[(tp.partition, tp.offset)] = invoked
            self.history.record("offset_commit_invoke", group=self.group, topic=tp.topic, partition=tp.partition,
                                offset=tp.offset, t_invoke=invoked)
        try:
            consumer.commit(offsets=positions, asynchronous=True)
        except KafkaException:
            pass  # not sent: the checker counts an invoke without an outcome as unknown

    def _committed(self, err, partitions):
        for tp in partitions:
            invoked = self.pending.pop((tp.partition, tp.offset), None)
            if invoked is not None:
                ok = err is None and tp.error is None
                self.history.record("offset_commit", group=self.group, topic=tp.topic, partition=tp.partition,
                                    offset=tp.offset, t_invoke=invoked, ok=ok)


class CommittedWatcher(Worker):
    def __init__(self, history, bootstrap, topic, partitions, groups):
        super().__init__("committed-watcher")
        self.history, self.topic, self.partitions, self.groups = history, topic, partitions, groups
        self.bootstrap = bootstrap

    def run(self):
        consumers = {g: Consumer({"bootstrap.servers": self.bootstrap, "group.id": g,
                                  "enable.auto.commit": False}, logger=self.logger) for g in self.groups}
        try:
            while not self.stopping.wait(1.0):
                for group, consumer in consumers.items():
                    invoked = time.monotonic()
                    try:
                        answer = consumer.committed([TopicPartition(self.topic, p) for p in range(self.partitions)],
                                                    timeout=CLIENT_TIMEOUT_MS / 1000)
                    except KafkaException:
                        continue  # no answer is no observation
                    for tp in answer:
                        if tp.error is None and tp.offset >= 0:
                            self.history.record("committed_seen", group=group, topic=tp.topic,
                                                partition=tp.partition, offset=tp.offset, t_invoke=invoked)
        finally:
            for consumer in consumers.values():
                consumer.close()
