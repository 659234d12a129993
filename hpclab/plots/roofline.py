"""The roofline figure of the Poisson solver: measured rate against working set, with the memory roof.

The numbers come from hpclab.analysis.roofline (bytes per update, the memory-resident rule); the
colours from the course's one palette (hpclab.plots.figures.COLORS): the separate residuum in the
first compute blue, the fused one in the first MPI orange, caches and notes in greys.
"""

from __future__ import annotations

import pandas as pd

from hpclab.analysis.roofline import (MEMORY_FACTOR, ROOF_KERNEL, bytes_per_update, last_level_cache,
                                      working_set_bytes)
from hpclab.core.errors import HpclabError
from hpclab.plots import figures as plots


def plot_roofline(table: pd.DataFrame, bandwidth_mb_s, caches: pd.DataFrame | None = None,
                  provenance=None):
    """Lattice updates per second against working set, with the memory roofline.

    table: one row per run with n, variant ("separate" or "fused"), lups. bandwidth_mb_s: the
    roof's bandwidth [MB/s of bytes really moved], one number or {variant: number} (memory_roof
    per variant). caches: cache_sizes() output, drawn as vertical lines, with the start of the
    memory-resident range (MEMORY_FACTOR x the last-level cache); left of it the roof does not
    apply. Returns a matplotlib Figure: medians as large markers, every repetition as a dot (no line
    joins the grid sizes: nothing was measured between them), and for each variant the rate its
    byte count allows at that bandwidth (dashed)."""
    need = {"n", "variant", "lups"}
    if not need <= set(table.columns):
        raise HpclabError(f"plot_roofline needs columns {sorted(need)}, got {sorted(table.columns)}",
                          "build the table with one row per poisson run")
    fig = plots.new_figure(8.0, 4.6)
    ax = plots._styled(fig.add_subplot(1, 1, 1))
    colors = {"separate": plots.COLORS["compute"][0], "fused": plots.COLORS["mpi"][0]}
    for variant, grp in table.groupby("variant"):
        fused = variant == "fused"
        c = colors.get(variant, plots.COLORS["fit"])
        ws = grp["n"].map(working_set_bytes)
        ax.scatter(ws, grp["lups"] / 1e6, s=14, color=c, alpha=0.5)
        med = grp.groupby("n")["lups"].median() / 1e6
        ax.plot([working_set_bytes(n) for n in med.index], med.values, "D", color=c, ms=6,
                label=f"{variant} residuum (median; dots: every run)")
        bw = bandwidth_mb_s[variant] if isinstance(bandwidth_mb_s, dict) else bandwidth_mb_s
        bound = bw / bytes_per_update(fused)  # MB/s / B = million updates/s
        ax.axhline(bound, color=c, ls="--", lw=1,
                   label=f"{ROOF_KERNEL[variant if fused else 'separate']} bytes moved / "
                         f"{bytes_per_update(fused)} B per update ({variant})")
    ax.set_xscale("log")
    ax.set_xlabel("working set of one rank: u and f with halo [bytes]")
    ax.set_ylabel("million lattice updates per second")
    ax.set_title("Poisson solver, 1 rank, 1 thread: measured rate against the memory roofline", loc="left")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.08)  # room for the cache labels
    if caches is not None:
        for _, row in caches.iterrows():
            ax.axvline(row["bytes"], color=plots.COLORS["ideal"], lw=0.8, ls=":")
            measured = "hwloc_bytes" in row and row["bytes"] != row["hwloc_bytes"]  # notebook 00's probe
            ax.text(row["bytes"], ax.get_ylim()[1], f" L{int(row['level'])}" + (" (measured)" if measured else ""),
                    fontsize=7, color=plots.COLORS["ideal"], va="top", ha="left")
        start = MEMORY_FACTOR * last_level_cache(caches)
        ax.axvspan(start, ax.get_xlim()[1], color=plots.COLORS["package"], zorder=0)
        ax.text(start, ax.get_ylim()[1] * 0.93, f" memory-resident\n (>= {MEMORY_FACTOR}x last-level cache)",
                fontsize=7, color=plots.COLORS["fit"], va="top", ha="left")
    ax.legend(loc="lower left", fontsize=7, framealpha=0.9)
    plots.footnote(fig, provenance)
    return fig
