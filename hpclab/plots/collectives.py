"""Figures of collective operations: each algorithm's time against the message size with the cost
model's line, and what numbering the ranks cyclically over the nodes does to each algorithm.

Tables come from the collectives lesson's `measured` (one row per run, algorithm, size and
placement) and hpclab.analysis.collectives' `predict`; colours from hpclab.plots.style.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from hpclab.analysis import collectives as model
from hpclab.plots.figures import _need, _size_label, _styled, footnote, new_figure, provenance_of
from hpclab.plots.style import COLORS, rank_color


def algorithm_times(times: pd.DataFrame, predicted: pd.DataFrame, library: str, order: str = "block",
                    names: dict | None = None, provenance=None) -> Figure:
    """One panel per operation: the slowest rank's time per call (median over rounds, whiskers
    min to max) of each forced algorithm against the message size, for one library and one
    placement, and the model's predicted time as a line in the same colour.

    times: rows with library, op, order, algorithm, bytes, t_max_usec (the lesson's measured());
    predicted: model.predict's table (op, order, algorithm, bytes, t_pred_usec), on a denser grid
    if wanted; names: {algorithm: label}. Returns a Figure."""
    _need(times, ["library", "op", "order", "algorithm", "bytes", "t_max_usec"], "algorithm_times")
    rows = times[(times["library"] == library) & (times["order"] == order) & (times["algorithm"] != "default")]
    ops = [op for op in model.ALGORITHMS if op in set(rows["op"])]
    names = names or {}
    fig = new_figure(width=11, height=4.2)
    axes = [_styled(a) for a in np.atleast_1d(fig.subplots(1, len(ops)))]
    for ax, op in zip(axes, ops):
        mine = rows[rows["op"] == op]
        for k, (alg, g) in enumerate(mine.groupby("algorithm", sort=False)):
            color = rank_color(k)
            s = g.groupby("bytes")["t_max_usec"].agg(["median", "min", "max"])
            ax.errorbar(s.index, s["median"], yerr=[s["median"] - s["min"], s["max"] - s["median"]], fmt="o", ms=4,
                        capsize=2, color=color, label=f"{names.get(alg, alg)} (measured)")
            line = predicted[(predicted["op"] == op) & (predicted["order"] == order) & (predicted["algorithm"] == alg)]
            line = line.sort_values("bytes")
            ax.plot(line["bytes"], line["t_pred_usec"], "--", lw=1, color=color, label=f"{names.get(alg, alg)} (model)")
        ax.set(xscale="log", yscale="log", xlabel="message size [bytes per rank]", ylabel="time per call [us]",
               title=f"MPI_{op.capitalize()}")
        ax.legend(fontsize=6.5, frameon=False)
    fig.suptitle(f"{library}, {order} numbering: measured (median, min-max over rounds) and the model's prediction")
    footnote(fig, provenance if provenance is not None else provenance_of(rows))
    return fig


def placement_ratios(decisions: pd.DataFrame, model_ratio: dict, nbytes: int, names: dict | None = None,
                     provenance=None) -> Figure:
    """One panel per operation: for each forced algorithm, the time of the cyclic numbering over
    the block one at `nbytes` (the statistics' ratio estimate, one point per library) and the
    model's ratio (a black bar). decisions: the lesson's placement_decisions (library, op,
    algorithm, ratio); model_ratio: {(op, algorithm): ratio}. Returns a Figure."""
    _need(decisions, ["library", "op", "algorithm", "ratio"], "placement_ratios")
    names = names or {}
    ops = [op for op in model.ALGORITHMS if op in set(decisions["op"])]
    libs = list(dict.fromkeys(decisions["library"]))
    fig = new_figure(width=11, height=3.8)
    axes = [_styled(a) for a in np.atleast_1d(fig.subplots(1, len(ops), sharey=True))]
    for ax, op in zip(axes, ops):
        algs = list(dict.fromkeys(decisions.loc[decisions["op"] == op, "algorithm"]))
        for i, alg in enumerate(algs):
            ax.plot([i - 0.3, i + 0.3], [model_ratio.get((op, alg), np.nan)] * 2, "-", color=COLORS["fit"], lw=2,
                    label="model" if i == 0 else None)
            for k, lib in enumerate(libs):
                r = decisions[(decisions["op"] == op) & (decisions["algorithm"] == alg) & (decisions["library"] == lib)]
                if len(r):
                    ax.plot(i - 0.2 + 0.4 * k / max(1, len(libs) - 1), r["ratio"].iloc[0], "o", ms=5, color=rank_color(k),
                            label=lib if i == 0 else None)
        ax.axhline(1.0, color=COLORS["axis"], lw=0.8)
        ax.set_xticks(range(len(algs)), [names.get(a, a) for a in algs], fontsize=7)
        ax.set(title=f"MPI_{op.capitalize()}, {_size_label(nbytes)}", ylabel="time cyclic / time block")
    axes[0].legend(fontsize=6.5, frameon=False)
    fig.suptitle("Numbering the ranks cyclically over the two nodes: measured ratio (points) and the model's (bar)")
    footnote(fig, provenance if provenance is not None else provenance_of(decisions))
    return fig


def at_scale(table: pd.DataFrame, library: str, ranks: str, source: str, names: dict | None = None) -> Figure:
    """One panel per operation: the model's predicted time of each algorithm it prices against the
    message size, at a scale no run here reaches, with the algorithm the library's own tables pick
    at each size ringed. table: the collectives lesson's at_scale (op, bytes, algorithm,
    t_pred_usec, picked); ranks: the scale in words ("384 ranks, 16 nodes x 24"); source: where
    the network's numbers come from (a prediction's provenance is its inputs). Returns a Figure."""
    _need(table, ["op", "bytes", "algorithm", "t_pred_usec", "picked"], "at_scale")
    names = names or {}
    ops = [op for op in model.ALGORITHMS if op in set(table["op"])]
    fig = new_figure(width=11, height=4.2)
    axes = [_styled(a) for a in np.atleast_1d(fig.subplots(1, len(ops)))]
    for ax, op in zip(axes, ops):
        mine = table[table["op"] == op]
        for k, (alg, g) in enumerate(mine.groupby("algorithm", sort=False)):
            g = g.sort_values("bytes")
            ax.plot(g["bytes"], g["t_pred_usec"], "-", lw=1.2, color=rank_color(k), label=names.get(alg, alg))
            chosen = g[g["picked"]]
            ax.plot(chosen["bytes"], chosen["t_pred_usec"], "o", ms=9, mfc="none", mec=COLORS["fit"], mew=1.4)
        ax.plot([], [], "o", ms=9, mfc="none", mec=COLORS["fit"], mew=1.4, label=f"{library} picks")
        ax.set(xscale="log", yscale="log", xlabel="message size [bytes per rank]", ylabel="predicted time [us]",
               title=f"MPI_{op.capitalize()}")
        ax.legend(fontsize=6.5, frameon=False)
    fig.suptitle(f"Predicted at {ranks}: each algorithm by the model, ringed where {library}'s own tables pick it")
    footnote(fig, {"host": f"prediction, no run: {source}"})
    return fig
