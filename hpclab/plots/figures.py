"""The course's figures: one function per figure, each taking tidy tables and returning a Figure.

Tables come from hpclab.runs.parse (parse_run and the per-contract parsers). Figures are built with
matplotlib's object API (no pyplot state), so they work under the Agg backend, in notebooks and
in report scripts alike. Every figure uses the same colours (hpclab.plots.style: one per rank, one per transport),
labels its axes with units, and carries a provenance footnote (run id, host, date) so a saved PNG
still says where its numbers came from.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from hpclab.core.errors import HpclabError
from hpclab.analysis.fits import hockney_fit, scaling_table
from hpclab.runs import recorded
from hpclab.plots.style import COLORS, RANKS, RC, rank_color  # noqa: F401  (re-exported)

# The one palette and style (hpclab.plots.style); names kept here for the figure modules that use them.
_RANKS = RANKS


def new_figure(width: float = 8.0, height: float = 4.5) -> Figure:
    """An empty Figure in the course style; width, height in inches."""
    import matplotlib as mpl

    with mpl.rc_context(RC):
        fig = Figure(figsize=(width, height), layout="constrained")
    fig.set_dpi(110)
    return fig


def _styled(ax):
    # rc_context only applies at creation; apply the few settings that matter per Axes.
    ax.grid(True, alpha=0.3)
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)
    ax.tick_params(labelsize=8)
    return ax


def provenance_of(table: pd.DataFrame | None) -> list[dict]:
    """Provenance records of the runs behind a table: attrs["provenance"] or the run_id column."""
    if table is None:
        return []
    prov = table.attrs.get("provenance")
    if isinstance(prov, dict):
        return [prov]
    if isinstance(prov, list):
        return prov
    if "run_id" in table:
        return [{"run_id": r} for r in pd.unique(table["run_id"])]
    return []


def footnote(fig: Figure, provenance=None) -> None:
    """Write the provenance line at the bottom of fig.

    provenance: dict with run_id, host, date (any may be missing), a list of such dicts, or
    None ("provenance unknown" is written, so a figure never pretends to have a source).
    In room mode a run of the instructor's recording says so ("recorded by <instructor> on
    <date>", hpclab.runs.recorded.whose) in place of its date: a student must not take it for
    their own.
    """
    if isinstance(provenance, dict):
        provenance = [provenance]
    provenance = list(provenance or [])
    whose_each = [recorded.whose(p["run_id"]) if p.get("run_id") else None for p in provenance]
    # one instructor's runs of one day: said once, before the runs
    shared = whose_each[0] if len(provenance) > 1 and len(set(whose_each)) == 1 else None
    items = []
    for p, whose in zip(provenance, whose_each):
        run = f"run {p['run_id']}" + (f" {whose}" if whose and not shared else "") if p.get("run_id") else None
        date = str(p["date"]) if p.get("date") and not whose else None  # a recorded run's date is whose's
        items.append(", ".join(x for x in (run, p.get("host"), date) if x))
    items = [i for i in items if i]
    if not items:
        text = "provenance unknown (not read from a run folder)"
    elif len(items) > 3:
        text = "; ".join(items[:3]) + f"; and {len(items) - 3} more run(s)"
    else:
        text = "; ".join(items)
    if shared and items:
        text = f"runs {shared}: {text}"
    fig.text(0.005, 0.004, "data: " + text, fontsize=6.5, color=COLORS["note"], ha="left", va="bottom")
    # keep the axes clear of the footnote: constrained layout only arranges what is inside rect
    engine = fig.get_layout_engine()
    if engine is not None and hasattr(engine, "set"):
        margin = min(0.2, 0.2 / fig.get_figheight())
        engine.set(rect=(0, margin, 1, 1 - margin))


def _need(table: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    if not isinstance(table, pd.DataFrame):
        raise HpclabError(f"{what} needs a pandas DataFrame, got {type(table).__name__}",
                          "pass the table returned by hpclab.runs.parse.parse_run")
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise HpclabError(f"{what} needs the column(s) {', '.join(missing)}; the table has "
                          f"{', '.join(map(str, table.columns))}",
                          "pass the table returned by hpclab.runs.parse.parse_run for that kernel")
    if table.empty:
        raise HpclabError(f"{what}: the table is empty", "check that the run produced results")


def _size_label(nbytes: float) -> str:
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes:g} B"


# ----------------------------------------------------------------------------------------------
# Point to point: latency and bandwidth per transport with a Hockney fit
# ----------------------------------------------------------------------------------------------

def fit_transports(table: pd.DataFrame, by: str = "transport",
                   size_range: tuple[float, float] | None = None) -> pd.DataFrame:
    """Hockney fit per group of a pingpong table.

    table: rows with bytes, t_usec and the column `by` (default "transport");
    size_range: (min, max) bytes fitted. Returns a DataFrame (by, latency_us, bandwidth_mb_s,
    n_points, max_rel_residual, fit_problem) and keeps the HockneyFit objects in .attrs["fits"]
    (None for a group whose times no line fits: its row has NaNs and the fit's complaint).
    """
    _need(table, ["bytes", "t_usec", by], "fit_transports")
    rows, fits = [], {}
    for key, group in table.groupby(by, sort=False):
        try:
            fit = hockney_fit(group["bytes"], group["t_usec"], size_range=size_range)
        except HpclabError as exc:  # e.g. a loaded machine: a larger message came back faster
            fits[key] = None
            rows.append({by: key, "latency_us": np.nan, "bandwidth_mb_s": np.nan, "n_points": 0,
                         "max_rel_residual": np.nan, "fit_problem": exc.what})
            continue
        fits[key] = fit
        rows.append({by: key, "latency_us": fit.latency_us, "bandwidth_mb_s": fit.bandwidth_mb_s,
                     "n_points": len(fit.bytes),
                     "max_rel_residual": float(np.abs(fit.relative_residuals).max()), "fit_problem": ""})
    out = pd.DataFrame(rows)
    out.attrs["fits"] = fits
    return out


def latency_bandwidth(table: pd.DataFrame, by: str = "transport",
                      size_range: tuple[float, float] | None = None, provenance=None) -> Figure:
    """Latency and bandwidth against message size, one curve per transport, with Hockney fits.

    table: pingpong rows (bytes, t_usec, mbytes_per_sec, and `by`), e.g. several runs
    concatenated, each with its own transport; size_range: (min, max) bytes for the fit.
    Left: one-way time in microseconds (log-log) with the fitted line; middle: bandwidth in MB/s;
    right: the fit's relative residuals in percent; one legend above the panels (each curve's fit),
    so that no legend covers a point. Returns a Figure.
    """
    _need(table, ["bytes", "t_usec", "mbytes_per_sec", by], "latency_bandwidth")
    fits = fit_transports(table, by=by, size_range=size_range)
    groups = table[by].nunique()
    fig = new_figure(width=11, height=4.0 + 0.16 * (groups if groups > 4 else (groups + 1) // 2))
    ax_t, ax_bw, ax_r = (_styled(a) for a in fig.subplots(1, 3))
    for i, (key, group) in enumerate(table.groupby(by, sort=False)):
        color = _RANKS[i % len(_RANKS)]
        group = group.sort_values("bytes")
        fit = fits.attrs["fits"][key]
        positive = group[group["bytes"] > 0]
        if fit is None:  # the points only, and why there is no line
            problem = fits.loc[fits[by] == key, "fit_problem"].iloc[0]
            ax_t.plot(positive["bytes"], positive["t_usec"], "o", ms=3.5, color=color, label=f"{key}: no line fits ({problem})")
            ax_bw.plot(positive["bytes"], positive["mbytes_per_sec"], "o-", ms=3.5, lw=1, color=color, label=str(key))
            continue
        label = f"{key}: L = {fit.latency_us:.3g} us, BW = {fit.bandwidth_mb_s:.4g} MB/s"
        if fit.clamped:  # the free line crossed below zero: L held at 0 (see hpclab.analysis.fits)
            label += f" (L held at 0; free fit {fit.unconstrained_latency_us:.3g} us)"
        ax_t.plot(positive["bytes"], positive["t_usec"], "o", ms=3.5, color=color, label=label)
        m = np.geomspace(max(fit.bytes.min(), 1), fit.bytes.max(), 100)
        ax_t.plot(m, fit.predict(m), "-", color=color, lw=1, alpha=0.8)
        ax_bw.plot(positive["bytes"], positive["mbytes_per_sec"], "o-", ms=3.5, lw=1,
                   color=color, label=str(key))
        ax_bw.axhline(fit.bandwidth_mb_s, color=color, ls=":", lw=1)
        ax_r.plot(fit.bytes, 100 * fit.relative_residuals, "o-", ms=3, lw=0.8, color=color,
                  label=str(key))
    ax_t.set(xscale="log", yscale="log", xlabel="message size [bytes]",
             ylabel="one-way time t [us] (half round trip)", title="Latency")
    ax_bw.set(xscale="log", xlabel="message size [bytes]", ylabel="bandwidth [MB/s, 10^6 B/s]",
              title="Bandwidth (dotted: fitted BW)")
    ax_r.axhline(0, color=COLORS["axis"], lw=0.8)
    ax_r.set(xscale="log", xlabel="message size [bytes]",
             ylabel="(measured - fit) / measured [%]", title="Fit residuals")
    # one legend for the three panels, above them: a legend inside a panel covers its points, and
    # one below them meets the provenance footnote (the layout keeps the axes clear of both)
    lo, hi = (size_range if size_range else (table["bytes"].min(), table["bytes"].max()))
    handles, labels = ax_t.get_legend_handles_labels()
    # the legend's title says what the figure is (a suptitle and a legend above the panels would
    # take the same place in the layout)
    fig.legend(handles, labels, loc="outside upper center", ncol=1 if len(labels) > 4 else 2, fontsize=7,
               frameon=False, title=f"Point-to-point performance; fit t = L + m/BW over {_size_label(lo)}"
                                    f" .. {_size_label(hi)}", title_fontsize=9)
    footnote(fig, provenance if provenance is not None else provenance_of(table))
    return fig


# ----------------------------------------------------------------------------------------------
# STREAM: bandwidth per binding, per rank
# ----------------------------------------------------------------------------------------------

def stream_bandwidth(table: pd.DataFrame, by: str | None = None, function: str = "Triad",
                     provenance=None) -> Figure:
    """STREAM bandwidth for each binding, as bars stacked from each rank's best rate.

    table: STREAM rows (rank, function, mb_s, and the grouping column), e.g. parse_run tables of
    several runs concatenated; by: column naming the binding (default "binding" or "label"
    when every row has one, else "run_id"); function: Copy, Scale, Add or Triad. The bar height is the aggregate
    (sum over ranks, MB/s = 10^6 B/s); each segment is one rank. Returns a Figure.
    """
    if by is None:  # a binding label if the runs have one, else the run id
        by = next((c for c in ("binding", "label") if isinstance(table, pd.DataFrame)
                   and c in table and table[c].notna().all()), "run_id")
    _need(table, ["rank", "function", "mb_s", by], "stream_bandwidth")
    rows = table[table["function"] == function]
    if rows.empty:
        raise HpclabError(f"no STREAM rows for function {function!r}",
                          f"pick one of {', '.join(map(str, pd.unique(table['function'])))}")
    per = rows.groupby([by, "rank"], sort=False)["mb_s"].max().reset_index()
    groups = list(pd.unique(per[by]))
    fig = new_figure(width=max(5.0, 1.2 + 1.1 * len(groups)), height=4.2)
    ax = _styled(fig.add_subplot())
    seen = set()
    for x, key in enumerate(groups):
        bottom = 0.0
        for _, r in per[per[by] == key].sort_values("rank").iterrows():
            rank = int(r["rank"])
            ax.bar(x, r["mb_s"], bottom=bottom, color=rank_color(rank), edgecolor=COLORS["bar_edge"],
                   linewidth=0.6, width=0.7, label=f"rank {rank}" if rank not in seen else None)
            seen.add(rank)
            bottom += r["mb_s"]
        ax.text(x, bottom, f"{bottom:,.0f}", ha="center", va="bottom", fontsize=7)
    slanted = len(groups) > 4 or max(len(str(g)) for g in groups) > 10
    ax.set_xticks(range(len(groups)), [str(g) for g in groups], rotation=25 if slanted else 0,
                  ha="right" if slanted else "center")
    ax.set(xlabel=by, ylabel=f"{function} bandwidth [MB/s, 10^6 B/s]",
           title=f"STREAM {function}: aggregate of per-rank best rates")
    ax.legend(fontsize=7, ncol=1 if len(seen) <= 8 else 2, loc="upper left",
              bbox_to_anchor=(1.0, 1.0), frameon=False)
    footnote(fig, provenance if provenance is not None else provenance_of(table))
    return fig


def job_bandwidth(rates: pd.DataFrame, order: list[str] | None = None, title: str = "",
                  function: str = "Triad", provenance=None) -> Figure:
    """Whole-job STREAM bandwidth per case, the number a job really got, beside the sum of its
    ranks' own best rates, labelled as what it is.

    rates: hpclab.analysis.placement.job_rates() rows (label, run_id, job_mb_s, rank_sum_mb_s);
    order: the cases to draw, left to right (default: as they come). For each case a solid bar is
    the median whole-job rate over the runs, with every run drawn as a dot; a hatched bar beside it
    is the median sum of per-rank best rates (each rank timed on its own, possibly while another
    waited: not a rate the job achieved). A log axis when the values span more than 20x.
    Returns a Figure."""
    _need(rates, ["label", "job_mb_s"], "job_bandwidth")
    order = order or list(pd.unique(rates["label"]))
    fig = new_figure(width=max(5.5, 1.6 + 1.4 * len(order)), height=4.4)
    ax = _styled(fig.add_subplot())
    values = []
    for x, label in enumerate(order):
        r = rates[rates["label"] == label]
        if r.empty:
            raise HpclabError(f"no runs of case {label!r}", f"cases present: {', '.join(pd.unique(rates['label']))}")
        job = float(r["job_mb_s"].median())
        ax.bar(x - 0.18, job, width=0.36, color=rank_color(0), edgecolor=COLORS["bar_edge"],
               label="whole job (median; dots: runs)" if x == 0 else None)
        ax.plot([x - 0.18] * len(r), r["job_mb_s"], "o", color="black", ms=3)
        ax.text(x - 0.18, job, f"{job:,.0f}", ha="center", va="bottom", fontsize=7)
        values += list(r["job_mb_s"])
        if "rank_sum_mb_s" in r and r["rank_sum_mb_s"].notna().any():
            ranks = float(r["rank_sum_mb_s"].median())
            ax.bar(x + 0.18, ranks, width=0.36, color="white", edgecolor=rank_color(1), hatch="///",
                   label="sum of per-rank best rates (not a job rate)" if x == 0 else None)
            ax.text(x + 0.18, ranks, f"{ranks:,.0f}", ha="center", va="bottom", fontsize=7, color=COLORS["note"])
            values.append(ranks)
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > 20:
        ax.set_yscale("log")
    slanted = len(order) > 3 or max(len(str(o)) for o in order) > 14
    ax.set_xticks(range(len(order)), [str(o) for o in order], rotation=20 if slanted else 0,
                  ha="right" if slanted else "center", fontsize=7)
    ax.set(ylabel=f"{function} bandwidth [MB/s, 10^6 B/s]", title=title or f"STREAM {function}: whole-job bandwidth per case")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    footnote(fig, provenance if provenance is not None else provenance_of(rates))
    return fig


# ----------------------------------------------------------------------------------------------
# Scaling: speedup and efficiency against the ideal
# ----------------------------------------------------------------------------------------------

def speedup_efficiency(table: pd.DataFrame, ranks: str = "ranks", time: str = "seconds",
                       provenance=None) -> Figure:
    """Speedup and parallel efficiency against the number of ranks, with the ideal lines.

    table: one row per run (or per rank count) with a rank count (column `ranks`) and a time in
    seconds (column `time`); repeated runs per count are reduced to their median, as the course
    compares them. The smallest count is the baseline. Left: speedup T(p0)/T(p) against ideal
    p/p0; right: efficiency in percent. provenance: as footnote() takes it; by default the
    table's attrs["provenance"] or its run_id column. Returns a Figure.
    """
    _need(table, [ranks, time], "speedup_efficiency")
    medians = table.groupby(ranks, as_index=False)[time].median()
    sc = scaling_table(medians, ranks=ranks, time=time)
    fig = new_figure(width=9, height=3.8)
    ax_s, ax_e = (_styled(a) for a in fig.subplots(1, 2))
    p = sc["ranks"].to_numpy()
    ax_s.plot(p, sc["ideal_speedup"], "--", color=COLORS["ideal"], label="ideal")
    ax_s.plot(p, sc["speedup"], "o-", color=_RANKS[0], label="measured (median of runs)")
    ax_e.axhline(100, ls="--", color=COLORS["ideal"], label="ideal")
    ax_e.plot(p, 100 * sc["efficiency"], "o-", color=_RANKS[0], label="measured (median of runs)")
    for ax in (ax_s, ax_e):
        ax.set_xticks(p)
        ax.set_xlabel("MPI ranks")
        ax.legend(fontsize=7, loc="best")
    top = max(110.0, 10 * np.ceil(11 * float(sc["efficiency"].max())))
    ax_s.set(ylabel=f"speedup relative to {int(p[0])} rank(s)", title="Speedup")
    ax_e.set(ylabel="parallel efficiency [%]", title="Efficiency", ylim=(0, top))
    footnote(fig, provenance if provenance is not None else provenance_of(table))
    return fig


# ----------------------------------------------------------------------------------------------
# Where time goes: compute vs MPI per rank
# ----------------------------------------------------------------------------------------------

def compute_mpi_split(table: pd.DataFrame, provenance=None) -> Figure:
    """Stacked bars per rank: compute phases (blues) then MPI phases (warm colours), in seconds.

    table: Poisson timer rows (rank, phase, kind = compute | mpi, seconds), e.g. from parse_run.
    The title gives the MPI share of the summed time. Returns a Figure.
    """
    _need(table, ["rank", "phase", "kind", "seconds"], "compute_mpi_split")
    bad = set(table["kind"]) - {"compute", "mpi"}
    if bad:
        raise HpclabError(f"unknown timer kind(s) {sorted(bad)}", "kind must be compute or mpi")
    pivot = table.pivot_table(index="rank", columns="phase", values="seconds", aggfunc="sum")
    kinds = table.drop_duplicates("phase").set_index("phase")["kind"]
    order = list(pd.unique(table["phase"]))  # the kernel's own order (copy, red, black, ...)
    phases = ([p for p in order if kinds[p] == "compute"]
              + [p for p in order if kinds[p] == "mpi"])
    ranks = pivot.index.to_numpy()
    fig = new_figure(width=max(5.5, 2.5 + 0.45 * len(ranks)), height=4.2)
    ax = _styled(fig.add_subplot())
    bottom = np.zeros(len(ranks))
    counters = {"compute": 0, "mpi": 0}
    for phase in phases:
        kind = kinds[phase]
        palette = COLORS[kind]
        color = palette[counters[kind] % len(palette)]
        counters[kind] += 1
        values = pivot[phase].fillna(0).to_numpy()
        ax.bar(ranks, values, bottom=bottom, color=color, width=0.7, edgecolor=COLORS["bar_edge"],
               linewidth=0.5, label=f"{phase} ({kind})")
        bottom += values
    mpi = table[table["kind"] == "mpi"]["seconds"].sum()
    total = table["seconds"].sum()
    share = 100 * mpi / total if total > 0 else float("nan")
    ax.set_xticks(ranks)
    ax.set(xlabel="rank", ylabel="time [s]")
    ax.set_title(f"Time per rank: compute vs MPI\n(MPI: {share:.1f} % of the time summed over "
                 "ranks)", fontsize=9.5)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    footnote(fig, provenance if provenance is not None else provenance_of(table))
    return fig
