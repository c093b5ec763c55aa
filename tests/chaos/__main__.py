"""tidelog-chaos from the command line (run from the repository root, with the venv that
holds confluent-kafka; TIDELOG_BIN picks the broker binary):

    python -m tests.chaos run --seed 7 --seconds 60 [--nodes 3] [--rate 20] [--workdir DIR] [--no-netns]
                              [--without FAULT ...]
    python -m tests.chaos soak --hours 8 [--first-seed 1000] [--seconds 300] [--keep-going]
    python -m tests.chaos check DIR        (check a run's recorded history again)

`run` exits 0 when the checker found no anomaly and the run completed, 1 otherwise.
`soak` runs consecutive seeds until the hours are spent, each in a process of its own
(a client stuck in a known librdkafka bug ends with its run), and stops at the first run
with an anomaly or an error, or with `--keep-going` lists the failed seeds at the end;
a failed run's directory (history, node logs, report) is kept.
"""

import argparse
import faulthandler
import os
import signal
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import checker
from .history import load
from .runner import Options, run


def run_one(seed, seconds, nodes, rate, netns, without, workdir=None, keep=False):
    workdir = Path(workdir or tempfile.mkdtemp(prefix=f"tidelog-chaos-{seed}-"))
    outcome = run(Options(seed=seed, seconds=seconds, workdir=workdir, nodes=nodes, rate=rate, netns=netns,
                          without=tuple(without)))
    print(outcome.report, flush=True)
    failed = bool(outcome.result.anomalies or outcome.errors)
    if failed or keep:
        print(f"history and logs kept in {workdir}", flush=True)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return failed


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tidelog-chaos")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "soak"):
        p = sub.add_parser(name)
        p.add_argument("--nodes", type=int, default=3)
        p.add_argument("--rate", type=float, default=20.0, help="sends per second per producer")
        p.add_argument("--no-netns", action="store_true", help="no network namespaces (no partitions)")
        p.add_argument("--without", action="append", default=[], metavar="FAULT",
                       help="leave this fault out (repeatable), e.g. disk-eio")
    run_p, soak_p = sub.choices["run"], sub.choices["soak"]
    run_p.add_argument("--seed", type=int, required=True)
    run_p.add_argument("--seconds", type=float, default=60)
    run_p.add_argument("--workdir")
    run_p.add_argument("--keep", action="store_true", help="keep the run's directory even when it passed")
    soak_p.add_argument("--hours", type=float, required=True)
    soak_p.add_argument("--first-seed", type=int, default=1000)
    soak_p.add_argument("--seconds", type=float, default=300, help="fault phase of each run")
    soak_p.add_argument("--keep-going", action="store_true", help="go on after a failed run")
    check_p = sub.add_parser("check")
    check_p.add_argument("workdir")
    args = parser.parse_args(argv)
    # A run that stops making progress: `kill -USR1 <pid>` prints every thread's stack.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # SIGTERM (a CI timeout) unwinds through the runner's cleanup: nodes killed, namespaces gone.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    if args.command == "check":
        paths = sorted(Path(args.workdir).glob("*history.jsonl"))
        events = load(*paths)
        result = checker.check(events)
        print(checker.report(result, events))
        return 1 if result.anomalies else 0
    if args.command == "run":
        return int(run_one(args.seed, args.seconds, args.nodes, args.rate, not args.no_netns, args.without,
                           args.workdir, args.keep))
    deadline = time.monotonic() + args.hours * 3600
    seed, failed = args.first_seed, []
    while time.monotonic() < deadline:
        print(f"=== soak: seed {seed}", flush=True)
        if soak_run(seed, args):
            failed.append(seed)
            if not args.keep_going:
                return 1
        seed += 1
    print(f"=== soak: seeds {args.first_seed}-{seed - 1}, failed: {failed or 'none'}", flush=True)
    return 1 if failed else 0


# A run's faults, healing, draining and final reads, with room to spare.
SOAK_RUN_SLACK_S = 1800


def soak_run(seed, args):
    """One seed of a soak in a child process; True when it failed."""
    command = [sys.executable, "-m", "tests.chaos", "run", "--seed", str(seed), "--seconds", str(args.seconds),
               "--nodes", str(args.nodes), "--rate", str(args.rate)]
    command += ["--no-netns"] if args.no_netns else []
    for fault in args.without:
        command += ["--without", fault]
    child = subprocess.Popen(command)
    try:
        return child.wait(timeout=args.seconds + SOAK_RUN_SLACK_S) != 0
    except subprocess.TimeoutExpired:
        print(f"=== soak: seed {seed} did not finish in time; stopping it", flush=True)
        return True
    finally:  # also when the soak itself is told to stop
        if child.poll() is None:
            child.terminate()  # SIGTERM unwinds through the runner's cleanup
            try:
                child.wait(timeout=120)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Not sys.exit: a consumer stuck in librdkafka's close() (a recorded client bug) must
    # not keep the process from ending.
    os._exit(code)
