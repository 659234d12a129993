"""Figures of the POP method: the efficiency table of a scaling study and the critical path on a timeline."""

from __future__ import annotations

import math
import textwrap

import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from hpclab.analysis.phrases import pct
from hpclab.plots.style import COLORS
from hpclab.plots.trace import _unit, timeline_figure
from hpclab.trace import pop


def pop_figure(table, title: str | None = None, digits: int = 2):
    """The POP table as a coloured grid: green at or above POP's 0.8 line, red below, grey where the
    factor is not available on this node (its reason is printed under the grid); each value with
    `digits` decimals (hpclab.course.lessons.pop.shown_digits: enough to tell the lowest apart)."""
    labels = list(pop.labelled(table).index)
    counts = list(table.columns)
    fig = Figure(figsize=(4.5 + 1.0 * len(counts), 0.42 * len(labels) + 2.0), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xlim(0, len(counts))
    ax.set_ylim(len(labels), 0)
    for i, metric in enumerate(table.index):
        for j, p in enumerate(counts):
            v = table.loc[metric, p]
            colour = (COLORS["pop_na"] if math.isnan(v) else  # judged as shown: a cell reading 0.80 is at the line
                      COLORS["pop_good"] if round(v, digits) >= pop.GOOD else COLORS["pop_fix"])
            ax.add_patch(Rectangle((j, i), 1, 1, facecolor=colour, edgecolor=COLORS["bar_edge"]))
            ax.text(j + 0.5, i + 0.5, "n/a" if math.isnan(v) else f"{v:.{digits}f}", ha="center", va="center")
    ax.set_xticks(np.arange(len(counts)) + 0.5, [str(c) for c in counts])
    # POP's hierarchy as indentation: labels aligned left, so the indent shows
    width = max(len(lab) for lab in labels)
    ax.set_yticks(np.arange(len(labels)) + 0.5, labels, ha="left", family="monospace")
    ax.tick_params(axis="y", pad=6.2 * width)
    missing = table.attrs.get("not available", {})
    notes = ""
    if missing:
        by_reason: dict[str, list[str]] = {}
        for metric, reason in missing.items():
            by_reason.setdefault(reason, []).append(metric)
        notes = "\n\n" + "\n".join(textwrap.fill(f"n/a ({', '.join(m)}): {r}", 60) for r, m in by_reason.items())
    ax.set_xlabel("ranks" + notes)
    ax.grid(False)
    ax.tick_params(length=0)
    ax.set_title(title or f"POP efficiencies (reference: {table.attrs.get('reference', counts[0])} rank(s))")
    return fig


def critical_path_figure(trace, path, window: tuple[int, int] | None = None, title: str | None = None):
    """The trace's timeline with its critical path drawn over it: a thick line along each segment
    and a vertical step where the path moves to another rank."""
    fig = timeline_figure(trace, window, title=title or "Timeline with the critical path")
    ax = fig.axes[0]
    ev = trace.events
    start = int(ev["t_enter"].min())
    t0, t1 = window if window is not None else (start, int(ev["t_exit"].max()))
    scale, _ = _unit(max(t1 - start, 1))
    seg = path.segments.sort_values("t0")
    xs0 = (seg["t0"].to_numpy() - start) * scale
    xs1 = (seg["t1"].to_numpy() - start) * scale
    ys = seg["rank"].to_numpy()
    lines = [[(a, y), (b, y)] for a, b, y in zip(xs0, xs1, ys)]
    # a step between consecutive segments on different ranks (the path follows a message or a collective)
    for k in range(1, len(seg)):
        if ys[k] != ys[k - 1]:
            lines.append([(xs1[k - 1], ys[k - 1]), (xs0[k], ys[k])])
    ax.add_collection(LineCollection(lines, colors=COLORS["path"], linewidths=2.5, alpha=0.9))
    handles, labels = ax.get_legend_handles_labels()
    legend = ax.get_legend()
    extra = Patch(color=COLORS["path"], label=f"critical path ({pct(path.length_ns / path.T_real)} of T_real)"
                  if path.T_real else "critical path")
    ax.legend(handles=[*(legend.legend_handles if legend else []), extra], loc="upper left",
              bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return fig
