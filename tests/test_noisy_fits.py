"""Does a ping-pong whose times no line fits (a loaded machine: a larger message came back faster)
keep the rest of notebook 02's tables and figure, saying which run could not be fitted?"""

from __future__ import annotations

import math

import pandas as pd

from hpclab.analysis import transports
from hpclab.plots import figures


def _run(label, run_id, times):
    sizes = [0, 8192, 65536, 1 << 20]
    return pd.DataFrame({"label": label, "run_id": run_id, "transport": label, "bytes": sizes, "t_usec": times,
                         "mbytes_per_sec": [0.0] + [b / t for b, t in zip(sizes[1:], times[1:])]})


def _table():
    good = [_run("sm", f"g{i}", [0.3, 2.0, 10.0, 150.0 + i]) for i in range(3)]
    noisy = _run("tcp", "n0", [5.0, 900.0, 40.0, 30.0])   # time falls with size: no line
    return pd.concat([*good, noisy, _run("tcp", "n1", [5.0, 20.0, 60.0, 700.0])], ignore_index=True)


def test_per_run_keeps_the_unfitted_run_with_its_reason():
    runs = transports.per_run(_table())
    bad = runs.set_index("run_id").loc["n0"]
    assert math.isnan(bad["bandwidth_mb_s"]) and "does not grow with message size" in bad["fit_problem"]
    assert runs.set_index("run_id").loc["g0", "fit_problem"] == ""
    summary = transports.summary(_table())
    assert summary.loc["tcp", "bandwidth_mb_s_median"] > 0   # the other tcp run still counts


def test_the_figure_draws_the_points_of_a_group_no_line_fits():
    table = _table()
    noisy = table[table["run_id"].isin(["g0", "n0"])]
    fig = figures.latency_bandwidth(noisy, by="transport", size_range=(8192, 1 << 20))
    # one legend below the panels (none inside a panel, where it would cover points)
    assert all(ax.get_legend() is None for ax in fig.axes) and len(fig.legends) == 1
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(lab.startswith("tcp: no line fits (time does not grow") for lab in labels)
    assert any(lab.startswith("sm: L = ") for lab in labels)
