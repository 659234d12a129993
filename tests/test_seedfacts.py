"""Quoted seed figures are internally consistent and line up with our own tables."""

from hpclab.core import seedfacts


def test_quoted_pingpong_bandwidth_matches_its_own_times():
    """Is each quoted IMB bandwidth the quoted size over the quoted time (MB = 10^6 B), within print rounding?"""
    df = seedfacts.pingpong_2019().query("bytes > 1000")
    ratio = df["bytes"] / df["t_usec"] / df["mbytes_per_sec"]
    assert ((ratio - 1).abs() < 0.01).all()


def test_quoted_imbalance_components_are_positive():
    """Does every quoted imbalance component have a positive value for each process grid?"""
    df = seedfacts.imbalance_2014().drop(columns="source")
    assert (df > 0).all().all() and list(df.index) == ["2D 24x16", "1D 384x1", "1D 1x384"]


def test_configure_comparison_uses_our_transport_names():
    """Do the talk's transport names map onto ours, so that both columns fill the same rows?"""
    import pandas as pd

    ours = pd.DataFrame({"transport": ["TCP", "Open UCX", "Intel Omni-Path (PSM2)"], "built": [True, True, False]})
    table = seedfacts.configure_summary_comparison(ours)
    assert table.loc["Intel Omni-Path (PSM2)"].tolist() == ["no", "yes"]
    assert table.loc["TCP"].tolist() == ["yes", "yes"]


def test_quoted_refined_diagram_splits_the_first_diagram_imbalance():
    """Do the quoted load imbalance and dependency add up to the 'Imbalance' of the talk's first
    diagram (0.714621, 0.790855, 1.68776 s), as the refined diagram claims to split it?"""
    df = seedfacts.imbalance_2014()
    first = {"2D 24x16": 0.714621, "1D 384x1": 0.790855, "1D 1x384": 1.68776}
    for grid, imbalance in first.items():
        assert abs(df.loc[grid, "load imbalance"] + df.loc[grid, "dependency"] - imbalance) < 1e-5


def test_quoted_seconds_are_sums_over_ranks():
    """Per rank and iteration, does the 2D run last about as long as the seed's timeline of one
    iteration (within 10 %), which only the summed-over-ranks reading allows?"""
    per = seedfacts.imbalance_2014_per_rank_iteration().drop(columns="source")
    total = per.loc["2D 24x16"].sum()
    assert abs(total / seedfacts.ITERATION_2D_TIMELINE_MS_2014 - 1) < 0.1
    seconds = seedfacts.imbalance_2014().drop(columns="source").loc["2D 24x16"].sum()
    per_rank_reading_ms = seconds * 1e3 / seedfacts.POISSON_2014["iterations"]
    assert per_rank_reading_ms > 100 * seedfacts.ITERATION_2D_TIMELINE_MS_2014
