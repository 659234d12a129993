"""The measured last-level cache (hpclab.analysis.effective_cache) and how the lessons size from it:
runs shaped like this VM's probe (hwloc: 315 MB L3; triad from cache at 79 MB, at memory speed from
315 MB) and like an honest node, decided by the course's statistics on paired rounds; tmp files,
no Slurm."""

from __future__ import annotations

import pandas as pd
import pytest

from hpclab.analysis import effective_cache as ec
from hpclab.analysis import roofline, stats
from hpclab.core.errors import HpclabError
from hpclab.course import sizing
from hpclab.site import topology

MB = 10**6
# run-to-run noise of a shared VM, the same six factors for every size (one per round)
NOISE = (1.00, 0.93, 1.06, 0.97, 1.03, 0.90, 1.02, 0.95)


def _rows(pairs, noise=NOISE):
    """Runs of every (size in MB, median rate) in rounds; the factors of a round differ a little
    between sizes, as on a real machine."""
    out = []
    for k, f in enumerate(noise, start=1):
        for i, (b, rate) in enumerate(pairs):
            out.append({"bytes": int(b * MB), "triad_mb_s": rate * f * (1 + 0.01 * ((i + k) % 3 - 1)),
                        "run_id": f"r{k}-{i}", "round": k})
    return out


VM = _rows([(20, 18000), (315, 12700), (630, 12600)])


def test_the_probe_runs_enough_rounds_to_decide_beside_one_disturbed_round():
    assert ec.ROUNDS == stats.min_runs(paired=True) + 2 == 8
    rows = [dict(r) for r in VM]
    for r in rows:   # round 3 of the cache size ran beside other work: slower than memory
        if r["bytes"] == 20 * MB and r["round"] == 3:
            r["triad_mb_s"] = 10000.0
    assert {d["bytes"]: d for d in ec.decisions(rows)}[20 * MB]["faster"]


def test_memory_speed_starts_above_the_largest_size_decided_faster():
    """A 43 % gain at 20 MB is decided faster; 315 MB within 1 % is not: memory from 315 MB."""
    decided = {d["bytes"]: d for d in ec.decisions(VM)}
    assert decided[20 * MB]["faster"] and decided[20 * MB]["outcome"] == "different"
    assert not decided[315 * MB]["faster"]
    assert ec.memory_speed_from(VM) == 315 * MB
    assert ec.memory_speed_from(list(reversed(VM))) == 315 * MB   # the order of the rows does not matter


def test_a_single_fast_run_does_not_make_a_size_faster():
    """One disturbed round of the reference (it ran 30 % slow) must not call 315 MB a cache."""
    rows = [dict(r) for r in VM]
    for r in rows:
        if r["bytes"] == 630 * MB and r["round"] == 2:
            r["triad_mb_s"] *= 0.7
    assert not {d["bytes"]: d for d in ec.decisions(rows)}[315 * MB]["faster"]
    assert ec.memory_speed_from(rows) == 315 * MB


def test_too_few_rounds_decide_nothing_and_keep_hwlocs_size():
    few = _rows([(20, 18000), (315, 12700), (630, 12600)], noise=NOISE[:3])
    assert all(d["outcome"] == "undecided" for d in ec.decisions(few))
    p = ec.judge(315 * MB, "vm", few)
    assert p.memory_from == 0 and p.effective_llc == 315 * MB and "keep hwloc's" in p.sentence()


def test_judge_takes_half_the_memory_speed_size_never_more_than_hwloc():
    p = ec.judge(315 * MB, "vm", VM)
    assert p.effective_llc == p.memory_from // ec.MARGIN_DIVISOR == 157 * MB + MB // 2 < 315 * MB
    s = p.sentence()
    assert s.startswith("20 MB of arrays ran 1.4") and "8 paired runs" in s and "158 MB of cache" in s
    honest = ec.judge(32 * MB, "node", _rows([(2, 30000), (32, 20000), (64, 13000)]))
    assert honest.memory_from == 64 * MB and honest.effective_llc == 32 * MB   # capped at hwloc's
    assert "hwloc's 32 MB" in honest.sentence()


def test_the_frame_says_what_each_size_was_decided():
    t = ec.judge(315 * MB, "vm", VM).frame()
    assert list(t["runs"]) == [8, 8, 8]
    assert list(t["decided"])[0].startswith("faster") and list(t["decided"])[-1].startswith("the reference")


def test_probe_sizes_span_a_sixteenth_to_twice_the_cache():
    sizes = ec.probe_sizes(480 * MB)
    assert sizes == [30 * MB, 480 * MB, 960 * MB]
    with pytest.raises(HpclabError):
        ec.probe_sizes(0)


def test_the_record_is_used_only_for_a_node_with_the_same_hwloc_cache(tmp_path):
    path = tmp_path / "probe.json"
    p = ec.judge(315 * MB, "vm", VM)
    ec.save(p, path)
    assert ec.load(315 * MB, path) == p
    assert ec.load(32 * MB, path) is None and ec.load(315 * MB, tmp_path / "none.json") is None
    path.write_text("{not json")
    assert ec.load(315 * MB, path) is None


def test_apply_puts_the_measured_size_in_the_cache_table_and_keeps_hwlocs(tmp_path):
    path = tmp_path / "probe.json"
    ec.save(ec.judge(315 * MB, "vm", VM), path)
    caches = pd.DataFrame({"level": [1, 2, 3], "bytes": [32768, 2 * 2**20, 315 * MB], "count": [2, 2, 1]})
    out = ec.apply(caches, path)
    assert roofline.last_level_cache(out) == ec.load(315 * MB, path).effective_llc
    assert list(out["hwloc_bytes"]) == list(caches["bytes"]) and list(out["bytes"][:2]) == list(caches["bytes"][:2])
    other = caches.assign(bytes=[32768, 2 * 2**20, 32 * MB])
    assert roofline.last_level_cache(ec.apply(other, path)) == 32 * MB


def test_the_plan_sizes_from_the_probe_and_says_so():
    topo = topology.synthetic("pack:1 l3:1 core:2 pu:1")
    llc = roofline.last_level_cache(topo.caches)
    rows = _rows([(llc / 16 / MB, 20000), (llc / MB, 12900), (2 * llc / MB, 12800)])
    probe = ec.judge(llc, "vm", rows)
    assert probe.effective_llc == probe.memory_from // 2 < llc
    plain, measured = sizing.plan(topo, llc_cap=0), sizing.plan(topo, llc_cap=0, probe=probe)
    assert measured.llc_bytes == probe.effective_llc and measured.stream_elements < plain.stream_elements
    assert "measured to use" in measured.case and "notebook 00" in measured.case and "measured to use" not in plain.case
    other = ec.judge(2 * llc, "elsewhere", [{**r, "bytes": 2 * r["bytes"]} for r in rows])
    assert sizing.plan(topo, llc_cap=0, probe=other).llc_bytes == plain.llc_bytes   # another node's probe


def test_in_room_mode_the_recordings_probe_sizes_the_lessons(tmp_path, monkeypatch):
    """A student's kernel in room mode sizes the lessons as the instructor's recording did: is
    the probe the recording holds read before the one in the checkout's build/, and is the
    build/'s read outside room mode or when the recording holds none?"""
    from hpclab.runs import recorded

    built, rec = tmp_path / "build-probe.json", tmp_path / "recording"
    rec.mkdir()
    monkeypatch.setattr(ec, "record_path", lambda: built)
    ec.save(ec.judge(315 * MB, "checkout", VM), built)
    monkeypatch.setenv(recorded.ENV, str(rec))
    assert ec.load(315 * MB).host == "checkout"          # the recording holds no probe
    ec.save(ec.judge(315 * MB, "instructor", VM), rec / recorded.PROBE)
    assert ec.load(315 * MB).host == "instructor"
    monkeypatch.delenv(recorded.ENV)
    assert ec.load(315 * MB).host == "checkout"
