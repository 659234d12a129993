"""The roofline's verdict and its sentences: built from the runs' numbers and their spread.

Recorded runs (tests/data/roof) and hand-made ones whose answer is known: the solver at its roof
with a drop from the cache, below it, above it, and too few runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from hpclab.analysis import roofline
from hpclab.course import fidelity

sys.path.insert(0, str(Path(__file__).parent))
from test_hotspots import _roof_data  # noqa: E402  (the recorded roof runs)

COUNTED = {"Copy": 16, "Scale": 16, "Add": 24, "Triad": 24, "Update": 16, "Sum": 8}


def _stream(ns: dict) -> dict:
    """A STREAM result.json whose kernels take `ns` ns per element (the others 1 ns)."""
    kernels = {k: {"best_mb_s": c / ns.get(k, 1.0) * 1e3} for k, c in COUNTED.items()}
    return {"results": {"kernels": kernels, "bytes_per_array": 8 * 10**8}}


def _rates(by_n: dict) -> pd.DataFrame:
    rows = [{"run_id": f"r{n}-{i}", "n": n, "variant": "separate", "lups": v * 1e6}
            for n, values in by_n.items() for i, v in enumerate(values)]
    return pd.DataFrame(rows)


def _caches():
    return _roof_data()[2]   # 32 MiB L3: n = 1024 in L3, n = 3072 from memory


# Triad at 1.25 ns per element: 19.2 GB/s counted, 25.6 GB/s moved, a roof of 400 M updates/s.
ROOF_RUNS = [_stream({"Triad": t}) for t in (1.25, 1.26, 1.27)]


def test_recorded_runs_give_partly_with_the_numbers_in_the_sentences():
    """On the recorded runs (in-cache grid within the noise of the memory-resident one, solver
    below the roof beyond the spread), is the verdict 'partly', and do the sentences carry the
    medians and the run counts?"""
    stream, runs, caches = _roof_data()
    judged = roofline.against_roof(roofline.poisson_rates(runs), stream, caches)
    assert judged["verdict"] == "partly" and not judged["beyond_spread"]
    assert "235" in judged["text"] and "3 runs" in judged["text"] and "within the noise" in judged["text"]
    row = fidelity.roofline(roofline.poisson_rates(runs), stream, caches, ["r1"])
    assert row.reproduced == "partly" and row.evidence == "measured"


def test_at_the_roof_after_a_drop_from_the_cache_is_yes():
    """In-cache runs beyond the spread above the memory-resident ones, which reach the roof's
    range: 'yes', a measured effect beyond the spread."""
    judged = roofline.against_roof(_rates({1024: [700, 720, 710], 3072: [395, 390, 398]}), ROOF_RUNS, _caches())
    assert judged["verdict"] == "yes" and judged["beyond_spread"]
    row = fidelity.roofline(_rates({1024: [700, 720, 710], 3072: [395, 390, 398]}), ROOF_RUNS, _caches())
    assert row.reproduced == "yes"


def test_below_the_roof_beyond_the_spread_is_partly_and_says_the_share():
    judged = roofline.against_roof(_rates({1024: [700, 720, 710], 3072: [290, 280, 300]}), ROOF_RUNS, _caches())
    assert judged["verdict"] == "partly" and f"{judged['share']:.0%}" in judged["why"]
    assert "lower than the STREAM runs' bandwidth / 64 B, beyond the spread" in judged["text"]


def test_above_the_roof_beyond_the_spread_is_no():
    judged = roofline.against_roof(_rates({1024: [700, 720, 710], 3072: [500, 510, 520]}), ROOF_RUNS, _caches())
    assert judged["verdict"] == "no" and "above" in judged["text"]


def test_two_runs_give_no_verdict():
    judged = roofline.against_roof(_rates({1024: [700, 720], 3072: [395, 398]}), ROOF_RUNS, _caches())
    assert judged["verdict"] == "not shown" and "cannot be told apart" in judged["text"]


def test_write_allocate_shown_on_recorded_runs_and_not_when_copy_matches_update():
    """Recorded runs: Copy takes about twice Update's time (beyond the spread): shown. Runs where
    Copy takes Update's time: not shown, and the sentence says the roof assumes it."""
    stream, _, _ = _roof_data()
    ev = roofline.write_allocate_evidence(stream)
    assert ev["shown"] and "Copy is 2.1x slower than Update" in ev["text"]
    assert ev["copy_over_sum"] == pytest.approx(0.856368 / 0.448602, rel=1e-3)
    same = [_stream({"Copy": c, "Update": u, "Sum": 0.2}) for c, u in ((0.26, 0.27), (0.27, 0.26), (0.265, 0.265))]
    ev2 = roofline.write_allocate_evidence(same)
    assert not ev2["shown"] and "assumption" in ev2["text"] and "within the noise" in ev2["text"]
    # the sentence flips with the sides: Update slower than Sum, beyond the spread
    slow = [_stream({"Copy": 0.40, "Update": u, "Sum": s}) for u, s in ((0.26, 0.20), (0.27, 0.21), (0.26, 0.20))]
    assert "Update is 30 % slower than Sum, beyond the spread of 3 runs" in roofline.write_allocate_evidence(slow)["text"]


def test_fusion_and_prefetch_sentences_follow_the_ranges():
    """Fused beyond the spread above separate at one size and within the noise at another; the
    prefetch sentence flips when the builds swap their rates."""
    rates = pd.concat([_rates({3072: [300, 305, 310], 1024: [700, 650, 720]}),
                       _rates({3072: [380, 390, 385], 1024: [690, 710, 660]}).assign(variant="fused")])
    said = roofline.fusion_sentences(rates, _caches())
    assert said[0].startswith("n = 1024 (L3)") and "within the noise" in said[0]
    assert said[1].startswith("n = 3072 (memory)") and "fused is 26 % higher than separate" in said[1]
    pf = pd.DataFrame({"build": ["prefetch (course build)"] * 3 + ["no prefetch"] * 3,
                       "lups": [5e8, 5.1e8, 5.2e8, 4e8, 4.1e8, 4.2e8]})
    assert roofline.prefetch_sentence(pf).startswith("The prefetching build is 24 % higher than the build without")
    flipped = pf.assign(build=pf["build"][::-1].to_numpy())
    assert roofline.prefetch_sentence(flipped).startswith("The prefetching build is 20 % lower than the build without")
