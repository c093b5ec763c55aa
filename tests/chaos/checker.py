"""The checker: a pure function from a recorded history to the anomalies it shows.

Events it reads (every one has `t`, monotonic seconds, and `type`):

  send_ok      producer, idempotent, seq, topic, partition, offset, value  (acknowledged)
  send_fail    producer, idempotent, seq, value, error       (outcome unknown: may be written)
  poll         reader, isolation, topic, partition, offset, value
  reader_reset reader        (assignment or seek: the reader's next offsets may go back)
  txn_send     txn, topic, value                 (produced inside transaction `txn`)
  txn_offsets  txn, group, offsets [[topic, partition, offset], ...]
  txn_commit_invoke / txn_commit_ok / txn_abort_ok / txn_fail   txn
  offset_commit_invoke group, topic, partition, offset, t_invoke   (a commit was sent; a
               reader killed before its outcome leaves only this: the commit may have applied)
  offset_commit group, topic, partition, offset, t_invoke, ok (True, False, or None: unknown)
  committed_seen group, topic, partition, offset, t_invoke    (an OffsetFetch answer)
  fault_start / fault_end   fault, id
  final_read   isolation, topic, partition, offset, value    (after healing, 0 to the HWM)
  final_read_end isolation, topic, partition, records
  drained      complete          (the readers were given their time to catch up)
  client_error client, fatal, code, error   (librdkafka's error_cb; not checked, shown in
               the report when fatal)
  client_closed client, seconds             (how long a consumer's close() took; shown
               in the report when over 10 s)
  client_stuck client, cause                (a consumer whose close() never returned for a
               known client bug, e.g. librdkafka#5511; shown in the report)
  client_epoch_bump client, message         (an idempotent producer bumped its epoch: what it
               had in flight is sent again under new sequence numbers, librdkafka#4953;
               shown in the report, and next to a duplicate it may explain)

A transaction is *committed* when its commit was acknowledged, *aborted* when its abort
was acknowledged or its producer never asked to commit it (a crashed or fenced worker:
the coordinator can only abort it), and *unknown* when a commit was asked for but not
acknowledged.

Anomalies (names as in Jepsen's Kafka workload; the definitions are this file's):

  lost-write            an acknowledged send, or a value of a committed transaction, is
                        missing from the final read (read_committed for transactions)
  duplicate             a value of an idempotent or transactional producer at two offsets
  inconsistent-offsets  one topic-partition-offset seen holding two different values (by
                        the acknowledgement, any reader or the final read)
  nonmonotonic-send     an idempotent producer's acknowledged offsets in one partition not
                        increasing in the order it sent them
  nonmonotonic-poll     a reader served an offset not above the one before it in the same
                        partition, with no assignment change or seek in between
  aborted-read          a read_committed reader served a value of an aborted transaction
  precommitted-read     a read_committed reader served a value of a transaction before the
                        producer asked to commit it (the poll returned before the commit
                        call began; a commit cannot take effect before it is asked for)
  committed-offset-backwards  a group's committed offset for a partition, as OffsetFetch
                        answers, lower than an earlier answer, when no commit of that lower
                        offset may have happened between the two
  unseen                an acknowledged send of a polled topic that no reader was served by
                        the end of the drain (must drain to 0; not checked without a drain)

Availability is a figure, not an anomaly: the longest time without any acknowledged send
during each fault (from its start to its end) and over the whole run, overall and in the
partition that waited longest.
"""

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field

@dataclass
class Anomaly:
    kind: str
    message: str
    events: list = field(default_factory=list)  # the fewest events that show it


@dataclass
class Result:
    anomalies: list
    stats: dict
    availability: list

    def kinds(self):
        return sorted({a.kind for a in self.anomalies})


def transaction_outcomes(events):
    """{txn: "committed" | "aborted" | "unknown"} for every transaction seen."""
    invoked, outcome = set(), {}
    for e in events:
        txn = e.get("txn")
        if txn is None:
            continue
        outcome.setdefault(txn, None)
        if e["type"] == "txn_commit_invoke":
            invoked.add(txn)
        elif e["type"] == "txn_commit_ok":
            outcome[txn] = "committed"
        elif e["type"] == "txn_abort_ok" and outcome[txn] is None:
            outcome[txn] = "aborted"
    return {txn: o or ("unknown" if txn in invoked else "aborted") for txn, o in outcome.items()}


def _final_values(events, isolation):
    """{topic: {value: [final_read events]}} and the topics whose final read finished."""
    by_value, finished = defaultdict(lambda: defaultdict(list)), set()
    for e in events:
        if e.get("isolation") != isolation:
            continue
        if e["type"] == "final_read":
            by_value[e["topic"]][e["value"]].append(e)
        elif e["type"] == "final_read_end":
            finished.add(e["topic"])
    return by_value, finished


def check_lost_and_duplicates(events, outcomes, anomalies):
    final, finished = _final_values(events, "read_uncommitted")
    committed_final, committed_finished = _final_values(events, "read_committed")
    txn_sends = [e for e in events if e["type"] == "txn_send"]
    at_offset = {(e["topic"], e["partition"], e["offset"]): e for e in events
                 if e["type"] == "final_read" and e["isolation"] == "read_uncommitted"}
    ends = {(e["topic"], e["partition"]): e for e in events
            if e["type"] == "final_read_end" and e["isolation"] == "read_uncommitted"}
    for e in events:
        if e["type"] == "send_ok" and e["topic"] in finished and not final[e["topic"]].get(e["value"]):
            # Shown with what the final read found at its offset, or where that partition ended.
            instead = at_offset.get((e["topic"], e["partition"], e["offset"])) or ends.get((e["topic"], e["partition"]))
            anomalies.append(Anomaly("lost-write", f"acknowledged {e['value']!r} is not in the final read",
                                     [e] + ([instead] if instead else [])))
    for e in txn_sends:
        if outcomes[e["txn"]] == "committed" and e["topic"] in committed_finished:
            if not committed_final[e["topic"]].get(e["value"]):
                anomalies.append(Anomaly("lost-write", f"{e['value']!r} of committed {e['txn']} is not in the "
                                         "read_committed final read", [e]))
    exactly_once = {e["value"] for e in events if e["type"] in ("send_ok", "send_fail") and e.get("idempotent")}
    exactly_once |= {e["value"] for e in txn_sends}
    for topic, values in final.items():
        for value, reads in values.items():
            if value in exactly_once and len(reads) > 1:
                offsets = [r["offset"] for r in reads]
                # The sends of the value first: the excerpt then shows the fault around them.
                sends = [e for e in events if e["type"] in ("send_ok", "send_fail") and e["value"] == value]
                anomalies.append(Anomaly("duplicate", f"{value!r} in {topic} at offsets {offsets}", sends + reads))


def check_offsets(events, anomalies):
    """One value per offset, whoever saw it."""
    seen = {}
    for e in events:
        if e["type"] not in ("send_ok", "poll", "final_read") or e["offset"] is None:
            continue  # an acknowledgement without an offset (see check_send_order)
        key = (e["topic"], e["partition"], e["offset"])
        first = seen.setdefault(key, e)
        if first["value"] != e["value"]:
            anomalies.append(Anomaly("inconsistent-offsets", f"{key[0]}-{key[1]} offset {key[2]} holds "
                                     f"{first['value']!r} and {e['value']!r}", [first, e]))
            seen[key] = e  # report each change once


def check_send_order(events, anomalies):
    acks = defaultdict(list)
    for e in events:
        # librdkafka may report a send delivered without its offset: an idempotent
        # retry whose first attempt was kept (the answer to that attempt was lost).
        # Whether it is in the log is checked by value (lost-write), not by offset.
        if e["type"] == "send_ok" and e.get("idempotent") and e["offset"] is not None:
            acks[(e["producer"], e["topic"], e["partition"])].append(e)
    for (producer, topic, partition), sent in acks.items():
        sent.sort(key=lambda e: e["seq"])
        for before, after in zip(sent, sent[1:]):
            if after["offset"] <= before["offset"]:
                anomalies.append(Anomaly("nonmonotonic-send", f"{producer} sent {before['value']!r} before "
                                         f"{after['value']!r} but they were acknowledged at offsets "
                                         f"{before['offset']} and {after['offset']} of {topic}-{partition}",
                                         [before, after]))


def check_poll_order(events, anomalies):
    last = {}  # (reader, topic, partition) -> the previous poll
    for e in events:
        if e["type"] == "reader_reset":
            for key in [k for k in last if k[0] == e["reader"]]:
                del last[key]
        elif e["type"] == "poll":
            key = (e["reader"], e["topic"], e["partition"])
            before = last.get(key)
            if before is not None and e["offset"] <= before["offset"]:
                anomalies.append(Anomaly("nonmonotonic-poll", f"{e['reader']} was served {e['topic']}-"
                                         f"{e['partition']} offset {e['offset']} after offset {before['offset']}",
                                         [before, e]))
            last[key] = e


def check_transactional_reads(events, outcomes, anomalies):
    sends = {e["value"]: e for e in events if e["type"] == "txn_send"}
    commit_asked = {e["txn"]: e for e in events if e["type"] == "txn_commit_invoke"}
    for e in events:
        if e["type"] not in ("poll", "final_read") or e.get("isolation") != "read_committed":
            continue
        sent = sends.get(e["value"])
        if sent is None:
            continue
        txn = sent["txn"]
        if outcomes[txn] == "aborted":
            anomalies.append(Anomaly("aborted-read", f"read_committed {e.get('reader', 'final read')} was served "
                                     f"{e['value']!r} of aborted {txn}", [sent, e]))
        elif txn in commit_asked and e["t"] < commit_asked[txn]["t"]:
            anomalies.append(Anomaly("precommitted-read", f"{e.get('reader', 'final read')} was served {e['value']!r} before "
                                     f"the commit of {txn} was asked for", [sent, e, commit_asked[txn]]))


def _commits(events, outcomes):
    """Every commit that may have taken effect: (group, topic, partition, offset, t_invoke, t_done)."""
    out = []
    done = {e["txn"]: e["t"] for e in events if e["type"] == "txn_commit_ok"}
    answered = {(e["group"], e["topic"], e["partition"], e["offset"], e["t_invoke"]) for e in events
                if e["type"] == "offset_commit"}
    for e in events:
        if e["type"] == "offset_commit_invoke":
            key = (e["group"], e["topic"], e["partition"], e["offset"], e["t_invoke"])
            if key not in answered:  # its client died before the outcome: unknown
                out.append(key + (float("inf"),))
        elif e["type"] == "offset_commit" and e["ok"] is not False:
            out.append((e["group"], e["topic"], e["partition"], e["offset"], e["t_invoke"],
                        e["t"] if e["ok"] else float("inf")))
        elif e["type"] == "txn_offsets" and outcomes.get(e["txn"]) in ("committed", "unknown"):
            for topic, partition, offset in e["offsets"]:
                out.append((e["group"], topic, partition, offset, e["t"], done.get(e["txn"], float("inf"))))
    return out


def check_committed_offsets(events, outcomes, anomalies):
    commits = _commits(events, outcomes)
    highest = {}  # (group, topic, partition) -> the answer with the highest offset so far
    for e in events:
        if e["type"] != "committed_seen" or e["offset"] < 0:
            continue
        key = (e["group"], e["topic"], e["partition"])
        top = highest.get(key)
        if top is None or e["offset"] >= top["offset"]:
            highest[key] = e
            continue
        # A commit of exactly this lower offset, asked before this answer and not finished
        # before the higher answer was asked for, explains it.
        explained = any(c[:4] == key + (e["offset"],) and c[4] < e["t"] and c[5] > top["t_invoke"]
                        for c in commits)
        if not explained:
            anomalies.append(Anomaly("committed-offset-backwards", f"group {key[0]} {key[1]}-{key[2]} committed "
                                     f"offset went from {top['offset']} to {e['offset']}", [top, e]))
        highest[key] = e  # report each drop once


def check_unseen(events, anomalies):
    """Only once the readers were given time to drain (a `drained` event): before that, a
    write not yet read is no anomaly. Returns the count, None when there was no drain."""
    if not any(e["type"] == "drained" for e in events):
        return None
    polled_topics = {e["topic"] for e in events if e["type"] == "poll"}
    polled = {(e["topic"], e["value"]) for e in events if e["type"] == "poll"}
    unseen = [e for e in events if e["type"] == "send_ok" and e["topic"] in polled_topics
              and (e["topic"], e["value"]) not in polled]
    if unseen:
        anomalies.append(Anomaly("unseen", f"{len(unseen)} acknowledged sends no reader was served, e.g. "
                                 f"{unseen[0]['value']!r}", unseen[:3]))
    return len(unseen)


def _longest_gap(start, end, times):
    """The longest stretch of [start, end] with no time of `times` in it."""
    points = [start] + [t for t in times if start < t < end] + [end]
    return max(b - a for a, b in zip(points, points[1:]))


def availability(events):
    """[{fault, id, seconds, longest_gap, worst_partition_gap}] per fault window, and a
    last entry for the whole run. `longest_gap`: no acknowledged send at all;
    `worst_partition_gap`: none in the one partition that waited longest (a fault on one
    leader stalls its partitions while the others carry on)."""
    acks, by_partition = [], defaultdict(list)
    for e in events:
        if e["type"] == "send_ok":
            acks.append(e["t"])
            by_partition[(e["topic"], e["partition"])].append(e["t"])
    starts = {e["id"]: e for e in events if e["type"] == "fault_start"}
    windows = [(starts[e["id"]], e["t"]) for e in events if e["type"] == "fault_end" and e["id"] in starts]
    figures = []
    for start, end in windows:
        worst = max((_longest_gap(start["t"], end, times) for times in by_partition.values()), default=0.0)
        figures.append({"fault": start["fault"], "id": start["id"], "seconds": round(end - start["t"], 2),
                        "longest_gap": round(_longest_gap(start["t"], end, acks), 2),
                        "worst_partition_gap": round(worst, 2)})
    if len(acks) > 1:
        worst = max(_longest_gap(acks[0], acks[-1], times) for times in by_partition.values())
        figures.append({"fault": "whole run", "id": None, "seconds": round(acks[-1] - acks[0], 2),
                        "longest_gap": round(_longest_gap(acks[0], acks[-1], acks), 2),
                        "worst_partition_gap": round(worst, 2)})
    return figures


def check(events):
    """The anomalies of a history (events in time order), with counts and availability."""
    outcomes = transaction_outcomes(events)
    anomalies = []
    check_lost_and_duplicates(events, outcomes, anomalies)
    check_offsets(events, anomalies)
    check_send_order(events, anomalies)
    check_poll_order(events, anomalies)
    check_transactional_reads(events, outcomes, anomalies)
    check_committed_offsets(events, outcomes, anomalies)
    unseen = check_unseen(events, anomalies)
    counts = defaultdict(int)
    for e in events:
        counts[e["type"]] += 1
    stats = {"events": len(events), "acknowledged": counts["send_ok"], "send_failed": counts["send_fail"],
             "polled": counts["poll"], "final_read": counts["final_read"], "faults": counts["fault_start"],
             "unseen": unseen, "transactions": dict(sorted(_tally(outcomes.values()).items()))}
    return Result(anomalies, stats, availability(events))


def _tally(values):
    out = defaultdict(int)
    for v in values:
        out[v] += 1
    return out


def excerpt(anomaly, events):
    """The anomaly's own events, plus the last fault that began before the first of them
    (its start and end): what was going on when it happened; for a duplicate, the
    producers' epoch bumps before it. As lines, in time order."""
    shown = list(anomaly.events)
    if shown:
        first = min(e["t"] for e in shown)
        began = [e for e in events if e["type"] == "fault_start" and e["t"] <= first]
        if began:
            shown += [e for e in events if e["type"] in ("fault_start", "fault_end") and e["id"] == began[-1]["id"]]
        if anomaly.kind == "duplicate":
            last = max(e["t"] for e in anomaly.events)
            shown += [e for e in events if e["type"] == "client_epoch_bump" and first - 60 <= e["t"] <= last]
    shown.sort(key=lambda e: e["t"])
    return [json.dumps(e, sort_keys=True) for e in shown]


def send_failures(events):
    """One line per error that failed sends, with the faults under way at its first (or
    the last one that ended before it): a failure the broker answered (e.g.
    INVALID_TIMESTAMP while a node's clock is set back beyond
    `message.timestamp.after.max.ms`, as Kafka rejects it; librdkafka reports each of
    several refused records of one batch as INVALID_RECORD) is also the usual cause of
    an idempotent producer's epoch bump (`message sequence gap`)."""
    active, first, counts = {}, {}, defaultdict(int)
    ended = None  # (fault, id, t) of the last fault that ended
    for e in sorted(events, key=lambda e: e["t"]):
        if e["type"] == "fault_start":
            active[e["id"]] = e["fault"]
        elif e["type"] == "fault_end":
            name = active.pop(e["id"], e["fault"])
            ended = (name, e["id"], e["t"])
        elif e["type"] == "send_fail":
            error = str(e.get("error"))
            code = re.search(r"code=([A-Z_]+)", error)
            key = code.group(1) if code else error[:80]
            counts[key] += 1
            if key not in first:
                under_way = sorted(f"{name} {fid}" for fid, name in active.items())
                if under_way:
                    first[key] = "while " + ", ".join(under_way)
                elif ended:
                    first[key] = f"{e['t'] - ended[2]:.1f} s after {ended[0]} {ended[1]} ended"
                else:
                    first[key] = "while no fault"
    return [f"send failures: {key} {n} (first {first[key]})"
            for key, n in sorted(counts.items(), key=lambda kv: -kv[1])]


def report(result, events):
    """A human-readable summary: counts, availability, then each anomaly with its excerpt."""
    lines = [f"history: {json.dumps(result.stats, sort_keys=True)}"]
    for fig in result.availability:
        lines.append(f"availability: {fig['fault']} {fig['id'] or ''} lasted {fig['seconds']} s, "
                     f"longest write gap {fig['longest_gap']} s, in one partition {fig['worst_partition_gap']} s")
    lines += [f"fatal client error: {e['client']}: {e['error']} (code {e['code']})"
              for e in events if e["type"] == "client_error" and e["fatal"]]
    lines += [f"slow consumer close: {e['client']} took {e['seconds']} s"
              for e in events if e["type"] == "client_closed" and e["seconds"] > 10]
    lines += send_failures(events)
    lines += [f"producer epoch bump: {e['client']}: {e['message']}"
              for e in events if e["type"] == "client_epoch_bump"]
    lines += [f"consumer close never returned: {e['client']} ({e['cause']}: a client bug, not counted as a run error)"
              for e in events if e["type"] == "client_stuck"]
    if not result.anomalies:
        lines.append("no anomaly")
    for a in result.anomalies:
        lines.append(f"ANOMALY {a.kind}: {a.message}")
        lines += ["    " + line for line in excerpt(a, events)]
    return "\n".join(lines)
