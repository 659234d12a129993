"""Notebook 04's sentences and self-checks: built from the learner's runs, flipping with them.

Hand-made run rows whose answer is known: efficiencies inside and outside the spread of the
single-rank runs, a loss in MPI and one in compute, and the roof quiz at, below and above its roof.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from hpclab.analysis import phrases, scaling
from hpclab.course import lesson_scaling, quiz

N, ITERS = 2048, 100


def _rows(one: list[float], two: list[float], mpi_share_two: float = 0.1) -> pd.DataFrame:
    """run_rows-like rows: 1-rank runs taking `one` seconds, 2-rank runs taking `two` seconds."""
    rows = [dict(label="1 rank", ranks=1, n=N, iterations=ITERS, seconds=s, comp_mean=s * 0.98,
                 mpi_mean=s * 0.02, lups=N * N * ITERS / s) for s in one]
    rows += [dict(label="2 ranks, grid 2x1", ranks=2, n=N, iterations=ITERS, seconds=s,
                  comp_mean=s * (1 - mpi_share_two), mpi_mean=s * mpi_share_two, lups=N * N * ITERS / s)
             for s in two]
    return pd.DataFrame(rows)


def test_an_efficiency_above_1_inside_the_single_rank_spread_is_not_called_a_gain():
    """1-rank runs spread 0.62-0.79 s; the 2-rank runs' per-rank rate lies inside it: the
    sentence says 'within the spread', with the numbers, whatever the fastest runs' ratio."""
    t = scaling.efficiency_against_spread(_rows([0.62, 0.70, 0.79], [0.30, 0.34, 0.36])).iloc[0]
    assert t["efficiency"] > 1
    assert "Efficiency 1.03: within the spread" in t["sentence"] and "3 runs" in t["sentence"]
    assert not t["total"].beyond_spread


def test_an_efficiency_below_1_beyond_the_spread_is_said_so_and_flips_with_the_runs():
    t = scaling.efficiency_against_spread(_rows([0.60, 0.61, 0.62], [0.40, 0.41, 0.42])).iloc[0]
    assert "Efficiency 0.75: below 1 beyond the spread" in t["sentence"]
    up = scaling.efficiency_against_spread(_rows([0.60, 0.61, 0.62], [0.25, 0.26, 0.27])).iloc[0]
    assert "above 1 beyond the spread" in up["sentence"]


def test_look_first_follows_the_runs():
    """Within the spread: 'neither'. A loss beyond the spread mostly in MPI: MPI; mostly in
    compute: the computation. The answer is one of the options quiz.ask accepts."""
    calm = lesson_scaling.look_first_quiz(_rows([0.62, 0.70, 0.79], [0.30, 0.34, 0.36]), "2 ranks, grid 2x1")
    assert calm["answer"].startswith("neither")
    mpi = lesson_scaling.look_first_quiz(_rows([0.60, 0.61, 0.62], [0.40, 0.41, 0.42], 0.3), "2 ranks, grid 2x1")
    assert mpi["answer"].startswith("communication")
    comp = lesson_scaling.look_first_quiz(_rows([0.60, 0.61, 0.62], [0.40, 0.41, 0.42], 0.0), "2 ranks, grid 2x1")
    assert comp["answer"].startswith("the computation")
    for q in (calm, mpi, comp):
        quiz.ask(**q)  # raises if the answer is not an option
        assert "3 runs" in q["why"]


def _judged(share: float, solver: list[float], roof: list[float]) -> dict:
    c = phrases.compare(solver, roof, a_name="the solver", b_name="bandwidth / 64 B", quantity="updates per second",
                        unit="M/s", lower_is_better=False)
    return {"share": share, "at_roof": c, "roof": c.b, "n": 3072, "text": c.sentence()}


def test_roof_quiz_answers_from_the_runs():
    """Below the roof beyond the spread: the rest of the way (1/share - 1); within the roof's
    noise: nothing measurable; above it: the roof is not the cap."""
    below = lesson_scaling.roof_quiz(_judged(0.72, [280, 285, 290], [395, 400, 405]))
    assert below["answer"] == "up to 39%: the rest of the way to the roof" and "72%" in below["question"]
    at = lesson_scaling.roof_quiz(_judged(0.98, [390, 395, 401], [395, 400, 405]))
    assert at["answer"].startswith("nothing measurable")
    above = lesson_scaling.roof_quiz(_judged(1.2, [480, 485, 490], [395, 400, 405]))
    assert above["answer"].startswith("the question does not apply")
    for q in (below, at, above):
        quiz.ask(**q)


def test_callgrind_slowdown_sentence_uses_the_plain_runs_spread():
    from hpclab.tools import profilers

    prof = profilers.Profile("callgrind", "instructions", Path("x"), [], pd.DataFrame(),
                             {"results": {"wall_time": 0.50}})
    said = profilers.slowdown(prof, [0.010, 0.011, 0.012])
    assert "11.0 ms (10.0-12.0, 3 runs)" in said and phrases.ratio(0.5, 0.011) in said


def test_notebook_04_takes_its_rank_counts_from_the_plan():
    """On the synthetic 2-core VM, 16-core socket and 2 x 32-core node (test_sizing's), are
    notebook 04's configurations the plan's rank counts, cut to the partition's cores, with a 2D
    grid from 4 ranks on?"""
    import shutil
    import sys

    import pytest

    from hpclab.course import sizing
    from hpclab.site.topology import synthetic
    sys.path.insert(0, str(Path(__file__).parent))
    from test_sizing import SOCKET16, TWO_BY_32, VM

    if shutil.which("lstopo") is None:
        pytest.skip("hwloc not installed")
    vm, s16, big = (sizing.plan(synthetic(d)) for d in (VM, SOCKET16, TWO_BY_32))
    counts = lambda configs: sorted({c["ntasks"] for c in configs})  # noqa: E731
    assert counts(lesson_scaling.configs_from_plan(vm, 2)) == [1, 2]
    assert counts(lesson_scaling.configs_from_plan(s16, 16)) == [1, 2, 4, 8, 16]
    assert counts(lesson_scaling.configs_from_plan(big, 64)) == big.scaling_ranks == [1, 2, 4, 8, 16, 32, 64]
    assert counts(lesson_scaling.configs_from_plan(s16, 4)) == [1, 2, 4]   # a partition of 4-core nodes
    assert {c["grid"] for c in lesson_scaling.configs_from_plan(s16, 16) if c["family"] == "2D"} == {"2x2", "4x2", "4x4"}
