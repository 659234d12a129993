"""Comparing two traces (hpclab.trace.compare) on hand-built runs with known profiles and splits."""

import math

import pytest

from hpclab.trace.builder import TraceBuilder
from hpclab.trace.compare import compare_profiles, compare_splits
from hpclab.trace.split import split


def pair(slow: int, barrier: bool = False):
    """Rank 0 computes 1000 ns, rank 1 `slow` ns, then they Sendrecv (rank 0 waits slow - 1000)."""
    b = TraceBuilder(2)
    b[0].compute(1000).sendrecv(1, 8, 0, 1, 8, 0)
    b[1].compute(slow).sendrecv(0, 8, 0, 0, 8, 0)
    if barrier:
        for r in range(2):
            b[r].barrier()
    return b.build()


def test_profile_comparison_gives_calls_self_times_and_ratios():
    """Are calls and self times (summed over ranks) of both runs side by side, with ratio B / A,
    NaN for a function run A never spent time in, and the biggest function first?
    A: Application 1000 + 2000, Sendrecv 1000 (rank 0 waits). B: 1000 + 3000, Sendrecv 2000."""
    out = compare_profiles(pair(2000), pair(3000, barrier=True), ("A", "B"))
    assert out.index[0] == "Application"
    app = out.loc["Application"]
    assert (app["calls A"], app["calls B"], app["self_ns A"], app["self_ns B"]) == (2, 2, 3000, 4000)
    assert app["ratio"] == pytest.approx(4 / 3)
    assert out.loc["MPI_Sendrecv", "ratio"] == pytest.approx(2.0)
    bar = out.loc["MPI_Barrier"]
    assert (bar["calls A"], bar["calls B"]) == (0, 2) and math.isnan(bar["ratio"])
    assert list(out.columns) == ["calls A", "calls B", "self_ns A", "self_ns B", "ratio"]


def test_split_comparison_puts_both_runs_and_their_ratio_side_by_side():
    """Are the splits of both runs in one table with ratio B / A (NaN where A is 0)?
    A: T_real 2000, comp 1000/2000 -> T_load 500, load balance 3/4.
    B: T_real 3000, comp 1000/3000 -> T_load 1000, load balance 2/3."""
    a, b = pair(2000), pair(3000)
    out = compare_splits(a, split(b), ("before", "after"))
    assert list(out.columns) == ["before", "after", "ratio"]
    assert out.loc["T_real"].tolist() == pytest.approx([2000, 3000, 1.5])
    assert out.loc["T_load"].tolist() == pytest.approx([500, 1000, 2.0])
    assert out.loc["load_balance"].tolist() == pytest.approx([3 / 4, 2 / 3, 8 / 9])
    assert out.loc["T_depend", "before"] == 0 and math.isnan(out.loc["T_depend", "ratio"])
    assert out.loc["T_transfer", "before"] == 0
