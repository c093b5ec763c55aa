"""The chaos checker (tests/chaos/checker.py) on hand-made histories, no broker.

A clean history is built first and must show no anomaly; each test then changes it the
way one anomaly would, and the checker must name exactly that anomaly.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chaos.checker import check, excerpt, send_failures  # noqa: E402

DATA, OUT = "data", "out"


class Story:
    """Builds a history with increasing timestamps."""

    def __init__(self):
        self.events = []

    def add(self, type_, **fields):
        self.events.append({"t": float(len(self.events)), "type": type_, **fields})
        return self.events[-1]

    def ack(self, producer, seq, partition, offset, idempotent=True, topic=DATA):
        return self.add("send_ok", producer=producer, idempotent=idempotent, seq=seq, topic=topic,
                        partition=partition, offset=offset, value=f"{producer}-{seq}")

    def poll(self, reader, partition, offset, value, topic=DATA, isolation="read_committed"):
        return self.add("poll", reader=reader, isolation=isolation, topic=topic, partition=partition,
                        offset=offset, value=value)

    def final(self, topic, log, isolation="read_uncommitted"):
        """`log`: {partition: [values from offset 0]}."""
        for partition, values in log.items():
            for offset, value in enumerate(values):
                self.add("final_read", isolation=isolation, topic=topic, partition=partition, offset=offset,
                         value=value)
            self.add("final_read_end", isolation=isolation, topic=topic, partition=partition,
                     records=len(values))


def clean(tail=None):
    """Two producers, a reader, a committed and an aborted transaction, a group commit, a
    fault and the final reads. `tail(story)` runs before the final reads."""
    s = Story()
    s.add("fault_start", fault="kill-leader", id=1)
    s.ack("p1", 0, 0, 0)
    s.ack("p1", 1, 0, 1)
    s.ack("p2", 0, 1, 0, idempotent=False)
    s.add("fault_end", fault="kill-leader", id=1)
    s.poll("g1", 0, 0, "p1-0")
    s.poll("g1", 0, 1, "p1-1")
    s.poll("g1", 1, 0, "p2-0")
    s.add("offset_commit", group="g", topic=DATA, partition=0, offset=2, t_invoke=6.5, ok=True)
    s.add("committed_seen", group="g", topic=DATA, partition=0, offset=2, t_invoke=9.5)
    s.add("txn_send", txn="tx-1", topic=OUT, value="tx-1-a")
    s.add("txn_offsets", txn="tx-1", group="copier", offsets=[[DATA, 0, 2]])
    s.add("txn_commit_invoke", txn="tx-1")
    s.add("txn_commit_ok", txn="tx-1")
    s.add("txn_send", txn="tx-2", topic=OUT, value="tx-2-a")
    s.add("txn_abort_ok", txn="tx-2")
    s.poll("c1", 0, 0, "tx-1-a", topic=OUT)
    if tail:
        tail(s)
    s.add("drained", complete=True)
    s.final(DATA, {0: ["p1-0", "p1-1"], 1: ["p2-0"], 2: []})
    s.final(OUT, {0: ["tx-1-a", "tx-2-a"]})
    s.final(OUT, {0: ["tx-1-a"]}, isolation="read_committed")
    return s.events


def kinds(events):
    return check(events).kinds()


def test_clean_history_has_no_anomaly_and_counts_it():
    result = check(clean())
    assert result.anomalies == []
    assert result.stats["acknowledged"] == 3
    assert result.stats["transactions"] == {"aborted": 1, "committed": 1}
    assert [f["fault"] for f in result.availability] == ["kill-leader", "whole run"]


def test_lost_write_when_an_acknowledged_value_is_not_read_back():
    events = clean(lambda s: s.ack("p1", 2, 2, 0))
    found = check(events)
    assert "lost-write" in found.kinds()
    lost = next(a for a in found.anomalies if a.kind == "lost-write")
    # The excerpt: the acknowledgement, where the final read of its partition ended, and
    # the fault that began last before it.
    lines = excerpt(lost, events)
    types = [json.loads(line)["type"] for line in lines]
    assert types == ["fault_start", "fault_end", "send_ok", "final_read_end"], lines


def test_lost_write_when_a_committed_transaction_is_missing_from_read_committed():
    events = [e for e in clean() if not (e["type"] == "final_read" and e["isolation"] == "read_committed")]
    assert kinds(events) == ["lost-write"]


def test_duplicate_for_idempotent_values_only():
    events = clean()
    dup = dict(next(e for e in events if e["type"] == "final_read" and e["value"] == "p1-1"), offset=5)
    assert kinds(events + [dup]) == ["duplicate"]
    retried = dict(next(e for e in events if e["type"] == "final_read" and e["value"] == "p2-0"), offset=5)
    assert kinds(events + [retried]) == [], "a non-idempotent producer may write a retried value twice"


def test_inconsistent_offsets_when_two_readers_disagree():
    events = clean(lambda s: s.poll("a1", 0, 1, "p1-9", isolation="read_uncommitted"))
    found = check(events)
    assert "inconsistent-offsets" in found.kinds()
    bad = next(a for a in found.anomalies if a.kind == "inconsistent-offsets")
    assert [e["value"] for e in bad.events] == ["p1-1", "p1-9"]


def test_nonmonotonic_send():
    events = clean(lambda s: (s.ack("p3", 0, 2, 1), s.ack("p3", 1, 2, 0)))
    assert "nonmonotonic-send" in kinds(events)


def test_an_acknowledgement_without_an_offset_is_checked_by_value_only():
    # librdkafka may report an idempotent retry delivered without its offset.
    def offsetless(s):
        s.ack("p1", 2, 0, None)
        s.ack("p1", 3, 0, 3)
        s.poll("g1", 0, 2, "p1-2")
        s.poll("g1", 0, 3, "p1-3")

    events = clean(offsetless)
    for e in events:
        if e["type"] == "final_read_end" and e["topic"] == DATA and e["partition"] == 0:
            at = events.index(e)
            events[at:at] = [dict(e, type="final_read", offset=2, value="p1-2"),
                             dict(e, type="final_read", offset=3, value="p1-3")]
            break
    assert kinds(events) == []
    lost = [e for e in events if not (e["type"] == "final_read" and e["value"] == "p1-2")]
    assert kinds(lost) == ["lost-write"]


def test_nonmonotonic_poll_unless_the_reader_was_reset():
    assert "nonmonotonic-poll" in kinds(clean(lambda s: s.poll("g1", 0, 0, "p1-0")))
    reset = clean(lambda s: (s.add("reader_reset", reader="g1"), s.poll("g1", 0, 0, "p1-0")))
    assert kinds(reset) == []


def test_aborted_read():
    events = clean(lambda s: s.poll("c1", 0, 1, "tx-2-a", topic=OUT))
    found = check(events)
    assert found.kinds() == ["aborted-read"]
    lines = excerpt(found.anomalies[0], events)
    assert any('"txn_send"' in line for line in lines) and any('"poll"' in line for line in lines)


def test_a_transaction_never_asked_to_commit_counts_as_aborted():
    def crashed(s):
        s.add("txn_send", txn="tx-3", topic=OUT, value="tx-3-a")
        s.poll("c1", 0, 2, "tx-3-a", topic=OUT)

    assert "aborted-read" in kinds(clean(crashed))


def test_precommitted_read():
    def early(s):
        s.add("txn_send", txn="tx-4", topic=OUT, value="tx-4-a")
        s.poll("c1", 0, 2, "tx-4-a", topic=OUT)
        s.add("txn_commit_invoke", txn="tx-4")
        s.add("txn_commit_ok", txn="tx-4")

    assert "precommitted-read" in kinds(clean(early))


def test_read_uncommitted_may_see_open_transactions():
    def early(s):
        s.add("txn_send", txn="tx-4", topic=OUT, value="tx-4-a")
        s.poll("u1", 0, 2, "tx-4-a", topic=OUT, isolation="read_uncommitted")
        s.add("txn_abort_ok", txn="tx-4")

    assert kinds(clean(early)) == []


def test_committed_offset_backwards_unless_a_lower_commit_explains_it():
    drop = clean(lambda s: s.add("committed_seen", group="g", topic=DATA, partition=0, offset=1, t_invoke=90.0))
    assert kinds(drop) == ["committed-offset-backwards"]

    def lower_commit(s):
        s.add("offset_commit", group="g", topic=DATA, partition=0, offset=1, t_invoke=s.events[-1]["t"], ok=True)
        s.add("committed_seen", group="g", topic=DATA, partition=0, offset=1, t_invoke=s.events[-1]["t"])

    assert kinds(clean(lower_commit)) == []


def test_a_commit_with_no_outcome_from_a_crashed_reader_may_explain_a_lower_offset():
    def crashed_commit(s, answered):
        invoked = s.events[-1]["t"]
        s.add("offset_commit_invoke", group="g", topic=DATA, partition=0, offset=1, t_invoke=invoked)
        if answered is not None:
            s.add("offset_commit", group="g", topic=DATA, partition=0, offset=1, t_invoke=invoked, ok=answered)
        s.add("committed_seen", group="g", topic=DATA, partition=0, offset=1, t_invoke=s.events[-1]["t"])

    assert kinds(clean(lambda s: crashed_commit(s, None))) == []
    # An answered refusal took no effect: the lower offset is unexplained again.
    assert kinds(clean(lambda s: crashed_commit(s, False))) == ["committed-offset-backwards"]


def test_unseen_acknowledged_writes_after_the_drain_only():
    events = [e for e in clean() if not (e["type"] == "poll" and e["value"] == "p2-0")]
    found = check(events)
    assert found.kinds() == ["unseen"]
    assert found.stats["unseen"] == 1
    undrained = check([e for e in events if e["type"] != "drained"])
    assert undrained.kinds() == [] and undrained.stats["unseen"] is None


def test_availability_is_the_longest_gap_between_acknowledgements_in_a_fault():
    s = Story()
    s.add("fault_start", fault="pause", id=7)  # t=0
    s.ack("p1", 0, 0, 0)  # t=1
    s.ack("p1", 1, 1, 0)  # t=2
    for _ in range(3):
        s.add("noise")  # t=3..5
    s.ack("p1", 2, 0, 1)  # t=6
    s.add("fault_end", fault="pause", id=7)  # t=7
    figures = check(s.events).availability
    # Any write: none from t=2 to t=6. Partition 1: none from t=2 to the end of the fault.
    assert figures[0] == {"fault": "pause", "id": 7, "seconds": 7.0, "longest_gap": 4.0,
                          "worst_partition_gap": 5.0}


def test_send_failures_are_counted_by_error_with_the_fault_under_way():
    s = Story()
    fail = 'KafkaError{{code={},val=32,str="Broker: Invalid timestamp"}}'
    s.add("send_fail", producer="p1", idempotent=True, seq=0, value="p1-0", error="timed out")
    s.add("fault_start", fault="clock-jump", id=3)
    for seq in (1, 2):
        s.add("send_fail", producer="p1", idempotent=True, seq=seq, value=f"p1-{seq}",
              error=fail.format("INVALID_TIMESTAMP"))
    s.add("fault_end", fault="clock-jump", id=3)
    s.add("send_fail", producer="p1", idempotent=True, seq=3, value="p1-3",
          error=fail.format("INVALID_RECORD"))
    assert send_failures(s.events) == [
        "send failures: INVALID_TIMESTAMP 2 (first while clock-jump 3)",
        "send failures: timed out 1 (first while no fault)",
        "send failures: INVALID_RECORD 1 (first 1.0 s after clock-jump 3 ended)",
    ]
