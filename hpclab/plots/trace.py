"""Figures of a trace: the imbalance diagram of several splits, the message matrix as a heat map,
and the event timeline (ranks over time, compute and each MPI call in its own colour, messages
as lines).

The numbers come from hpclab.trace (split, matrix, matching, timeline windows); the colours from
hpclab.plots.style. Each function returns a matplotlib Figure and shows nothing.
"""

from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from hpclab.core.errors import HpclabError
from hpclab.plots.style import CMAPS, COLORS, call_color, part_color
from hpclab.trace.events import Trace
from hpclab.trace.matching import match
from hpclab.trace.matrix import MessageMatrix
from hpclab.trace.split import PARTS
from hpclab.trace.timeline import iteration_window


def imbalance_figure(splits: dict, unit: float = 1e-9, unit_name: str = "s"):
    """Stacked bars of the five parts (compute / load imbalance / dependency / transfer / rest)
    for several runs; the rest is drawn only if some run has one.

    splits: label -> hpclab.trace.split.Split; unit: factor from ns to the unit shown
    (unit_name). Returns a matplotlib Figure (not shown)."""
    fig = Figure(figsize=(1.6 + 1.4 * len(splits), 4.2), layout="constrained")
    ax = fig.add_subplot()
    rest = any(getattr(s, "T_rest", 0) for s in splits.values())
    parts = [(k, text, part_color(k)) for k, text in PARTS if k != "T_rest" or rest]
    labels = list(splits)
    bottom_pos = np.zeros(len(labels))
    bottom_neg = np.zeros(len(labels))
    for key, text, color in parts:
        v = np.array([getattr(splits[k], key) * unit for k in labels])
        base = np.where(v >= 0, bottom_pos, bottom_neg)
        ax.bar(labels, v, bottom=base, label=text, color=color, width=0.6)
        bottom_pos += np.where(v >= 0, v, 0)
        bottom_neg += np.where(v < 0, v, 0)
    ax.set_ylabel(f"time ({unit_name})")
    ax.set_title("Imbalance diagram")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return fig


def heatmap_figure(mm: MessageMatrix, what: str = "volume", title: str | None = None, *,
                   vmax: float | None = None, from_zero: bool = True):
    """A heat map of one quantity (volume / count / time / rate) of a message matrix
    (hpclab.trace.matrix); returns a matplotlib Figure.

    The colour scale spans the off-diagonal cells only. Aggregated to nodes, the diagonal is the
    traffic inside each node, often orders of magnitude above the traffic between nodes; on one
    scale it would leave every inter-node cell the same dark colour. Diagonal cells are drawn
    grey instead, with their value written in them; empty cells stay blank. The scale starts at 0
    (from_zero=False: at the smallest off-diagonal cell, which makes a few per cent look stark,
    and the colour bar then says so); vmax: its top (default the largest off-diagonal cell; give
    two maps the same vmax to compare them)."""
    a = getattr(mm, what).astype(float)
    n = len(mm.labels)
    size = min(3.5 + 0.25 * n, 10)
    fig = Figure(figsize=(size + 1.2, size), layout="constrained")
    ax = fig.add_subplot()
    diag = np.eye(n, dtype=bool)
    shown = np.ma.masked_where(~(a > 0) | diag, a)
    lim = (float(shown.min()), float(shown.max())) if shown.count() else (None, None)
    if from_zero and lim[0] is not None:
        lim = (0.0, lim[1])
    if vmax is not None:
        lim = (lim[0] if lim[0] is not None else 0.0, float(vmax))
    im = ax.imshow(shown, cmap=CMAPS["matrix"], interpolation="nearest", vmin=lim[0], vmax=lim[1])
    on_diag = np.ma.masked_where(~diag | ~(a > 0), np.ones_like(a))
    ax.imshow(on_diag, cmap=CMAPS["off_scale"], vmin=0, vmax=4, interpolation="nearest")
    if n <= 24:  # the diagonal's values, where they fit
        for k in np.flatnonzero(np.diag(a) > 0):
            ax.text(k, k, f"{a[k, k]:.3g}", ha="center", va="center", fontsize="x-small")
    units = {"volume": "bytes", "count": "messages", "time": "ns", "rate": "bytes/s"}
    fig.colorbar(im, ax=ax, label=f"{what} ({units.get(what, '')}), off-diagonal cells"
                 + ("" if from_zero else ", scale NOT from 0") + "\ndiagonal (grey): value written, not on this scale")
    if n <= 32:
        ax.set_xticks(range(n), [str(x) for x in mm.labels], rotation=90, fontsize="small")
        ax.set_yticks(range(n), [str(x) for x in mm.labels], fontsize="small")
    ax.set_xlabel("receiver")
    ax.set_ylabel("sender")
    ax.set_title(title or f"Message {what}")
    return fig


def timeline_figure(trace: Trace, window: tuple[int, int] | None = None, *,
                    iteration: tuple[str, int] | None = None, title: str | None = None,
                    max_messages: int = 2000, colors: dict | None = None):
    """Draw the timeline of a trace (real or replayed); window = (t0, t1) ns or iteration =
    (region name, n) (hpclab.trace.timeline.iteration_window). Returns a Figure.

    The x axis is time since the run's first event (in s, ms, us or ns, whichever suits the end
    of the window), so a window's position in the run reads directly off the axis. Beyond
    `max_messages` messages in view the message lines are left out (they would hide everything).
    colors: optional call name -> colour, so two figures (real, ideal) use the same colours."""
    ev = trace.events
    if iteration is not None:
        window = iteration_window(trace, *iteration)
    t_all0, t_all1 = int(ev["t_enter"].min()), int(ev["t_exit"].max())
    t0, t1 = window if window is not None else (t_all0, t_all1)
    if t1 <= t0:
        raise HpclabError(f"empty time window ({t0}, {t1}) ns", "give t0 < t1")
    # x is time since the run's first event, in the unit that suits how far the window reaches
    start = t_all0
    scale, unit = _unit(max(t1 - start, 1))
    rank = ev["rank"].to_numpy()
    te = ev["t_enter"].to_numpy()
    tx = ev["t_exit"].to_numpy()
    call = ev["call"].to_numpy()
    p = trace.nranks
    fig = Figure(figsize=(11, min(1.5 + 0.3 * p, 12)), layout="constrained")
    ax = fig.add_subplot()
    h = 0.8 if p <= 64 else 1.0
    same = np.r_[False, rank[1:] == rank[:-1]]
    prev_exit = np.r_[0, tx[:-1]]
    # compute bursts: the gap before each event on the same rank
    g = same & (te > prev_exit) & (te > t0) & (prev_exit < t1)
    _bars(ax, rank[g], np.maximum(prev_exit[g], t0), np.minimum(te[g], t1), start, scale, h, COLORS["burst"])
    mpi = np.char.startswith(call.astype(str), "MPI_") & (tx >= t0) & (te <= t1)
    names = sorted(set(call[mpi].tolist()))
    palette = {n: (colors or {}).get(n, call_color(n)) for n in names}
    for name in names:
        s = mpi & (call == name)
        _bars(ax, rank[s], np.maximum(te[s], t0), np.minimum(tx[s], t1), start, scale, h, palette[name])
    msgs = match(trace).messages
    if len(msgs):
        si, ri = msgs["send_idx"].to_numpy(), msgs["recv_idx"].to_numpy()
        a, b = te[si], tx[ri]
        vis = (b >= t0) & (a <= t1)
        if 0 < vis.sum() <= max_messages:
            seg = np.stack([np.c_[(a[vis] - start) * scale, rank[si][vis]],
                            np.c_[(b[vis] - start) * scale, rank[ri][vis]]], axis=1)
            ax.add_collection(LineCollection(seg, colors=COLORS["message"], linewidths=0.6, alpha=0.7))
    ax.set_xlim((t0 - start) * scale, (t1 - start) * scale)
    ax.ticklabel_format(axis="x", useOffset=False, style="plain")  # no "+1.5e2" offset text
    ax.set_ylim(p - 0.5, -0.5)
    ax.set_xlabel(f"time since the start of the run [{unit}]")
    ax.set_ylabel("rank")
    if p <= 32:
        ax.set_yticks(range(p))
    ax.set_title(title or f"Timeline ({trace.meta.get('model', 'measured')})")
    handles = [Patch(color=COLORS["burst"], label="compute")] + [Patch(color=palette[k], label=k) for k in names]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return fig


def _unit(span_ns):
    for scale, unit, lim in ((1e-9, "s", 1e9), (1e-6, "ms", 1e6), (1e-3, "us", 1e3)):
        if span_ns >= lim:
            return scale, unit
    return 1.0, "ns"


def _bars(ax, rows, a, b, t0, scale, h, color):
    if len(rows) == 0:
        return
    x0 = (a - t0) * scale
    x1 = (b - t0) * scale
    # zero-length calls still get a hairline so they are visible
    x1 = np.maximum(x1, x0 + 1e-9)
    y0, y1 = rows - h / 2, rows + h / 2
    verts = np.stack([np.c_[x0, y0], np.c_[x1, y0], np.c_[x1, y1], np.c_[x0, y1]], axis=1)
    ax.add_collection(PolyCollection(verts, facecolors=color, edgecolors="none"))
