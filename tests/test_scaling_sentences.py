"""Notebook 04's sentences and self-checks: built from the learner's runs, flipping with them.

Hand-made run rows whose answer is known: efficiencies the statistics cannot tell from 1 and
ones they decide above or below it, a loss in MPI and one in compute, a gain, and the takeaways.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from hpclab.analysis import phrases, scaling
from hpclab.course import quiz
from hpclab.course.lessons import scaling as lesson_scaling

N, ITERS = 2048, 100


def _rows(one: list[float], two: list[float], mpi_share_two: float = 0.1) -> pd.DataFrame:
    """run_rows-like rows: 1-rank runs taking `one` seconds, 2-rank runs taking `two` seconds."""
    rows = [dict(label="1 rank", ranks=1, n=N, iterations=ITERS, seconds=s, comp_mean=s * 0.98,
                 mpi_mean=s * 0.02, lups=N * N * ITERS / s) for s in one]
    rows += [dict(label="2 ranks, grid 2x1", ranks=2, n=N, iterations=ITERS, seconds=s,
                  comp_mean=s * (1 - mpi_share_two), mpi_mean=s * mpi_share_two, lups=N * N * ITERS / s)
             for s in two]
    return pd.DataFrame(rows)


def test_an_efficiency_above_1_inside_the_single_rank_noise_is_not_called_a_gain():
    """1-rank runs spread 0.62-0.79 s; the 2-rank runs' per-rank rate lies inside it: the ratio's
    CI holds 1, so the table says 'undecided', whatever the estimate (above 1)."""
    t = scaling.efficiency_against_one_rank(_rows([0.62, 0.70, 0.79, 0.66], [0.30, 0.34, 0.36, 0.32])).iloc[0]
    assert t["efficiency"] > 1 and t["total"].outcome == "undecided" and not t["total"].beyond_spread
    table = lesson_scaling.efficiency_table(_rows([0.62, 0.70, 0.79, 0.66], [0.30, 0.34, 0.36, 0.32]))
    assert table.loc["2 ranks, grid 2x1: per-rank rate / 1 rank's", "outcome"] == "undecided"
    assert table.loc["2 ranks, grid 2x1: per-rank rate / 1 rank's", "runs"] == "4 + 4"


def test_an_efficiency_below_1_decided_is_said_so_and_flips_with_the_runs():
    below = _rows([0.60, 0.61, 0.62, 0.605], [0.40, 0.41, 0.42, 0.405])
    t = scaling.efficiency_against_one_rank(below).iloc[0]
    assert t["total"].outcome == "different" and t["efficiency"] == pytest.approx(0.75, abs=0.01)
    assert "below ideal scaling, decided: the ranks lost time" in lesson_scaling.speedup_takeaway(below, "2 ranks, grid 2x1")
    assert "needs a cause" not in lesson_scaling.speedup_takeaway(below, "2 ranks, grid 2x1")
    up = _rows([0.60, 0.61, 0.62, 0.605], [0.25, 0.26, 0.27, 0.255])
    assert "above ideal scaling, decided" in lesson_scaling.speedup_takeaway(up, "2 ranks, grid 2x1")
    ideal = _rows([0.60, 0.61, 0.62, 0.605], [0.30, 0.305, 0.31, 0.3025])
    assert "ideal within 5 %" in lesson_scaling.speedup_takeaway(ideal, "2 ranks, grid 2x1")


def test_efficiency_comes_from_the_medians():
    """Speedup and efficiency use the median time of each rank count, not its fastest run."""
    e = scaling.efficiency(_rows([0.50, 0.60, 0.70], [0.20, 0.30, 0.40])).set_index("ranks")
    assert e.loc[2, "seconds"] == pytest.approx(0.30) and e.loc[2, "speedup"] == pytest.approx(2.0)
    assert e.loc[2, "runs"] == 3


def test_look_first_follows_the_runs():
    """Not decided: 'neither'. A loss decided and mostly in MPI: MPI; mostly in compute: the
    computation. The answer is one of the options quiz.ask accepts."""
    calm = lesson_scaling.look_first_quiz(_rows([0.62, 0.70, 0.79, 0.66], [0.30, 0.34, 0.36, 0.32]), "2 ranks, grid 2x1")
    assert calm["answer"].startswith("neither")
    slow = ([0.60, 0.61, 0.62, 0.605], [0.40, 0.41, 0.42, 0.405])
    mpi = lesson_scaling.look_first_quiz(_rows(*slow, 0.3), "2 ranks, grid 2x1")
    assert mpi["answer"].startswith("communication")
    comp = lesson_scaling.look_first_quiz(_rows(*slow, 0.0), "2 ranks, grid 2x1")
    assert comp["answer"].startswith("the computation")
    gain = lesson_scaling.look_first_quiz(_rows([0.60, 0.61, 0.62, 0.605], [0.25, 0.26, 0.27, 0.255]), "2 ranks, grid 2x1")
    assert gain["answer"].startswith("neither")
    for q in (calm, mpi, comp, gain):
        quiz.ask(**q)  # raises if the answer is not an option
        assert "4 runs each" in q["why"]


def test_split_takeaway_gives_the_mpi_share_of_the_run():
    table = pd.DataFrame([{"rank": r, "phase": ph, "kind": k, "seconds": v} for r in (0, 1)
                          for ph, k, v in (("red", "compute", 0.3), ("black", "compute", 0.3), ("halo", "mpi", 0.3),
                                           ("allreduce", "mpi", 0.1))])
    said = lesson_scaling.split_takeaway(table, "2 ranks, grid 2x1")
    assert "MPI calls took 40 % of the ranks' summed time (halo the most)" in said


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
