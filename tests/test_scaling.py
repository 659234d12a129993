"""Scaling helpers: configurations that fit the cores, efficiencies, and the memory roofline."""

from __future__ import annotations

import pandas as pd
import pytest

from hpclab import scaling
from hpclab.errors import HpclabError


def test_configs_fit_the_cores_and_include_both_1d_grids():
    """Are only rank counts up to the core count used, with both 1D grids and a 2D grid from 4 ranks on?"""
    two = scaling.configs_for(2)
    assert [c["grid"] for c in two] == ["1x1", "2x1", "1x2"]
    eight = scaling.configs_for(8)
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
    """Is the roofline the Triad bandwidth divided by the bytes one update moves?"""
    assert scaling.roofline_lups(6400.0) == pytest.approx(6400e6 / 64)
    assert scaling.roofline_lups(4800.0, fused=True) == pytest.approx(1e8)
    with pytest.raises(HpclabError):
        scaling.roofline_lups(0.0)


def test_efficiency_by_family_is_empty_on_one_core():
    """Does a one-core partition give an empty efficiency table instead of an error?"""
    rows = pd.DataFrame([{"ranks": 1, "grid": "1x1", "seconds": 1.0, "comp_mean": 1.0}])
    assert scaling.efficiency_by_family(rows, scaling.configs_for(1)).empty
    two = pd.concat([rows, pd.DataFrame([{"ranks": 2, "grid": "2x1", "seconds": 0.6, "comp_mean": 0.5}])])
    e = scaling.efficiency_by_family(two, scaling.configs_for(2))
    assert list(e["family"].unique()) == ["1D Px1"]
