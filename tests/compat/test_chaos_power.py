"""The simulated power cut's model (tests/chaos/power.py): the journal the fault shim
keeps of what is durable, and the cut of segment files back to it."""

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chaos.power import cut_unsynced_tails, durable_sizes  # noqa: E402


def test_the_journal_follows_syncs_and_renames(tmp_path):
    journal = tmp_path / "synced"
    journal.write_text("S\t10\t/d/a.tmp\nS\t5\t/d/x\nR\t/d/a.tmp\t/d/a\nS\t7\t/d/x\nR\t/d/gone\t/d/x2\n")
    assert durable_sizes(journal) == {"/d/a": 10, "/d/x": 7}
    assert durable_sizes(tmp_path / "missing") == {}


def test_a_power_cut_keeps_what_was_synced_and_may_lose_the_rest(tmp_path):
    data = tmp_path / "data"
    part = data / "orders-0"
    part.mkdir(parents=True)
    synced_seg = part / "00000000000000000000.log"
    synced_seg.write_bytes(b"a" * 100)
    active = part / "00000000000000000100.log"
    active.write_bytes(b"b" * 300)
    index = part / "00000000000000000100.index"
    index.write_bytes(b"i" * 64)
    quorum = data / "__cluster_metadata"
    quorum.mkdir()
    (quorum / "00000000000000000000.log").write_bytes(b"q" * 50)
    journal = tmp_path / "synced"
    journal.write_text(f"S\t100\t{synced_seg.resolve()}\nS\t120\t{active.resolve()}\n")
    lost_any = False
    for seed in range(20):
        active.write_bytes(b"b" * 300)
        cut, lost = cut_unsynced_tails(data, journal, random.Random(seed))
        assert synced_seg.stat().st_size == 100, "a synced segment keeps everything"
        assert 120 <= active.stat().st_size <= 300, "never below what was synced"
        assert active.stat().st_size == 300 - lost
        assert cut == (1 if lost else 0)
        lost_any |= lost > 0
    assert lost_any
    assert index.stat().st_size == 64, "only segment files are cut"
    assert (quorum / "00000000000000000000.log").stat().st_size == 50
