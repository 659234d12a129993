"""Do the POP figures draw what the table and the path hold?"""

from __future__ import annotations

import math

from hpclab.plots import pop as pop_plots
from hpclab.plots.style import COLORS
from hpclab.trace import critical_path as cp
from hpclab.trace import pop
from hpclab.trace.builder import TraceBuilder
from hpclab.trace.model import hockney
from hpclab.trace.split import split


def _study():
    out = {}
    for p, comps in {1: [1000], 2: [500, 600], 4: [250, 250, 250, 600]}.items():
        b = TraceBuilder(p)
        for r, ns in enumerate(comps):
            b[r].compute(ns).barrier()
        out[p] = split(b.build())
    return pop.pop_table(out, no_counters_reason="perf: not supported here")


def test_pop_figure_colours_cells_by_pops_line(tmp_path):
    table = _study()
    fig = pop_plots.pop_figure(table)
    ax = fig.axes[0]
    colours = [tuple(round(c, 3) for c in p.get_facecolor()[:3]) for p in ax.patches]
    assert len(ax.patches) == table.size
    from matplotlib.colors import to_rgb
    want = lambda k: tuple(round(c, 3) for c in to_rgb(COLORS[k]))
    n_na = int(table.isna().sum().sum())
    n_fix = int((table < pop.GOOD).sum().sum())
    assert colours.count(want("pop_na")) == n_na and colours.count(want("pop_fix")) == n_fix
    assert "n/a (instruction scalability, IPC scalability, frequency scalability): perf" in ax.get_xlabel().replace("\n", " ")
    fig.savefig(tmp_path / "pop.png")


def test_critical_path_figure_draws_the_path_and_its_steps(tmp_path):
    b = TraceBuilder(3)
    b[0].compute(1000).send(to=1, bytes=8)
    b[1].recv(frm=0, bytes=8).compute(500).send(to=2, bytes=8)
    b[2].recv(frm=1, bytes=8).compute(100)
    trace = b.build(hockney(1.0, 1000.0))
    path = cp.critical_path(trace)
    fig = pop_plots.critical_path_figure(trace, path)
    lines = fig.axes[0].collections[-1]
    steps = sum(1 for k in range(1, len(path.segments)) if path.segments["rank"].iat[k] != path.segments["rank"].iat[k - 1])
    assert len(lines.get_segments()) == len(path.segments) + steps
    fig.savefig(tmp_path / "path.png")
