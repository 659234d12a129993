"""The course's one palette and figure style: every figure module of hpclab.plots takes its colours here.

Ranks (and anything counted in order: transports, cases) use matplotlib's tab20 colours, the
ten strong ones first; MPI calls in a timeline use tab20 in its own (pair) order; the parts of a
run's time (compute, transfer, load imbalance, dependency, rest) have one colour each, the same
in the imbalance diagrams of notebooks 05 and 05b and of `hpclab trace`. A test
(tests/test_plots.py) checks that no other module of the package writes a colour literal.
"""

from __future__ import annotations

import zlib

# matplotlib's tab20, in its own order (strong, light, strong, light, ...)
TAB20 = ["#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896",
         "#9467bd", "#c5b0d5", "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#7f7f7f", "#c7c7c7",
         "#bcbd22", "#dbdb8d", "#17becf", "#9edae5"]
# one colour per rank: the ten strong tab20 colours, then the ten light ones
RANKS = TAB20[0::2] + TAB20[1::2]

COLORS = {
    # structure boxes of the machine figure are greys
    "package": "#eeeeee", "numa": "#dde8dd", "core": "#f7f7f7",
    "ideal": "0.45", "fit": "0.2", "axis": "0.3", "note": "0.4",
    # compute phases in blues, MPI phases in warm colours: the split reads at a glance
    "compute": ["#08519c", "#3182bd", "#6baed6", "#9ecae1", "#c6dbef"],
    "mpi": ["#d94801", "#fd8d3c", "#fdae6b", "#a63603"],
    # a timeline: compute bursts, message lines
    "burst": "#9db4d8", "message": "black",
    "bar_edge": "white",
    # a halo row or a cell the reader should look at, and text on a dark cell
    "highlight": "#d62728", "on_dark": "white",
    # POP tables: at or above POP's 0.8 line, below it, not available; the critical path
    "pop_good": "#cfe8cf", "pop_fix": "#f6c9c4", "pop_na": "#eeeeee", "path": "#d62728",
}

# The parts of a run's time (hpclab.trace.split.Split attributes), one colour each.
PART_COLORS = {"T_comp": "#4c72b0", "T_transfer": "#dd8452", "T_load": "#c44e52",
               "T_depend": "#8172b3", "T_rest": "#9a9a9a"}

# colour maps by role: a quantity over a matrix, and the cells drawn off that scale
CMAPS = {"matrix": "viridis", "off_scale": "Greys"}

RC = {"font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "legend.fontsize": 8,
      "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False}

# MPI calls of the course's kernels, each in a colour of its own in every timeline (the exchange's
# sends and receives warm, the reduction violet, the non-blocking calls green and brown)
CALL_COLORS = {"MPI_Send": "#dd8452", "MPI_Recv": "#c44e52", "MPI_Allreduce": "#8172b3",
               "MPI_Isend": "#55a868", "MPI_Irecv": "#937860", "MPI_Waitall": "#da8bc3"}

# other MPI calls with a fixed place in tab20 (in this order); the rest share two slots
_CALLS = ["MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Sendrecv", "MPI_Wait",
          "MPI_Waitall", "MPI_Allreduce", "MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Test",
          "MPI_Testall", "MPI_Init", "MPI_Finalize", "MPI_Cart_create", "MPI_Comm_split",
          "MPI_Comm_dup"]


def rank_color(rank: int) -> str:
    """The colour of one rank (or of the n-th item of a series), the same in every figure."""
    return RANKS[int(rank) % len(RANKS)]


def call_color(name: str) -> str:
    """The colour of one MPI call in a timeline (e.g. 'MPI_Sendrecv'), the same in every figure.
    CALL_COLORS first; then a fixed place in tab20; calls outside both take one of two spare
    slots, chosen by a stable hash of the name."""
    if name in CALL_COLORS:
        return CALL_COLORS[name]
    k = _CALLS.index(name) if name in _CALLS else len(_CALLS) + zlib.crc32(name.encode()) % 2
    return TAB20[(2 + k) % len(TAB20)]


def part_color(key: str) -> str:
    """The colour of one part of a run's time, by its Split attribute (T_comp, T_transfer,
    T_load, T_depend, T_rest)."""
    return PART_COLORS[key]
