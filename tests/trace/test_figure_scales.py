"""Figures of a trace read correctly: the message matrix keeps the diagonal off its colour scale,
the timeline's axis is time since the run started, a part of the split has one colour everywhere."""

import numpy as np
import pytest
from matplotlib.colors import to_hex

from hpclab.analysis import imbalance
from hpclab.plots import imbalance as imb_plots, style
from hpclab.plots.trace import heatmap_figure, imbalance_figure, timeline_figure
from hpclab.trace.mapping import linear_mapping
from hpclab.trace.model import hockney
from hpclab.trace.split import PARTS as TRACE_PARTS, split
from hpclab.trace.matrix import MessageMatrix, aggregate, message_matrix
from hpclab.trace.poisson import poisson_trace


@pytest.fixture(scope="module")
def halo():
    nodes = linear_mapping(4, 4, 4)
    return poisson_trace(4, 4, n=40, iterations=3, ns_per_point=2.0, nodes=nodes, exchange="nonblocking")


def test_node_heatmap_scale_spans_the_inter_node_cells_only(halo):
    """Aggregated to nodes, where intra-node traffic dwarfs the rest: does the colour scale run
    from 0 to the largest inter-node cell (a few per cent must not look stark), or, asked, from the
    smallest inter-node cell with the colour bar saying so, or to a shared top, with every
    diagonal value written instead?"""
    agg = aggregate(message_matrix(halo), halo.hosts)
    assert np.diag(agg.count).min() > agg.count[~np.eye(4, dtype=bool)].max()  # the saturating case
    a = agg.count.copy()
    a[0, 1], a[2, 3] = 5, 50  # inter-node cells of different sizes
    mm = MessageMatrix(agg.labels, agg.volume, a, agg.time)
    fig = heatmap_figure(mm, "count")
    im = fig.axes[0].images[0]
    off = a[~np.eye(4, dtype=bool)]
    assert (im.norm.vmin, im.norm.vmax) == pytest.approx((0, off.max()))
    tight = heatmap_figure(mm, "count", from_zero=False)
    assert (tight.axes[0].images[0].norm.vmin, tight.axes[0].images[0].norm.vmax) == pytest.approx(
        (off[off > 0].min(), off.max()))
    assert "NOT from 0" in tight.axes[1].get_ylabel()
    assert heatmap_figure(mm, "count", vmax=100).axes[0].images[0].norm.vmax == 100
    written = {t.get_text() for t in fig.axes[0].texts}
    assert {f"{v:.3g}" for v in np.diag(a)} <= written


def test_timeline_axis_is_time_since_the_run_started(halo):
    """For a window late in the run: does the x axis start at the window's distance from the run's
    first event, in a unit the label names, with no offset text?"""
    ev = halo.events
    start, end = int(ev["t_enter"].min()), int(ev["t_exit"].max())
    t0, t1 = start + (end - start) // 2, end
    fig = timeline_figure(halo, (t0, t1))
    ax = fig.axes[0]
    label = ax.get_xlabel()
    assert label.startswith("time since the start of the run [")
    unit = label[label.index("[") + 1:-1]
    scale = {"s": 1e-9, "ms": 1e-6, "us": 1e-3, "ns": 1.0}[unit]
    lo, hi = ax.get_xlim()
    assert lo == pytest.approx((t0 - start) * scale) and hi == pytest.approx((t1 - start) * scale)
    assert ax.xaxis.get_major_formatter().get_useOffset() is False


def _legend_colours(fig) -> dict:
    legend = fig.axes[0].get_legend()
    return {t.get_text(): to_hex(p.get_facecolor()) for t, p in zip(legend.get_texts(), legend.get_patches())}


def test_a_part_has_one_colour_in_every_imbalance_diagram(halo):
    """Is each part of a run's time drawn in the palette's colour for it, by `hpclab trace`'s
    diagram (plots.trace) and by the lessons' diagrams (plots.imbalance) alike?"""
    s = split(halo, model=hockney(5.0, 100.0))
    assert s.T_rest != 0  # so the rest part is drawn too
    by_trace = _legend_colours(imbalance_figure({"run": s}))
    by_lesson = _legend_colours(imb_plots.diagram_figure(imbalance.parts_of({"run": s}), "run", "s"))
    assert {name: by_lesson[name] for _, name in imbalance.PARTS} == {
        name: style.part_color(key) for key, name in imbalance.PARTS}
    assert by_trace == {name: style.part_color(key) for key, name in TRACE_PARTS}
