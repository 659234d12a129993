"""Scaling helpers: configurations that fit the cores, efficiencies, and the memory roofline."""

from __future__ import annotations

import pandas as pd
import pytest

from hpclab.analysis import scaling
from hpclab.course.lessons import scaling as lesson_scaling
from hpclab.core.errors import HpclabError


def test_configs_fit_the_cores_and_include_both_1d_grids():
    """Are only rank counts up to the core count used, with both 1D grids and a 2D grid from 4 ranks on?"""
    two = lesson_scaling.configs_for(2)
    assert [c["grid"] for c in two] == ["1x1", "2x1", "1x2"]
    eight = lesson_scaling.configs_for(8)
    assert max(c["ntasks"] for c in eight) == 8
    assert {"2x2", "4x2"} <= {c["grid"] for c in eight if c["family"] == "2D"}


def test_efficiency_separates_total_and_compute():
    """Is the compute efficiency computed from the compute time alone, and the total from the wall time?"""
    rows = pd.DataFrame([
        {"ranks": 1, "seconds": 10.0, "comp_mean": 10.0},
        {"ranks": 2, "seconds": 6.0, "comp_mean": 5.0},
    ])
    e = scaling.efficiency(rows).set_index("ranks")
    assert e.loc[2, "efficiency"] == pytest.approx(10 / 6 / 2)
    assert e.loc[2, "comp_efficiency"] == pytest.approx(1.0)


def test_roofline_from_triad_bandwidth():
    """Is the roofline the bandwidth (bytes really moved) divided by the bytes one update moves?"""
    assert scaling.roofline_lups(6400.0) == pytest.approx(6400e6 / 64)
    assert scaling.roofline_lups(4800.0, fused=True) == pytest.approx(1e8)
    with pytest.raises(HpclabError):
        scaling.roofline_lups(0.0)


def test_efficiency_by_family_is_empty_on_one_core():
    """Does a one-core partition give an empty efficiency table instead of an error?"""
    rows = pd.DataFrame([{"ranks": 1, "grid": "1x1", "seconds": 1.0, "comp_mean": 1.0}])
    assert scaling.efficiency_by_family(rows, lesson_scaling.configs_for(1)).empty
    two = pd.concat([rows, pd.DataFrame([{"ranks": 2, "grid": "2x1", "seconds": 0.6, "comp_mean": 0.5}])])
    e = scaling.efficiency_by_family(two, lesson_scaling.configs_for(2))
    assert list(e["family"].unique()) == ["1D Px1"]


def test_subdomains_say_where_each_ranks_share_lives():
    """Does a 2-rank run's subdomain of a 2048 grid (34 MB per rank, 67 MB for the node) compare
    against the caches, and a 1-rank run of a 512 grid show up as L3?"""
    caches = pd.DataFrame({"level": [1, 2, 3], "bytes": [32768, 1048576, 33554432], "count": [2, 2, 1]})
    rows = pd.DataFrame([
        {"label": "1 rank", "ranks": 1, "grid": "1x1", "n": 512, "comp_mean": 10.0},
        {"label": "1 rank", "ranks": 1, "grid": "1x1", "n": 512, "comp_mean": 12.0},
        {"label": "2 ranks", "ranks": 2, "grid": "2x1", "n": 2048, "comp_mean": 4.0}])
    t = scaling.subdomains(rows, caches).set_index("label")
    assert t.loc["1 rank", "rank_residency"] == "L3"
    assert t.loc["2 ranks", "rank_bytes"] == 2 * (1024 + 2) * (2048 + 2) * 8
    assert t.loc["2 ranks", "node_bytes"] == 2 * t.loc["2 ranks", "rank_bytes"]
    assert t.loc["2 ranks", "rank_residency"] == "partly cached"
    assert 0 < t.loc["2 ranks", "cacheable_share"] < 1
    assert t.loc["2 ranks", "comp_efficiency"] == pytest.approx(10.0 / (2 * 4.0))


def test_the_study_keeps_one_1d_cut_and_the_2d_grids():
    """Does notebook 04's study run one rank, the 1xP grids and, from 4 ranks on, the 2D grid,
    without the Px1 cut (fewer runs, no finding lost)?"""
    import shutil

    from hpclab.course import sizing
    from hpclab.site.topology import synthetic

    if shutil.which("lstopo") is None:
        pytest.skip("hwloc not installed")
    plan = sizing.plan(synthetic("pack:1 numa:1 core:4 pu:1"))
    grids = [c["grid"] for c in lesson_scaling.configs_from_plan(plan, 4, families=lesson_scaling.STUDY_FAMILIES)]
    assert grids == ["1x1", "1x2", "1x4", "2x2"]
