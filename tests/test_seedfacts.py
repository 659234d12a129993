"""Quoted seed figures are internally consistent and line up with our own tables."""

from hpclab import seedfacts


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
