"""Event timeline: ranks over time, compute and each MPI call in its own colour, messages as lines.

Works on real and replayed traces alike. Zoom with a time window (ns) or to the n-th occurrence
of a user region (an iteration). Beyond `max_messages` messages in view the lines are left out
(they would hide everything); beyond a few hundred ranks rows get thin but stay readable.
"""

from __future__ import annotations

import numpy as np

from hpclab.core.errors import HpclabError
from hpclab.trace.events import Trace
from hpclab.trace.matching import match
from hpclab.trace.profile import regions

COMPUTE_COLOR = "#9db4d8"


def iteration_window(trace: Trace, region: str, n: int) -> tuple[int, int]:
    """(t0, t1) in ns spanning the n-th (0-based) occurrence of `region` on every rank."""
    inst = regions(trace).instances
    inst = inst[inst["name"] == region]
    if inst.empty:
        names = sorted(set(regions(trace).instances["name"]))
        raise HpclabError(f"no region named {region!r} in this trace", f"regions present: {names}")
    k = inst.groupby("rank").cumcount()
    sel = inst[k == n]
    if sel.empty:
        raise HpclabError(f"region {region!r} occurs only {int(k.max()) + 1} time(s); "
                          f"occurrence {n} does not exist", "occurrences count from 0")
    return int(sel["t0"].min()), int(sel["t1"].max())


def timeline_figure(trace: Trace, window: tuple[int, int] | None = None, *,
                    iteration: tuple[str, int] | None = None, title: str | None = None,
                    max_messages: int = 2000, colors: dict | None = None):
    """Draw the timeline; window = (t0, t1) ns or iteration = (region name, n). Returns a Figure.

    The x axis is time since the run's first event (in s, ms, us or ns, whichever suits the end
    of the window), so a window's position in the run reads directly off the axis.
    colors: optional call name -> colour, so two figures (real, ideal) use the same colours."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
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
    _bars(ax, rank[g], np.maximum(prev_exit[g], t0), np.minimum(te[g], t1), start, scale, h, COMPUTE_COLOR)
    mpi = np.char.startswith(call.astype(str), "MPI_") & (tx >= t0) & (te <= t1)
    names = sorted(set(call[mpi].tolist()))
    palette = _palette(names, colors)
    for name in names:
        s = mpi & (call == name)
        _bars(ax, rank[s], np.maximum(te[s], t0), np.minimum(tx[s], t1), start, scale, h, palette[name])
    msgs = match(trace).messages
    if len(msgs):
        si, ri = msgs["send_idx"].to_numpy(), msgs["recv_idx"].to_numpy()
        a, b = te[si], tx[ri]
        vis = (b >= t0) & (a <= t1)
        if 0 < vis.sum() <= max_messages:
            from matplotlib.collections import LineCollection
            seg = np.stack([np.c_[(a[vis] - start) * scale, rank[si][vis]],
                            np.c_[(b[vis] - start) * scale, rank[ri][vis]]], axis=1)
            ax.add_collection(LineCollection(seg, colors="black", linewidths=0.6, alpha=0.7))
    ax.set_xlim((t0 - start) * scale, (t1 - start) * scale)
    ax.ticklabel_format(axis="x", useOffset=False, style="plain")  # no "+1.5e2" offset text
    ax.set_ylim(p - 0.5, -0.5)
    ax.set_xlabel(f"time since the start of the run [{unit}]")
    ax.set_ylabel("rank")
    if p <= 32:
        ax.set_yticks(range(p))
    ax.set_title(title or f"Timeline ({trace.meta.get('model', 'measured')})")
    handles = [Patch(color=COMPUTE_COLOR, label="compute")] + [Patch(color=palette[k], label=k) for k in names]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return fig


def _unit(span_ns):
    for scale, unit, lim in ((1e-9, "s", 1e9), (1e-6, "ms", 1e6), (1e-3, "us", 1e3)):
        if span_ns >= lim:
            return scale, unit
    return 1.0, "ns"


def _palette(names, colors):
    import matplotlib
    cmap = matplotlib.colormaps["tab20"]
    fixed = ["MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Sendrecv", "MPI_Wait",
             "MPI_Waitall", "MPI_Allreduce", "MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Test",
             "MPI_Testall", "MPI_Init", "MPI_Finalize", "MPI_Cart_create", "MPI_Comm_split",
             "MPI_Comm_dup"]
    out = {}
    for n in names:
        k = fixed.index(n) if n in fixed else len(fixed) + hash(n) % 2
        out[n] = (colors or {}).get(n, cmap((2 + k) % 20))
    return out


def _bars(ax, rows, a, b, t0, scale, h, color):
    from matplotlib.collections import PolyCollection
    if len(rows) == 0:
        return
    x0 = (a - t0) * scale
    x1 = (b - t0) * scale
    # zero-length calls still get a hairline so they are visible
    x1 = np.maximum(x1, x0 + 1e-9)
    y0, y1 = rows - h / 2, rows + h / 2
    verts = np.stack([np.c_[x0, y0], np.c_[x1, y0], np.c_[x1, y1], np.c_[x0, y1]], axis=1)
    ax.add_collection(PolyCollection(verts, facecolors=color, edgecolors="none"))
