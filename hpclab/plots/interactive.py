"""Notebook 90's figures: each rank's block with its ghost rows, and Python's cost per message."""

from __future__ import annotations

from hpclab.core.errors import HpclabError


def overhead_figure(table, provenance=None):
    """Extra one-way time of each Python variant over C against message size (us; log x,
    symmetric-log y: the extras span decades and can be negative); filled where the size's
    decision (overhead's `{name}_vs_C`) is 'slower', hollow otherwise.
    table: the result of overhead(). Returns a matplotlib Figure."""
    # matplotlib: costly, only when a figure is drawn
    from hpclab.plots import figures as plots, style

    fig = plots.new_figure(width=7, height=3.6)
    ax = fig.subplots()
    ax.grid(True, alpha=0.3)
    names = [c[:-len("_extra_us")] for c in table.columns if c.endswith("_extra_us")]
    for i, name in enumerate(names):
        pos = table[table["bytes"] > 0]
        color = plots.rank_color(i + 1)
        ax.plot(pos["bytes"], pos[f"{name}_extra_us"], "-", lw=1, color=color)
        resolved = pos[f"{name}_vs_C"] == "slower" if f"{name}_vs_C" in pos else pos["bytes"] > 0
        ax.plot(pos["bytes"][resolved], pos[f"{name}_extra_us"][resolved], "o", ms=3.5, color=color,
                label=f"{name} - C, decided slower")
        if (~resolved).any():  # hollow: the same within the margin, undecided, or faster than C
            ax.plot(pos["bytes"][~resolved], pos[f"{name}_extra_us"][~resolved], "o", ms=4.5,
                    mfc="none", color=color, label=f"{name} - C, not decided slower")
    ax.axhline(0, color=style.COLORS["axis"], lw=0.8)
    # extras span decades (a few us per small message, milliseconds when pickling 4 MiB) and can be
    # negative: symmetric log, linear within +-1 us
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set(xscale="log", xlabel="message size [bytes]", ylabel="extra one-way time [us] (symmetric log)",
           title="What Python adds to each message (measured: Python time - C time)")
    ax.legend(fontsize=8)
    if provenance is not None:
        plots.footnote(fig, provenance)
    return fig


def halo_figure(blocks: dict, title: str = "Each rank's block, ghost rows outlined"):
    """Draw each rank's local array (rows x columns, ghost rows first and last) side by side,
    top rank first, with the ghost rows outlined, so one can see which values a halo exchange
    copied where. blocks: {rank: 2-D array}. Returns a matplotlib Figure."""
    import numpy as np
    from matplotlib.patches import Rectangle

    # matplotlib: costly, only when a figure is drawn
    from hpclab.plots import figures as plots, style

    if not blocks:
        raise HpclabError("no blocks to draw", "pull the arrays with engines.view.pull(...)")
    ranks = sorted(blocks)
    arrays = [np.asarray(blocks[r], dtype=float) for r in ranks]
    lo = min(a.min() for a in arrays)
    hi = max(a.max() for a in arrays)
    fig = plots.new_figure(width=2.6 * len(ranks) + 1, height=3.2)
    axes = np.atleast_1d(fig.subplots(1, len(ranks)))
    for ax, r, a in zip(axes, ranks, arrays):
        im = ax.imshow(a, cmap=style.CMAPS["matrix"], vmin=lo, vmax=hi, aspect="auto")
        for row in (0, a.shape[0] - 1):
            ax.add_patch(Rectangle((-0.5, row - 0.5), a.shape[1], 1, fill=False, ec=style.COLORS["highlight"], lw=1.5))
        for (i, j), v in np.ndenumerate(a):
            ax.text(j, i, f"{v:g}", ha="center", va="center", fontsize=6, color=style.COLORS["on_dark"])
        ax.set(title=f"rank {r}", xticks=[], yticks=range(a.shape[0]))
        ax.set_yticklabels(["ghost"] + [str(i) for i in range(1, a.shape[0] - 1)] + ["ghost"], fontsize=7)
    fig.colorbar(im, ax=list(axes), shrink=0.8)
    fig.suptitle(title, fontsize=10)
    return fig
