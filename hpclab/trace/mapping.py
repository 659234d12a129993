"""Rank-to-node mappings for a 2D process grid, and what they cost in inter-node messages.

A P x Q Cartesian grid numbers ranks row-major (MPI_Cart_create's default): rank r sits at
row r // Q, column r % Q, and exchanges halos with up to 4 neighbours (no wrap-around). On nodes
of k cores the default ("linear") mapping puts ranks 0..k-1 on node 0, k..2k-1 on node 1, ...;
a blocked mapping puts an a x b tile of the grid (a * b = k) on each node, which cuts the
number of grid edges between nodes (seed 001: 24 x 16 grid on 16 nodes of 24 cores, tiles 6 x 4).

Outputs: rank -> node index lists, the host file for Slurm's `--distribution=arbitrary`
(SLURM_HOSTFILE: line r = host of rank r) and an Open MPI rankfile.
"""

from __future__ import annotations

import numpy as np

from hpclab.core.errors import HpclabError
from hpclab.trace.matrix import aggregate, message_matrix


def _check(px, py, k):
    for what, v in (("P", px), ("Q", py), ("cores per node", k)):
        if not (isinstance(v, (int, np.integer)) and v >= 1):
            raise HpclabError(f"{what} = {v!r} must be a positive integer")


def linear_mapping(px: int, py: int, k: int) -> list[int]:
    """Node index of every rank when ranks fill nodes in order, k per node."""
    _check(px, py, k)
    return [r // k for r in range(px * py)]


def tile_shapes(px: int, py: int, k: int) -> list[tuple[int, int]]:
    """All (a, b) with a * b = k that tile a px x py grid exactly, squarest first."""
    _check(px, py, k)
    shapes = [(a, k // a) for a in range(1, k + 1) if k % a == 0 and px % a == 0 and py % (k // a) == 0]
    return sorted(shapes, key=lambda s: (s[0] + s[1], s))


def blocked_mapping(px: int, py: int, k: int, tile: tuple[int, int] | None = None) -> list[int]:
    """Node index of every rank when each node holds an a x b tile (default: the squarest tile)."""
    shapes = tile_shapes(px, py, k)
    if tile is None:
        if not shapes:
            raise HpclabError(f"no a x b tile with a * b = {k} divides a {px} x {py} grid",
                              "choose a grid whose sides are multiples of a factorisation of k")
        tile = shapes[0]
    a, b = tile
    if a * b != k or px % a or py % b:
        raise HpclabError(f"tile {a} x {b} does not fit: need a * b = {k}, {px} % a = 0, {py} % b = 0",
                          f"possible tiles: {shapes}")
    tiles_per_row = py // b
    return [(r // py // a) * tiles_per_row + (r % py) // b for r in range(px * py)]


def neighbour_pairs(px: int, py: int) -> np.ndarray:
    """Unordered pairs (r, s) of grid neighbours, shape (E, 2): horizontal then vertical edges."""
    g = np.arange(px * py).reshape(px, py)
    return np.concatenate([np.c_[g[:, :-1].ravel(), g[:, 1:].ravel()],
                           np.c_[g[:-1, :].ravel(), g[1:, :].ravel()]])


def internode_messages(px: int, py: int, nodes: list[int], exchanges: int = 1) -> int:
    """Messages between different nodes per iteration: every neighbour pair on different nodes
    sends one message each way per halo exchange, `exchanges` exchanges per iteration."""
    if len(nodes) != px * py:
        raise HpclabError(f"the mapping has {len(nodes)} entries for a {px} x {py} grid")
    pairs = neighbour_pairs(px, py)
    nd = np.asarray(nodes)
    return int(2 * exchanges * np.count_nonzero(nd[pairs[:, 0]] != nd[pairs[:, 1]]))


def node_names(count: int, prefix: str = "node") -> list[str]:
    """Default host names node01, node02, ..."""
    width = max(2, len(str(count)))
    return [f"{prefix}{i + 1:0{width}d}" for i in range(count)]


def hosts_of(nodes: list[int], names: list[str] | None = None) -> dict[int, str]:
    """rank -> hostname for a mapping (the `hosts` side table of a Trace)."""
    names = names or node_names(max(nodes) + 1)
    if max(nodes) >= len(names):
        raise HpclabError(f"the mapping uses {max(nodes) + 1} nodes but only {len(names)} names were given")
    return {r: names[n] for r, n in enumerate(nodes)}


def slurm_hostfile(nodes: list[int], names: list[str] | None = None) -> str:
    """File content for SLURM_HOSTFILE with `srun --distribution=arbitrary`: line r = host of rank r."""
    h = hosts_of(nodes, names)
    return "".join(f"{h[r]}\n" for r in range(len(nodes)))


def rankfile(nodes: list[int], names: list[str] | None = None) -> str:
    """Open MPI rankfile (mpirun --rankfile FILE): `rank r=host slot=s`, s counting per node."""
    h = hosts_of(nodes, names)
    used: dict[str, int] = {}
    lines = []
    for r in range(len(nodes)):
        s = used.get(h[r], 0)
        used[h[r]] = s + 1
        lines.append(f"rank {r}={h[r]} slot={s}\n")
    return "".join(lines)


def internode_from_trace(trace, iterations: int) -> float:
    """Inter-node messages per iteration counted in a trace: the off-diagonal count of its
    message matrix aggregated to nodes, divided by `iterations`."""
    return aggregate(message_matrix(trace), trace.hosts).off_diagonal("count") / iterations
