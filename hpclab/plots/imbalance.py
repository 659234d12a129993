"""Figures of the imbalance lessons (notebooks 05 and 05b): imbalance diagrams as stacked bars of
the five parts of a run's time, ours next to the 2014 talk's quoted one, and the compute rate of
each simulated case's subdomain.

Tables come from hpclab.analysis.imbalance (parts_of, quoted_parts, subdomain_table); colours
from hpclab.plots.style, the same parts in the same colours as hpclab.plots.trace.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from hpclab.analysis.imbalance import PARTS, quoted_parts, subdomain_summary
from hpclab.plots.style import part_color

# part name (a column of parts_of) -> Split attribute, whose colour it takes
KEY_OF = {name: key for key, name in PARTS}


def _stack(ax, parts: pd.DataFrame):
    labels = [str(x) for x in parts.index]
    pos = np.zeros(len(labels))
    neg = np.zeros(len(labels))
    for _, name in PARTS:
        if name not in parts:  # a quoted diagram has no rest part
            continue
        v = parts[name].to_numpy(float)
        base = np.where(v >= 0, pos, neg)
        ax.bar(labels, v, bottom=base, color=part_color(KEY_OF[name]), label=name, width=0.6)
        pos += np.where(v >= 0, v, 0)
        neg += np.where(v < 0, v, 0)
    top = float(pos.max()) if len(pos) else 0.0
    if top > 0:  # room above the tallest stack; autoscaling clips stacked bars here
        ax.set_ylim(min(float(neg.min()) * 1.08, 0.0), top * 1.08)
    ax.tick_params(axis="x", labelrotation=20)
    for t in ax.get_xticklabels():
        t.set_horizontalalignment("right")


def diagram_figure(parts: pd.DataFrame, title: str, unit: str):
    """One imbalance diagram: stacked bars of the four parts (rows = runs, columns as in
    parts_of), in `unit`. Returns a matplotlib Figure."""
    fig = Figure(figsize=(2.6 + 1.5 * len(parts), 4.4), layout="constrained")
    ax = fig.add_subplot()
    _stack(ax, parts)
    ax.set_title(title, loc="left", fontsize="medium")
    ax.set_ylabel(unit)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return fig


def side_by_side_figure(ours: pd.DataFrame, ours_title: str, ours_unit: str, quoted: pd.DataFrame | None = None):
    """Imbalance diagrams as stacked bars: `ours` (rows = runs, columns = the four parts, in
    `ours_unit`) on the left, the talk's quoted diagram (default: quoted_parts(), accumulated
    seconds) on the right, labelled as quoted. Returns a matplotlib Figure."""
    quoted = quoted_parts() if quoted is None else quoted
    fig = Figure(figsize=(11, 4.6), layout="constrained")
    a, b = fig.subplots(1, 2, width_ratios=[max(len(ours), 2), max(len(quoted), 2)])
    _stack(a, ours)
    a.set_title(ours_title, loc="left", fontsize="medium")
    a.set_ylabel(ours_unit)
    _stack(b, quoted)
    b.set_title("Quoted: ITAC 2014, 384 ranks on 16 nodes\n(seed 001; seconds accumulated over ranks)",
                loc="left", fontsize="medium")
    b.set_ylabel("s (accumulated, as quoted)")
    handles, names = a.get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncols=4, fontsize="small")
    return fig


def subdomain_figure(table: pd.DataFrame, title: str = "Compute rate of each decomposition's subdomain, one rank"):
    """Bars of the median ns per grid point and iteration (all phases) per distinct subdomain
    of a subdomain_table, with the min-max range of its runs as an error bar; each bar is
    labelled with its local shape and the seed's. Returns a matplotlib Figure."""
    s = subdomain_summary(table).drop_duplicates(subset=["local_x", "local_y"])
    fig = Figure(figsize=(2.4 + 1.6 * len(s), 4.0), layout="constrained")
    ax = fig.add_subplot()
    med = s["ns_per_point_median"].to_numpy(float)
    err = np.vstack([med - s["ns_per_point_min"].to_numpy(float), s["ns_per_point_max"].to_numpy(float) - med])
    labels = [f"{case}\n{r.local_x}x{r.local_y} (seed {r.seed_x}x{r.seed_y})" for case, r in s.iterrows()]
    ax.bar(labels, med, yerr=err, capsize=4, color=part_color("T_comp"), width=0.6)
    ax.set_ylabel("ns per grid point and iteration (median, min-max)")
    ax.set_title(title, loc="left", fontsize="medium")
    return fig
