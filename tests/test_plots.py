"""Tests for hpclab.plots.figures: every figure is drawn from real run folders and saved as a PNG.

The run folders in tests/data/runs were captured on the course machine (tests/data/capture.sh).
Figures are checked for what holds on any machine: they draw something in every panel, label
their axes, keep legends off the data, read decades on log axes, give a rank or an MPI call one
colour everywhere, carry the provenance footnote and refuse tables they cannot draw.
"""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import matplotlib
import matplotlib.image
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex, to_rgb
from matplotlib.patches import Rectangle

from hpclab.plots import figures as plots, machine, style
from hpclab.plots.trace import timeline_figure
from hpclab.trace.poisson import poisson_trace
from hpclab.core.errors import HpclabError
from hpclab.runs.parse import parse_run, run_topology
from hpclab.site.topology import read_xml

matplotlib.use("Agg")  # the figures never need a display; this proves it

RUNS = Path(__file__).parent / "data" / "runs"
DATA = Path(__file__).parent / "data"


def runs(kernel):
    return sorted(p for p in RUNS.iterdir() if p.name.startswith(kernel + "-"))


def table(kernel):
    return pd.concat([parse_run(p, kernel) for p in runs(kernel)], ignore_index=True)


def covered_points(ax) -> int:
    """How many plotted points of `ax` (line markers, bar tops) lie under its legend, in display
    coordinates; 0 without a legend."""
    legend = ax.get_legend()
    if legend is None:
        return 0
    points = [ax.transData.transform(np.c_[line.get_xdata(), line.get_ydata()]) for line in ax.get_lines()
              if line.get_visible() and line.get_marker() not in (None, "", " ", "None")]
    points += [ax.transData.transform([(p.get_x() + p.get_width() / 2, p.get_y() + p.get_height())])
               for p in ax.patches if isinstance(p, Rectangle)]
    box = legend.get_window_extent()
    return sum(int(box.contains(x, y)) for x, y in np.concatenate(points or [np.zeros((0, 2))]))


def saved(fig, tmp_path, name) -> Path:
    """Save `fig` as a PNG and check what an empty or unreadable figure would break: the PNG is the
    whole figure, every panel shows something in colour (data are drawn in the palette's colours;
    an empty panel has only the greys of grid, spines and text), a panel with axes has both
    labelled, and no legend covers a plotted point."""
    path = tmp_path / f"{name}.png"
    fig.savefig(path)
    image = matplotlib.image.imread(path)[..., :3]
    height, width = image.shape[:2]
    scale = width / (fig.get_figwidth() * fig.dpi)  # window extents are in the figure's own pixels
    assert height == pytest.approx(fig.get_figheight() * fig.dpi * scale, abs=1), f"{name}: not the whole figure"
    for ax in fig.axes:
        panel = f"{name}, panel {ax.get_title() or ax.get_title(loc='left')!r}"
        x0, y0, x1, y1 = np.asarray(ax.get_window_extent().extents) * scale
        pixels = image[max(0, int(height - y1)):int(height - y0), max(0, int(x0)):int(x1)]
        coloured = int(((pixels.max(axis=2) - pixels.min(axis=2)) > 0.2).sum())
        assert coloured > 50, f"{panel}: nothing drawn in colour ({coloured} pixels)"
        if ax.axison:
            assert ax.get_xlabel() and ax.get_ylabel(), f"{panel}: an axis without a label"
        assert covered_points(ax) == 0, f"{panel}: the legend covers {covered_points(ax)} plotted point(s)"
    return path


def test_saved_refuses_an_empty_panel_and_a_legend_over_the_data(tmp_path):
    """Can the checks of saved() fail: an empty panel, and a legend drawn over the points?"""
    empty = plots.new_figure()
    ax = empty.add_subplot()
    ax.set(xlabel="x", ylabel="y")
    with pytest.raises(AssertionError, match="nothing drawn in colour"):
        saved(empty, tmp_path, "empty")
    hidden = plots.new_figure()
    ax = hidden.add_subplot()
    ax.plot([0.1, 0.2, 0.9], [0.9, 0.85, 0.1], "o", color=plots.rank_color(0), label="points under the legend")
    ax.set(xlabel="x", ylabel="y", xlim=(0, 1), ylim=(0, 1))
    ax.legend(loc="upper left", fontsize=20)
    with pytest.raises(AssertionError, match="the legend covers 2 plotted point"):
        saved(hidden, tmp_path, "hidden")


def footnote_of(fig) -> str:
    return " ".join(t.get_text() for t in fig.texts if t.get_text().startswith("data:"))


def test_latency_bandwidth_per_transport(tmp_path):
    """Is there one curve per transport in each panel, with labelled axes and the run ids?"""
    pp = table("pingpong")
    fig = plots.latency_bandwidth(pp, size_range=(4096, int(pp["bytes"].max())))
    saved(fig, tmp_path, "latency")
    ax_t, ax_bw, ax_r = fig.axes
    n = pp["transport"].nunique()
    assert len(ax_bw.get_lines()) == 2 * n  # measured curve and fitted-BW line per transport
    assert "[us]" in ax_t.get_ylabel() and "[MB/s" in ax_bw.get_ylabel()
    assert "[bytes]" in ax_r.get_xlabel()
    # sizes and times spanning decades are read on log axes
    sizes, times = pp.loc[pp["bytes"] > 0, "bytes"], pp["t_usec"]
    assert sizes.max() / sizes.min() > 100 and [ax.get_xscale() for ax in fig.axes] == ["log"] * 3
    assert times.max() / times.min() > 100 and ax_t.get_yscale() == "log"
    for run in pp["run_id"].unique():
        assert run in footnote_of(fig)


def test_fit_table_per_transport():
    """Does fit_transports give one positive-bandwidth fit per transport over large messages?"""
    pp = table("pingpong")
    fits = plots.fit_transports(pp, size_range=(65536, int(pp["bytes"].max())))
    assert sorted(fits["transport"]) == sorted(pp["transport"].unique())
    assert (fits["bandwidth_mb_s"] > 0).all()
    assert (fits["n_points"] >= 2).all()


def test_stream_bandwidth_per_binding(tmp_path):
    """Does each run get a bar stacked from its ranks, the stack summing to the aggregate?"""
    st = table("stream")
    fig = plots.stream_bandwidth(st, function="Triad")
    saved(fig, tmp_path, "stream")
    ax = fig.axes[0]
    heights = {}
    for patch in ax.patches:
        x = round(patch.get_x() + patch.get_width() / 2)
        heights[x] = heights.get(x, 0) + patch.get_height()
    groups = list(pd.unique(st["run_id"]))
    expected = st[st["function"] == "Triad"].groupby("run_id")["mb_s"].sum()
    for x, run in enumerate(groups):
        assert heights[x] == pytest.approx(expected[run], rel=1e-9)


def test_stream_bandwidth_refuses_unknown_function():
    """Does asking for a function STREAM does not have list the ones it has?"""
    with pytest.raises(HpclabError, match="no STREAM rows for function 'Dot'"):
        plots.stream_bandwidth(table("stream"), function="Dot")


def test_compute_mpi_split(tmp_path):
    """Are there as many bars per rank as timer phases, compute first, from a real run?"""
    po = parse_run(RUNS / "poisson-np2", "poisson")
    fig = plots.compute_mpi_split(po)
    saved(fig, tmp_path, "split")
    ax = fig.axes[0]
    assert len(ax.patches) == po["rank"].nunique() * po["phase"].nunique()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    kinds = [label.rsplit("(", 1)[1].rstrip(")") for label in labels]
    assert kinds == sorted(kinds)  # "compute" phases before "mpi" phases
    assert "poisson-np2" in footnote_of(fig)


def test_speedup_efficiency_from_real_runs(tmp_path):
    """Does a (ranks, seconds) table from real Poisson runs give speedup and efficiency panels?"""
    rows = []
    for run in runs("poisson"):
        t = parse_run(run, "poisson")
        rows.append({"ranks": t.attrs["config"]["ranks"], "seconds": t.attrs["summary"]["wall_time"],
                     "run_id": run.name})
    fig = plots.speedup_efficiency(pd.DataFrame(rows))
    saved(fig, tmp_path, "speedup")
    ax_s, ax_e = fig.axes
    ideal = ax_s.get_lines()[0]
    assert list(ideal.get_ydata()) == sorted({r["ranks"] for r in rows})  # baseline is 1 rank
    assert "efficiency" in ax_e.get_ylabel()


def test_topology_with_run_bindings(tmp_path):
    """Can the run's own topology be drawn with launcher binding and actual CPU side by side?"""
    run = RUNS / "stream-bind-core"
    st = parse_run(run, "stream")
    ranks = st.drop_duplicates("rank")
    launcher = pd.DataFrame({"rank": ranks["rank"], "cpus": ranks["bound_cpus"]})
    actual = pd.DataFrame({"rank": ranks["rank"], "cpus": [[c] for c in ranks["cpu"]]})
    fig = machine.topology_bindings(run_topology(run), {"launcher binding": launcher,
                                                      "CPU the rank ran on": actual},
                                  provenance=st.attrs["provenance"])
    saved(fig, tmp_path, "topology")
    assert len(fig.axes) == 2
    assert "stream-bind-core" in footnote_of(fig)


def test_topology_of_synthetic_two_socket_node(tmp_path):
    """Does a synthetic two-socket node draw with ranks spread over both packages?"""
    topo = read_xml(DATA / "lstopo_synthetic_2pack.xml")
    fig = machine.topology_bindings(topo, pd.DataFrame({"rank": [0, 1], "cpus": [[0, 1], [8, 9]]}))
    saved(fig, tmp_path, "synthetic")
    assert "provenance unknown" in footnote_of(fig)


@pytest.mark.parametrize("func,columns", [
    (plots.latency_bandwidth, ["bytes"]),
    (plots.stream_bandwidth, ["rank", "function"]),
    (plots.compute_mpi_split, ["rank", "phase"]),
    (plots.speedup_efficiency, ["ranks"]),
])
def test_plots_refuse_tables_without_their_columns(func, columns):
    """Does each plot say which columns it needs when given the wrong table?"""
    with pytest.raises(HpclabError, match="needs the column"):
        func(pd.DataFrame({c: [1] for c in columns}))


def test_plots_refuse_empty_tables():
    """Does an empty table give a message instead of an empty figure?"""
    empty = pd.DataFrame(columns=["rank", "phase", "kind", "seconds"])
    with pytest.raises(HpclabError, match="the table is empty"):
        plots.compute_mpi_split(empty)


def legend_colours(ax) -> dict[str, str]:
    """{legend label: its colour} of one panel."""
    legend = ax.get_legend()
    return {t.get_text(): to_hex(h.get_facecolor()) for t, h in zip(legend.get_texts(), legend.legend_handles)}


def test_a_rank_has_one_colour_in_every_figure_and_ranks_are_told_apart():
    """Does rank r get the same colour in the STREAM bars of every run and in the topology
    drawing, whichever ranks each figure shows (not the n-th colour for the n-th rank drawn), and
    do twelve ranks get twelve colours, neighbours far apart?"""
    ranks = range(12)
    st = pd.DataFrame([{"run_id": run, "rank": r, "function": "Triad", "mb_s": 1000.0 * (k + 1) + r}
                       for k, run in enumerate(("a", "b")) for r in ranks])
    bars = plots.stream_bandwidth(st, by="run_id").axes[0]
    segments: dict[int, set] = {}
    for patch in bars.patches:  # a segment's height tells its rank: 1000 (2000) + rank
        segments.setdefault(round(patch.get_height()) % 1000, set()).add(to_hex(patch.get_facecolor()))
    assert sorted(segments) == list(ranks) and all(len(c) == 1 for c in segments.values())
    in_bars = legend_colours(bars)
    assert all(in_bars[f"rank {r}"] in segments[r] for r in ranks)
    assert len(set(in_bars.values())) == len(ranks)
    rgb = [np.array(to_rgb(in_bars[f"rank {r}"])) for r in ranks]
    assert min(np.linalg.norm(a - b) for a, b in zip(rgb, rgb[1:])) > 0.25
    few = {3: [0], 5: [1], 11: [8]}  # three ranks, none of them first
    drawing = machine.topology_bindings(read_xml(DATA / "lstopo_synthetic_2pack.xml"), few).axes[0]
    in_drawing = legend_colours(drawing)
    assert in_drawing == {f"rank {r}": in_bars[f"rank {r}"] for r in few}
    filled = {to_hex(p.get_facecolor()) for p in drawing.patches if p.get_linewidth() == 0}
    assert filled == set(in_drawing.values())  # each bound PU is filled in its rank's colour


def test_binding_panels_of_a_threaded_run():
    """For one rank with two OpenMP threads, does the 'ran on' panel list both threads' CPUs?"""
    run = RUNS / "stream-1rank-2threads"
    t = parse_run(run, "stream")
    panels = machine.binding_panels(t)
    ran = panels["CPUs the rank and its threads ran on"]
    place = pd.DataFrame(t.attrs["placement"])
    assert ran["cpus"].iloc[0] == sorted(set(place[place["thread"].notna()]["cpu"]))
    assert not any(label.startswith("binding reported") for label in panels)  # no report asked


def test_run_bindings_figure_has_one_panel_per_view(tmp_path):
    """Does a run with mpirun --report-bindings give launcher, affinity and ran-on panels?"""
    fig = machine.run_bindings(RUNS / "stream-bind-core", "stream")
    saved(fig, tmp_path, "run_bindings")
    assert len(fig.axes) == 3
    assert "binding reported by mpirun" in fig.axes[0].get_title(loc="left")


# --- one palette, and figures only in the plots floor ---------------------------------------------

PACKAGE = Path(__file__).resolve().parents[1] / "hpclab"
HEX = re.compile(r"#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})")
# analysis/hotspots.py is being split (tools/profilers + analysis/roofline + a plots module): its
# figure still carries its own two colours until then.
NOT_YET = {"analysis/hotspots.py"}


def _modules(*floors):
    for floor in floors:
        for path in sorted((PACKAGE / floor).rglob("*.py")):
            rel = path.relative_to(PACKAGE).as_posix()
            if rel not in NOT_YET:
                yield rel, ast.parse(path.read_text())


def test_figure_colours_come_from_the_one_palette():
    """Does every figure module take its colours from hpclab.plots.style: no colour literal (hex
    string) and no colour map named outside it, in the plots, analysis, trace and tools floors?"""
    offenders = []
    for rel, tree in _modules("plots", "analysis", "trace", "tools"):
        if rel == "plots/style.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and HEX.fullmatch(node.value):
                offenders.append(f"{rel}:{node.lineno} colour {node.value}")
            if isinstance(node, ast.keyword) and node.arg == "cmap" and isinstance(node.value, ast.Constant):
                offenders.append(f"{rel}:{node.value.lineno} colour map {node.value.value!r}")
            if isinstance(node, ast.Attribute) and node.attr == "colormaps":
                offenders.append(f"{rel}:{node.lineno} matplotlib.colormaps")
    assert not offenders, "colours outside hpclab/plots/style.py:\n" + "\n".join(offenders)


# what only a lesson may do: submit jobs, bring virtual nodes up
RUNS_JOBS = ("hpclab.jobs", "hpclab.site.slurm", "hpclab.site.multinode", "hpclab.cluster.vnodes")


def test_analysis_and_trace_draw_and_print_nothing():
    """Do the analysis and trace floors stay pure: no matplotlib, no print, no job submission or
    virtual nodes (figures live in hpclab.plots, experiments and progress in hpclab.course)?"""
    offenders = []
    for rel, tree in _modules("analysis", "trace"):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                names = []
            offenders += [f"{rel}:{node.lineno} imports {n}" for n in names
                          if n.split(".")[0] == "matplotlib" or n.startswith(RUNS_JOBS)]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                offenders.append(f"{rel}:{node.lineno} print()")
    assert not offenders, "\n".join(offenders)


def test_the_palette_keeps_each_part_and_call_apart():
    """Does every part of a run's time get a colour of its own, and do the kernels' MPI calls
    and the first ranks get distinct colours?"""
    assert len(set(style.PART_COLORS.values())) == len(style.PART_COLORS) == 5
    calls = ["MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Sendrecv", "MPI_Waitall",
             "MPI_Allreduce", "MPI_Barrier"]
    assert len({style.call_color(c) for c in calls}) == len(calls)
    assert plots.rank_color(0) == style.rank_color(0) == style.TAB20[0]


def test_a_call_has_one_colour_in_every_timeline_and_in_every_process():
    """In the timelines of three Poisson exchanges (blocking, non-blocking, sendrecv), is a call
    they share drawn in one colour in all three, every call in a colour of its own and none in
    the compute bursts' colour? Does a call outside the palette's list get the same colour in
    another Python process (its slot comes from a stable hash, not Python's salted hash()),
    and never the colour of a listed call?"""
    seen: dict[str, set] = {}
    for exchange in ("blocking", "nonblocking", "sendrecv"):
        fig = timeline_figure(poisson_trace(2, 2, n=16, iterations=2, ns_per_point=2.0, exchange=exchange))
        for label, colour in legend_colours(fig.axes[0]).items():
            seen.setdefault(label, set()).add(colour)
    assert {"MPI_Allreduce", "MPI_Send", "MPI_Isend", "MPI_Sendrecv"} <= set(seen)
    assert all(len(c) == 1 for c in seen.values()), seen
    assert all(seen[c] == {to_hex(style.call_color(c))} for c in seen if c != "compute")
    colours = [c for (c,) in seen.values()]
    assert len(set(colours)) == len(colours)
    odd = ["MPI_Whatever", "MPI_Comm_spawn", "MPI_Win_fence", "MPI_Alltoallw"]
    here = [style.call_color(c) for c in odd]
    elsewhere = subprocess.run(
        [sys.executable, "-c", f"from hpclab.plots import style; print(*[style.call_color(c) for c in {odd!r}])"],
        capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "12345"}, check=True).stdout.split()
    assert elsewhere == here
    named = {style.call_color(c) for c in style.CALL_COLORS} | {style.call_color(c) for c in style._CALLS}
    assert not set(here) & named


def test_job_bandwidth_draws_the_job_rate_beside_the_rank_sum():
    """Does the whole-job figure draw one solid and one hatched bar per case, on a log axis when
    the rates span more than 20x, with the rank sum labelled as not a job rate?"""
    import pandas as pd

    from hpclab.plots import figures

    rates = pd.DataFrame([{"label": lab, "run_id": f"{lab}{i}", "job_mb_s": job * (1 + i / 100), "rank_sum_mb_s": rs}
                          for lab, job, rs in (("pitfall", 1200.0, 102000.0), ("fix", 60000.0, 61000.0))
                          for i in range(3)])
    fig = figures.job_bandwidth(rates, order=["pitfall", "fix"])
    ax = fig.axes[0]
    assert len(ax.patches) == 4 and ax.get_yscale() == "log"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("not a job rate" in t for t in labels) and any("whole job" in t for t in labels)
