"""Figures of the machine: hwloc's packages, NUMA nodes, cores and PUs as nested boxes, each
PU coloured by the ranks bound to it (the topology itself comes from hpclab.site.topology)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from matplotlib.figure import Figure

from hpclab.core.errors import HpclabError
from hpclab.plots.figures import COLORS, footnote, new_figure, provenance_of, rank_color
from hpclab.runs.parse import parse_run, run_topology
from hpclab.site.topology import Topology, cpus_to_cpulist, from_lstopo



def _binding_map(topo: Topology, bindings) -> tuple[dict[int, list[int]], list[int]]:
    """PU (OS index) -> ranks using it, and the list of ranks, from a bindings table or dict."""
    if bindings is None:
        return {}, []
    if isinstance(bindings, dict):
        items = [(int(r), list(c), "os") for r, c in bindings.items()]
    else:
        if not {"rank", "cpus"} <= set(bindings.columns):
            raise HpclabError("a bindings table needs the columns rank and cpus",
                              "use the output of hpclab.runs.parse.parse_bindings or parse_run")
        numbering = bindings["numbering"] if "numbering" in bindings else ["os"] * len(bindings)
        items = [(int(r), c, n) for r, c, n in zip(bindings["rank"], bindings["cpus"], numbering)]
    known = set(topo.pus["pu"])
    by_pu: dict[int, list[int]] = {}
    ranks = []
    for rank, cpus, numbering in items:
        if cpus is None or (not isinstance(cpus, (list, tuple)) and pd.isna(cpus)):
            cpus = sorted(known)  # not bound: may run anywhere
        cpus = topo.logical_to_os(cpus) if numbering == "logical" else [int(c) for c in cpus]
        missing = [c for c in cpus if c not in known]
        if missing:
            raise HpclabError(f"rank {rank} is bound to CPU(s) {cpus_to_cpulist(missing)} that "
                              f"this topology does not have ({topo.summary()})",
                              "draw the topology of the host the run used (its XML is in the run folder)")
        ranks.append(rank)
        for c in cpus:
            by_pu.setdefault(c, []).append(rank)
    return by_pu, sorted(set(ranks))


@dataclass
class _Box:
    kind: str  # package | numa | core | pu
    x: float
    y: float
    w: float
    h: float
    label: str
    pu: int = -1


def _layout(topo: Topology, max_cols: int = 8) -> tuple[list[_Box], float, float]:
    """Nested boxes in data units (PU = 1 x 1), top edge at y = 0. Returns boxes, width, height."""
    gap, pu_w, core_lab, numa_lab, pkg_lab = 0.25, 1.0, 0.55, 0.6, 0.7
    pus = topo.pus
    npu = int(pus.groupby("core").size().max())
    core_w = npu * pu_w + (npu + 1) * gap
    core_h = core_lab + pu_w + gap
    mem = topo.numa_nodes.set_index("numa")["memory_bytes"].to_dict()
    boxes: list[_Box] = []
    x, height = 0.0, 0.0
    for pkg, pkg_rows in pus.groupby("package", sort=True):
        px = x
        nx = px + gap
        inner: list[_Box] = []
        numa_hmax = 0.0
        for numa, numa_rows in pkg_rows.groupby("numa", sort=True):
            cores = list(numa_rows.groupby("core", sort=True))
            ncol = min(max_cols, len(cores))
            nrow = -(-len(cores) // ncol)
            nw = ncol * core_w + (ncol + 1) * gap
            nh = numa_lab + nrow * core_h + (nrow + 1) * gap
            ntop = -pkg_lab
            size = mem.get(numa, 0)
            label = f"NUMA node {numa}" + (f" ({size / 2**30:.1f} GiB)" if size else "")
            inner.append(_Box("numa", nx, ntop - nh, nw, nh, label))
            for k, (core, core_rows) in enumerate(cores):
                cx = nx + gap + (k % ncol) * (core_w + gap)
                ctop = ntop - numa_lab - gap - (k // ncol) * (core_h + gap)
                inner.append(_Box("core", cx, ctop - core_h, core_w, core_h, f"core {core}"))
                for j, pu in enumerate(core_rows["pu"]):
                    inner.append(_Box("pu", cx + gap + j * (pu_w + gap), ctop - core_h + gap,
                                      pu_w, pu_w, str(int(pu)), pu=int(pu)))
            nx += nw + gap
            numa_hmax = max(numa_hmax, nh)
        pw, ph = nx - px, pkg_lab + numa_hmax + gap
        boxes.append(_Box("package", px, -ph, pw, ph, f"package {pkg}"))
        boxes.extend(inner)
        x = px + pw + 2 * gap
        height = max(height, ph)
    return boxes, x - 2 * gap, height


def draw(topo: Topology, bindings=None, ax=None, title: str | None = None):
    """Draw packages, NUMA nodes, cores and PUs as nested boxes; colour PUs by bound ranks.

    topo: a Topology; bindings: None, {rank: [os cpus]}, or a table with columns rank, cpus
    (and optionally numbering = "os" | "logical"), e.g. from hpclab.runs.parse; a PU shared by several
    ranks is split into stripes, one per rank; the number in a PU box is its OS index.
    ax: a matplotlib Axes to draw in (default: a new figure). Returns the Axes.
    """
    from matplotlib.patches import Patch, Rectangle

    boxes, width, height = _layout(topo)
    if ax is None:
        fig = new_figure(width=min(12.0, 1.5 + 0.45 * width), height=1.2 + 0.45 * height)
        ax = fig.add_subplot()
    by_pu, ranks = _binding_map(topo, bindings)
    styles = {"package": (COLORS["package"], "0.25", 1.2, 8, "bold"),
              "numa": (COLORS["numa"], "0.45", 0.8, 7, "normal"),
              "core": (COLORS["core"], "0.55", 0.6, 6, "normal")}
    for b in boxes:
        if b.kind in styles:
            face, edge, lw, size, weight = styles[b.kind]
            ax.add_patch(Rectangle((b.x, b.y), b.w, b.h, facecolor=face, edgecolor=edge,
                                   linewidth=lw))
            ax.text(b.x + 0.12, b.y + b.h - 0.1, b.label, ha="left", va="top", fontsize=size,
                    fontweight=weight, color="0.15")
            continue
        owners = by_pu.get(b.pu, [])
        for s, rank in enumerate(owners):
            stripe = b.w / len(owners)
            ax.add_patch(Rectangle((b.x + s * stripe, b.y), stripe, b.h,
                                   facecolor=rank_color(rank), linewidth=0))
        ax.add_patch(Rectangle((b.x, b.y), b.w, b.h, facecolor="white" if not owners else "none",
                               edgecolor="0.15", linewidth=0.8))
        ax.text(b.x + b.w / 2, b.y + b.h / 2, b.label, ha="center", va="center", fontsize=6,
                color="0.1" if not owners else "white", fontweight="bold" if owners else "normal")
    ax.set_xlim(-0.2, width + 0.2)
    ax.set_ylim(-height - 0.2, 0.2)
    ax.set_aspect("equal")
    ax.axis("off")
    if ranks:
        handles = [Patch(facecolor=rank_color(r), label=f"rank {r}") for r in ranks]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7,
                  frameon=False, ncol=1 if len(ranks) <= 16 else 2,
                  title="PU used by", title_fontsize=7)
    ax.set_title(title if title is not None else f"{topo.host or 'node'}: {topo.summary()}",
                 fontsize=9, loc="left")
    return ax


def figure(topo: Topology, panels=None, title: str | None = None, provenance: dict | list | None = None):
    """A Figure with one topology drawing per bindings table.

    panels: None (bare topology), one bindings table/dict, or {label: bindings} for several
    panels stacked vertically (e.g. {"launcher mask": ..., "CPU seen by the rank": ...}).
    provenance: dict (or list of dicts) with host, date, run_id for the footnote. Returns a matplotlib Figure.
    """
    if panels is None or not isinstance(panels, dict) or all(
            isinstance(k, int) for k in panels):
        panels = {title or "": panels}
    n = len(panels)
    _, width, height = _layout(topo)
    fig = new_figure(width=max(7.0, min(13.0, 3.2 + 0.45 * width)),
                           height=0.6 + n * (0.7 + 0.45 * height))
    for i, (label, bindings) in enumerate(panels.items(), start=1):
        ax = fig.add_subplot(n, 1, i)
        draw(topo, bindings, ax=ax,
             title=(f"{label}\n" if label else "") + f"{topo.host or 'node'}, {topo.summary()}")
    footnote(fig, provenance)
    return fig


# --- a run's bindings ----------------------------------------------------------------------


def topology_bindings(topo, panels=None, provenance=None) -> Figure:
    """The node's packages, NUMA nodes, cores and PUs with each rank's CPUs coloured.

    topo: hpclab.site.topology.Topology (from the run folder's XML, this machine, or synthetic);
    panels: a bindings table (rank, cpus[, numbering]) or {label: table} for side-by-side
    comparison such as requested mask vs CPU actually used. Returns a Figure.
    """
    if provenance is None and isinstance(panels, pd.DataFrame):
        provenance = provenance_of(panels)
    return figure(topo, panels, provenance=provenance)


def binding_panels(table: pd.DataFrame) -> dict:
    """Bindings tables of one parse_run table, for topology_bindings: what the launcher reported,
    the affinity each rank saw, and the CPUs its threads ran on.

    table: parse_run output (attrs "bindings" and "placement"). Returns {label: DataFrame(rank,
    cpus, numbering)}; the launcher panel is left out when the run printed no binding lines.
    """
    panels = {}
    bindings = pd.DataFrame(table.attrs.get("bindings") or [])
    if not bindings.empty:
        first = bindings.drop_duplicates("rank")
        source = ", ".join(sorted(set(first["source"])))
        panels[f"binding reported by {source}"] = first[["rank", "cpus", "numbering"]]
    place = pd.DataFrame(table.attrs.get("placement") or [])
    if place.empty:
        raise HpclabError("the table carries no placement (attrs['placement'])",
                          "pass the table returned by hpclab.runs.parse.parse_run")
    ranks = place[place["thread"].isna()]
    panels["affinity each rank saw (sched_getaffinity)"] = pd.DataFrame(
        {"rank": ranks["rank"], "cpus": ranks["allowed"], "numbering": "os"})
    threads = place[place["thread"].notna()]
    ran = [(r, sorted(set(threads[threads["rank"] == r]["cpu"])) or [int(c)])
           for r, c in zip(ranks["rank"], ranks["cpu"])]
    panels["CPUs the rank and its threads ran on"] = pd.DataFrame(
        {"rank": [r for r, _ in ran], "cpus": [c for _, c in ran], "numbering": "os"})
    return panels


def run_bindings(run_dir, kernel: str, host: str | None = None) -> Figure:
    """The topology of a run's node with its bindings: launcher report, affinity, CPUs used.

    run_dir: a run folder; kernel: its kernel; host: which node (default: the one saved, or this
    machine when the folder has no topology file). Returns a Figure (see binding_panels).
    """

    table = parse_run(run_dir, kernel)
    try:
        topo = run_topology(run_dir, host)
    except HpclabError:
        topo = from_lstopo()
    return topology_bindings(topo, binding_panels(table), provenance=table.attrs["provenance"])
