"""The measured last-level cache (hpclab.analysis.effective_cache) and how the lessons size from it:
rows shaped like this VM's probe (hwloc: 480 MB L3; triad at memory speed from about 120 MB) and
like an honest node, on tmp files; no Slurm."""

from __future__ import annotations

import pandas as pd
import pytest

from hpclab.analysis import effective_cache as ec
from hpclab.analysis import roofline
from hpclab.core.errors import HpclabError
from hpclab.course import sizing
from hpclab.site import topology

MB = 10**6


def _rows(pairs):
    return [{"bytes": b * MB, "triad_mb_s": r, "run_id": f"r{i}"} for i, (b, r) in enumerate(pairs)]


VM = _rows([(7, 27000), (30, 27700), (120, 14387), (480, 13385), (1920, 12874)])


def test_the_smallest_size_at_memory_speed_and_every_larger_one():
    # 480 MB runs 4.0 % above the 1920 MB rate, 120 MB 11.8 % above: beyond the 10 % tolerance
    assert ec.MEMORY_TOLERANCE == 0.10
    assert ec.memory_speed_from(VM) == 480 * MB
    assert ec.memory_speed_from(list(reversed(VM))) == 480 * MB   # the order of the rows does not matter


def test_a_faster_size_above_a_slower_one_stops_the_run_down():
    rows = _rows([(30, 13000), (120, 27000), (480, 13100), (1920, 12900)])
    assert ec.memory_speed_from(rows) == 480 * MB
    assert ec.memory_speed_from(_rows([(30, 27000), (1920, 12900)])) == 0   # only the largest
    assert ec.memory_speed_from([]) == 0


def test_judge_takes_half_the_memory_speed_size_never_more_than_hwloc():
    p = ec.judge(480 * MB, "vm", VM)
    assert p.effective_llc == p.memory_from // ec.MARGIN_DIVISOR == 240 * MB < 480 * MB
    assert "hwloc reports a 480 MB" in p.sentence() and "as if it held 240 MB" in p.sentence()
    honest = ec.judge(32 * MB, "node", _rows([(0.5, 40000), (2, 38000), (8, 30000), (32, 14000), (128, 13000)]))
    assert honest.memory_from == 32 * MB and honest.effective_llc == 16 * MB
    wide = ec.judge(8 * MB, "node", _rows([(8, 14000), (32, 13000)]))
    assert wide.effective_llc == 4 * MB   # the probe found memory speed at hwloc's own size
    none = ec.judge(32 * MB, "node", _rows([(8, 30000), (32, 20000), (128, 13000)]))
    assert none.memory_from == 0 and none.effective_llc == 32 * MB and "keep hwloc's size" in none.sentence()


def test_probe_sizes_span_a_64th_to_four_times_the_cache():
    sizes = ec.probe_sizes(480 * MB)
    assert sizes[0] == 480 * MB // 64 and sizes[-1] == 4 * 480 * MB and sizes == sorted(sizes)
    with pytest.raises(HpclabError):
        ec.probe_sizes(0)


def test_the_record_is_used_only_for_a_node_with_the_same_hwloc_cache(tmp_path):
    path = tmp_path / "probe.json"
    p = ec.judge(480 * MB, "vm", VM)
    ec.save(p, path)
    assert ec.load(480 * MB, path) == p
    assert ec.load(32 * MB, path) is None and ec.load(480 * MB, tmp_path / "none.json") is None
    path.write_text("{not json")
    assert ec.load(480 * MB, path) is None


def test_apply_puts_the_measured_size_in_the_cache_table_and_keeps_hwlocs(tmp_path):
    path = tmp_path / "probe.json"
    ec.save(ec.judge(480 * MB, "vm", VM), path)
    caches = pd.DataFrame({"level": [1, 2, 3], "bytes": [32768, 2 * 2**20, 480 * MB], "count": [2, 2, 1]})
    out = ec.apply(caches, path)
    assert roofline.last_level_cache(out) == ec.load(480 * MB, path).effective_llc
    assert list(out["hwloc_bytes"]) == list(caches["bytes"]) and list(out["bytes"][:2]) == list(caches["bytes"][:2])
    other = caches.assign(bytes=[32768, 2 * 2**20, 32 * MB])
    assert roofline.last_level_cache(ec.apply(other, path)) == 32 * MB


def test_the_plan_sizes_from_the_probe_and_says_so():
    topo = topology.synthetic("pack:1 l3:1 core:2 pu:1")
    llc = roofline.last_level_cache(topo.caches)
    rows = [{"bytes": llc // 64, "triad_mb_s": 30000.0}, {"bytes": llc // 16, "triad_mb_s": 13000.0},
            {"bytes": llc // 4, "triad_mb_s": 12900.0}, {"bytes": llc, "triad_mb_s": 12900.0},
            {"bytes": 4 * llc, "triad_mb_s": 12800.0}]
    probe = ec.judge(llc, "vm", rows)
    assert probe.effective_llc == llc // 32
    plain, measured = sizing.plan(topo, llc_cap=0), sizing.plan(topo, llc_cap=0, probe=probe)
    assert measured.llc_bytes == probe.effective_llc and measured.stream_elements < plain.stream_elements
    assert "measured to use" in measured.case and "notebook 00" in measured.case and "measured to use" not in plain.case
    other = ec.judge(2 * llc, "elsewhere", [{**r, "bytes": 2 * r["bytes"]} for r in rows])
    assert sizing.plan(topo, llc_cap=0, probe=other).llc_bytes == plain.llc_bytes   # another node's probe
