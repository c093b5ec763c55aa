"""kcat (Debian's, built on librdkafka 2.0.2): produce, consume and `-L` metadata."""

import json
import shutil
import subprocess

import pytest

from compat_helpers import create_topic, unique

PARTITIONS = 3


@pytest.fixture(scope="module")
def kcat():
    path = shutil.which("kcat")
    if path is None:
        pytest.fail("kcat is not installed (./scripts/test installs it)", pytrace=False)
    return path


def run(cmd, stdin=b"", timeout=60):
    done = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.decode()[-2000:]}"
    return done.stdout.decode()


def consume_lines(kcat, bootstrap, topic, fmt):
    out = run([kcat, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-f", fmt])
    return out.splitlines()


@pytest.mark.parametrize("codec", ["none", "snappy", "zstd"])
def test_kcat_produce_then_consume(shared_broker, kcat, codec):
    topic = create_topic(shared_broker.bootstrap, unique(f"kcat-{codec}"), PARTITIONS)
    lines = [f"key{i % 17}:value number {i} {'x' * (i % 50)}" for i in range(500)]
    run([kcat, "-P", "-b", shared_broker.bootstrap, "-t", topic, "-K", ":", "-H", "origin=kcat",
         "-z", codec], stdin=("\n".join(lines) + "\n").encode())

    got = consume_lines(kcat, shared_broker.bootstrap, topic, "%p|%o|%k|%s|%h\\n")
    assert len(got) == len(lines), f"kcat read {len(got)} of {len(lines)} records"
    rows = [line.split("|") for line in got]
    assert sorted(f"{k}:{v}" for _, _, k, v, _ in rows) == sorted(lines)
    assert {h for *_, h in rows} == {"origin=kcat"}
    for partition in range(PARTITIONS):
        offsets = sorted(int(o) for p, o, *_ in rows if int(p) == partition)
        assert offsets == list(range(len(offsets))), f"partition {partition} offsets {offsets[:10]}..."
    # kcat's producer keeps per-partition order: a key's values appear in the order written.
    by_key = {}
    for p, o, k, v, _ in sorted(rows, key=lambda r: (int(r[0]), int(r[1]))):
        by_key.setdefault(k, []).append(int(v.split()[2]))
    assert all(ids == sorted(ids) for ids in by_key.values())


def test_kcat_metadata_listing(shared_broker, kcat):
    topic = create_topic(shared_broker.bootstrap, unique("kcat-meta"), PARTITIONS)
    meta = json.loads(run([kcat, "-L", "-J", "-b", shared_broker.bootstrap]))
    assert [(b["id"], b["name"]) for b in meta["brokers"]] == [(1, f"127.0.0.1:{shared_broker.port}")]
    assert meta.get("controllerid") == 1
    topics = {t["topic"]: t for t in meta["topics"]}
    assert topic in topics, f"{topic} missing from kcat -L"
    parts = sorted(topics[topic]["partitions"], key=lambda p: p["partition"])
    assert [p["partition"] for p in parts] == list(range(PARTITIONS))
    for part in parts:
        assert part["leader"] == 1
        assert [r["id"] for r in part["replicas"]] == [1]
        assert [r["id"] for r in part["isrs"]] == [1]

    one = json.loads(run([kcat, "-L", "-J", "-b", shared_broker.bootstrap, "-t", topic]))
    assert [t["topic"] for t in one["topics"]] == [topic]
