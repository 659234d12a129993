"""What a collective costs, by algorithm: the textbook formulas and each algorithm's messages.

Every point-to-point message of n bytes costs alpha + n * beta (Hockney's model: R. Hockney, "The
communication challenge for MPP: Intel Paragon and Meiko CS-2", Parallel Computing 20, 1994),
plus gamma per byte a rank reduces. With p ranks (a power of two) and n bytes per rank, the
textbook costs are those of R. Thakur, R. Rabenseifner and W. Gropp, "Optimization of collective
communication operations in MPICH", IJHPCA 19(1), 2005, and, for the pipelined chain, E. Chan,
M. Heimlich, A. Purkayastha and R. van de Geijn, "Collective communication: theory, practice, and
experience", CCPE 19(13), 2007 (lg = log2):

    allreduce  recursive_doubling  lg p alpha + n lg p beta + n lg p gamma
               ring                2(p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma
               rabenseifner        2 lg p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma
                                   (reduce-scatter by vector halving, distance doubling; then
                                   allgather by vector doubling, distance halving)
               reduce_bcast        2 lg p alpha + 2 n lg p beta + n lg p gamma (binomial trees)
    bcast      binomial            lg p (alpha + n beta)       (MPICH's tree: farthest child first;
               binomial_near_first the same cost                Open MPI's: nearest first)
               linear              (p-1) (alpha + n beta)
               chain               (p - 2 + k) (alpha + n/k beta), k segments (k = 1: no pipeline)
               scatter_allgather   2 lg p alpha + 2 (p-1)/p n beta (binomial scatter, recursive
                                   doubling allgather: van de Geijn's)
               scatter_ring_allgather  (lg p + p - 1) alpha + 2 (p-1)/p n beta
    alltoall   pairwise            (p-1) (alpha + n beta)      (n: the block for each rank)
               linear_alltoall     (p-1) (alpha + n beta)      (one port: the sends queue)
               bruck               lg p (alpha + n p/2 beta)

These assume every pair of ranks is equally far apart, and each rank sends one message and
receives one at a time (the "one-port" model). Neither holds for ranks on nodes: a message inside
a node costs another alpha and beta than one between nodes, and the ranks of one node share its
link. So each algorithm is also written out as its messages, step by step (`schedule`), and
`schedule_time` prices a schedule on a `Network` for a placement of the ranks on nodes: a step
lasts as long as its slowest rank's sends (or receives), one after another, or its busiest node
link, whichever is longer. Written for a uniform network with one rank per node, every schedule
costs exactly the textbook formula (tests/test_collective_model.py checks it), so the two agree
where the textbook applies and the schedule says what placement changes.

The rest compares the model with measurements: `predict` tabulates each algorithm's predicted
time per size and placement, `winners` the fastest, `winner_changes` the sizes where it changes,
`measured_winners` the fastest measured algorithm per cell, decided by the course's statistics
(hpclab.analysis.stats, through hpclab.analysis.phrases), and `against_model` the two side by side,
with `agreement` counting the cells where the model named the measured winner among those the
statistics decided. Every function is pure; times are microseconds, sizes bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from hpclab.analysis import phrases, stats
from hpclab.analysis.fits import HockneyFit
from hpclab.core.errors import HpclabError

# The algorithms the model knows, per operation; the names are the `model` of the MPI libraries'
# records (hpclab.site.mpi_libraries.Algorithm), which map each library's own names onto them.
ALGORITHMS = {
    "allreduce": ("recursive_doubling", "ring", "rabenseifner", "reduce_bcast", "hierarchical"),
    "bcast": ("binomial", "binomial_near_first", "linear", "chain", "scatter_allgather", "scatter_ring_allgather",
              "hierarchical"),
    "alltoall": ("pairwise", "linear_alltoall", "bruck"),
}
# No textbook closed form (its cost depends on the nodes): priced from its schedule only.
SCHEDULE_ONLY = {"hierarchical"}


@dataclass(frozen=True)
class Hockney:
    """One kind of point-to-point path: a message of n bytes costs alpha_us + n * beta_us_per_byte."""

    alpha_us: float
    beta_us_per_byte: float

    def __post_init__(self):
        if self.alpha_us < 0 or self.beta_us_per_byte < 0:
            raise HpclabError(f"a Hockney path needs alpha >= 0 and beta >= 0 (got {self.alpha_us}, "
                              f"{self.beta_us_per_byte})", "fit the path again (hpclab.analysis.fits)")

    @classmethod
    def from_fit(cls, fit: HockneyFit, latency_us: float | None = None) -> "Hockney":
        """From hpclab.analysis.fits.hockney_fit: beta = 1 / BW (BW in MB/s is bytes per us);
        alpha its latency, or `latency_us` when given (the measured time of a small message, for
        a fit over large messages only, whose intercept says nothing about small ones)."""
        return cls(fit.latency_us if latency_us is None else float(latency_us), 1.0 / fit.bandwidth_mb_s)

    def time(self, nbytes) -> np.ndarray | float:
        """alpha + n beta, microseconds, for n bytes (scalar or array)."""
        return self.alpha_us + np.asarray(nbytes, dtype=float) * self.beta_us_per_byte


@dataclass(frozen=True)
class Network:
    """Where the ranks talk: `inter` between nodes, `intra` inside one (None: as `inter`, a uniform
    network); gamma_us_per_byte, the time a rank takes to reduce one byte; shared_link: the
    messages that leave (or enter) one node in one step share its link (its bytes queue on it)."""

    inter: Hockney
    intra: Hockney | None = None
    gamma_us_per_byte: float = 0.0
    shared_link: bool = True

    def path(self, same_node: bool) -> Hockney:
        return self.intra if (same_node and self.intra is not None) else self.inter


# --- the textbook formulas ----------------------------------------------------------------------

def _lg(p: int) -> int:
    if p < 2 or p & (p - 1):
        raise HpclabError(f"the textbook formulas take a power of two ranks, not p={p}",
                          "use p = 2, 4, 8, ... (the algorithms' non-power-of-two steps are not modelled)")
    return p.bit_length() - 1


def textbook(op: str, algorithm: str, p: int, nbytes, alpha_us: float, beta_us_per_byte: float,
             gamma_us_per_byte: float = 0.0, segments: int = 1):
    """The textbook cost (microseconds) of `algorithm` for `op` on p ranks (a power of two) with
    nbytes per rank (Alltoall: the block for each rank), scalar or array; segments: the chain's
    pipeline depth (k). Raises HpclabError for an algorithm without a closed form."""
    n = np.asarray(nbytes, dtype=float)
    a, b, g, lg = alpha_us, beta_us_per_byte, gamma_us_per_byte, _lg(p)
    share = (p - 1) / p
    forms = {
        ("allreduce", "recursive_doubling"): lambda: lg * a + n * lg * b + n * lg * g,
        ("allreduce", "ring"): lambda: 2 * (p - 1) * a + 2 * share * n * b + share * n * g,
        ("allreduce", "rabenseifner"): lambda: 2 * lg * a + 2 * share * n * b + share * n * g,
        ("allreduce", "reduce_bcast"): lambda: 2 * lg * a + 2 * n * lg * b + n * lg * g,
        ("bcast", "binomial"): lambda: lg * (a + n * b),
        ("bcast", "binomial_near_first"): lambda: lg * (a + n * b),
        ("bcast", "linear"): lambda: (p - 1) * (a + n * b),
        ("bcast", "chain"): lambda: (p - 2 + segments) * (a + n / segments * b),
        ("bcast", "scatter_allgather"): lambda: 2 * lg * a + 2 * share * n * b,
        ("bcast", "scatter_ring_allgather"): lambda: (lg + p - 1) * a + 2 * share * n * b,
        ("alltoall", "pairwise"): lambda: (p - 1) * (a + n * b),
        ("alltoall", "linear_alltoall"): lambda: (p - 1) * (a + n * b),
        ("alltoall", "bruck"): lambda: lg * (a + n * p / 2 * b),
    }
    if (op, algorithm) not in forms:
        raise HpclabError(f"no textbook formula for {op} {algorithm!r}",
                          f"known: {', '.join(a for o, a in forms if o == op)}; price it with schedule_time")
    out = forms[(op, algorithm)]()
    return float(out) if out.ndim == 0 else out


# --- each algorithm's messages -------------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """One step of an algorithm: its messages (src, dst, bytes) and the bytes the busiest rank
    reduces once they arrived."""

    messages: tuple[tuple[int, int, float], ...]
    reduce_bytes: float = 0.0


def _powers_below(p: int) -> list[int]:
    """1, 2, 4, ... below p: the distances of a doubling algorithm's steps."""
    return [1 << k for k in range((p - 1).bit_length())]


def _fold(ranks: Sequence[int], n: float) -> tuple[list[Step], list[int], list[Step]]:
    """MPICH's way to run a power-of-two algorithm on m ranks that are not a power of two: the
    first 2r ranks (r = m - 2^k) pair up, each even one hands its data to the odd one next to it
    (which reduces it), the 2^k that remain run the algorithm, and the odd ones hand the result
    back. Returns (the step before, the ranks that remain, the step after)."""
    m = len(ranks)
    rest = m - (1 << (m.bit_length() - 1))
    if rest == 0:
        return [], list(ranks), []
    before = [Step(tuple((ranks[2 * i], ranks[2 * i + 1], n) for i in range(rest)), n)]
    after = [Step(tuple((ranks[2 * i + 1], ranks[2 * i], n) for i in range(rest)))]
    return before, [ranks[2 * i + 1] for i in range(rest)] + list(ranks[2 * rest:]), after


def _recursive_doubling_over(ranks: Sequence[int], n: float) -> list[Step]:
    """Allreduce by recursive doubling over the ranks listed (any count: see _fold)."""
    before, core, after = _fold(ranks, n)
    m, steps, d = len(core), [], 1
    while d < m:
        steps.append(Step(tuple((core[i], core[i ^ d], n) for i in range(m)), n))
        d <<= 1
    return before + steps + after


def _rabenseifner_over(ranks: Sequence[int], n: float) -> list[Step]:
    """Rabenseifner's allreduce over the ranks listed (any count: see _fold)."""
    before, core, after = _fold(ranks, n)
    inner = _rabenseifner(len(core), n)
    return before + [Step(tuple((core[a], core[b], x) for a, b, x in s.messages), s.reduce_bytes)
                     for s in inner] + after


def _binomial_bcast(p, n, root=0, ranks=None):
    """MPICH's binomial tree: the root sends to the farthest half first (distance p/2, p/4, ...).
    ranks: the ranks taking part, in tree order (default 0..p-1), ranks[0] the root."""
    ranks = list(range(p)) if ranks is None else list(ranks)
    m, steps, mask = len(ranks), [], 1
    while mask < m:
        mask <<= 1
    mask >>= 1
    while mask:
        msgs = tuple((ranks[r], ranks[r + mask], n) for r in range(0, m, 2 * mask) if r + mask < m)
        steps.append(Step(msgs))
        mask >>= 1
    return steps


def _binomial_near_first(p, n):
    """Open MPI's binomial tree (coll_base_topo's bmtree): rank v's children are v + mask for every
    power of two mask above v's highest bit, and each rank sends to its children nearest first,
    one after another, once it has the data: from the root, 1, then 2 (while 1 sends to 3), ..."""
    got, steps = {0: 0}, {}
    for v in range(p):                      # parents come before their children in rank order
        mask = 1 << v.bit_length() if v else 1
        k = got[v]
        while v + mask < p:
            k += 1
            got[v + mask] = k
            steps.setdefault(k, []).append((v, v + mask, n))
            mask <<= 1
    return [Step(tuple(steps[k])) for k in sorted(steps)]


def _binomial_reduce(p, n, ranks=None):
    """The mirror of the binomial broadcast: partners at distance 1, 2, ... send to the lower."""
    ranks = list(range(p)) if ranks is None else list(ranks)
    m, steps, mask = len(ranks), [], 1
    while mask < m:
        msgs = tuple((ranks[r + mask], ranks[r], n) for r in range(0, m, 2 * mask) if r + mask < m)
        steps.append(Step(msgs, n))
        mask <<= 1
    return steps


def _ring(p, block, count, reduce):
    return [Step(tuple((r, (r + 1) % p, block) for r in range(p)), block if reduce else 0.0) for _ in range(count)]


def _scatter_binomial(p, n):
    """Binomial scatter from rank 0 of n bytes in p blocks (MPICH's, any p): down the binomial
    tree, each rank hands on the blocks of the ranks below it in the tree."""
    block, steps, mask = n / p, [], 1
    while mask < p:
        mask <<= 1
    mask >>= 1
    while mask:
        steps.append(Step(tuple((r, r + mask, block * (min(r + 2 * mask, p) - r - mask))
                                for r in range(0, p, 2 * mask) if r + mask < p)))
        mask >>= 1
    return steps


def _allgather_doubling(p, n):
    """Recursive doubling allgather of n bytes in p blocks: distance 1, 2, ..., 2^k blocks each."""
    steps, d = [], 1
    while d < p:
        steps.append(Step(tuple((r, r ^ d, n * d / p) for r in range(p))))
        d <<= 1
    return steps


def _rabenseifner(p, n):
    """Reduce-scatter by vector halving and distance doubling, then allgather by vector doubling
    and distance halving (MPICH's and Open MPI's reduce_scatter_allgather / rabenseifner)."""
    steps, d, part = [], 1, n
    while d < p:
        part /= 2
        steps.append(Step(tuple((r, r ^ d, part) for r in range(p)), part))
        d <<= 1
    d >>= 1
    while d >= 1:
        steps.append(Step(tuple((r, r ^ d, part) for r in range(p))))
        part *= 2
        d >>= 1
    return steps


def _chain(p, n, segments):
    k = max(1, int(segments))
    seg = n / k
    steps = []
    for s in range(p - 2 + k):
        msgs = tuple((r, r + 1, seg) for r in range(p - 1) if 0 <= s - r < k)
        steps.append(Step(msgs))
    return steps


def _leaders(node_of: Sequence[int]) -> tuple[list[int], dict[int, list[int]]]:
    """The lowest rank of each node (its leader), in node order, and each node's ranks."""
    members: dict[int, list[int]] = {}
    for r, node in enumerate(node_of):
        members.setdefault(node, []).append(r)
    return [m[0] for m in members.values()], members


def _merge(*phases: list[Step]) -> list[Step]:
    """Phases that run at once on disjoint ranks, step by step."""
    out = []
    for k in range(max((len(ph) for ph in phases), default=0)):
        parts = [ph[k] for ph in phases if k < len(ph)]
        out.append(Step(tuple(m for s in parts for m in s.messages), max(s.reduce_bytes for s in parts)))
    return out


def _hierarchical(op, p, n, node_of, across="recursive_doubling"):
    """Node-aware (MPICH's smp and ch4 compositions, Open MPI's han): inside each node to its
    leader, between the leaders (Allreduce: `across`, recursive_doubling or rabenseifner), then
    inside each node from its leader."""
    if node_of is None:
        node_of = list(range(p))
    leaders, members = _leaders(node_of)
    inside = [ranks for ranks in members.values() if len(ranks) > 1]
    if op == "allreduce":
        up = _merge(*[_binomial_reduce(len(r), n, r) for r in inside])
        between = (_rabenseifner_over if across == "rabenseifner" else _recursive_doubling_over)(leaders, n)
        down = _merge(*[_binomial_bcast(len(r), n, ranks=r) for r in inside])
        return up + between + down
    # bcast from rank 0: first between the leaders (the root's node first), then in each node
    root_node = node_of[0]
    order = [leaders[i] for i in range(len(leaders)) if node_of[leaders[i]] == root_node] + \
            [x for x in leaders if node_of[x] != root_node]
    return _binomial_bcast(len(order), n, ranks=order) + _merge(*[_binomial_bcast(len(r), n, ranks=r) for r in inside])


def schedule(op: str, algorithm: str, p: int, nbytes: float, segments: int = 1,
             node_of: Sequence[int] | None = None) -> list[Step]:
    """The messages of `algorithm` for `op` on p ranks with nbytes per rank, step by step (Bcast's
    root is rank 0; Alltoall's nbytes the block for each rank). Any p: recursive doubling and
    Rabenseifner fold the ranks beyond a power of two first, as MPICH does (_fold); only the
    recursive-doubling allgather of scatter_allgather needs a power of two. segments: the chain's
    pipeline depth; node_of: each rank's node, which only the hierarchical algorithms read
    ('hierarchical_rabenseifner': Rabenseifner's between the node leaders, MPICH's choice for
    larger messages)."""
    if p < 2:
        raise HpclabError(f"a collective of {p} rank(s) sends nothing", "use 2 ranks or more")
    if (op, algorithm) == ("bcast", "scatter_allgather"):
        _lg(p)
    n = float(nbytes)
    if algorithm in ("hierarchical", "hierarchical_rabenseifner") and op in ("allreduce", "bcast"):
        return _hierarchical(op, p, n, node_of, across=algorithm.partition("_")[2] or "recursive_doubling")
    builders = {
        ("allreduce", "recursive_doubling"): lambda: _recursive_doubling_over(range(p), n),
        ("allreduce", "ring"): lambda: _ring(p, n / p, p - 1, True) + _ring(p, n / p, p - 1, False),
        ("allreduce", "rabenseifner"): lambda: _rabenseifner_over(range(p), n),
        ("allreduce", "reduce_bcast"): lambda: _binomial_reduce(p, n) + _binomial_bcast(p, n),
        ("bcast", "binomial"): lambda: _binomial_bcast(p, n),
        ("bcast", "binomial_near_first"): lambda: _binomial_near_first(p, n),
        ("bcast", "linear"): lambda: [Step(tuple((0, r, n) for r in range(1, p)))],
        ("bcast", "chain"): lambda: _chain(p, n, segments),
        ("bcast", "scatter_allgather"): lambda: _scatter_binomial(p, n) + _allgather_doubling(p, n),
        ("bcast", "scatter_ring_allgather"): lambda: _scatter_binomial(p, n) + _ring(p, n / p, p - 1, False),
        ("alltoall", "pairwise"): lambda: [Step(tuple((r, (r + s) % p, n) for r in range(p))) for s in range(1, p)],
        ("alltoall", "linear_alltoall"): lambda: [Step(tuple((r, d, n) for r in range(p) for d in range(p) if d != r))],
        # step d: each rank hands on the blocks whose index has bit d set
        ("alltoall", "bruck"): lambda: [Step(tuple((r, (r + d) % p, n * blocks) for r in range(p)))
                                        for d, blocks in ((d, sum(1 for j in range(p) if j & d)) for d in _powers_below(p))],
    }
    if (op, algorithm) not in builders:
        raise HpclabError(f"no schedule for {op} {algorithm!r}", f"known: {', '.join(ALGORITHMS.get(op, ()))}")
    return builders[(op, algorithm)]()


def step_time(step: Step, network: Network, node_of: Sequence[int]) -> float:
    """How long one step lasts (us): the longest of each rank's sends one after another, each
    rank's receives one after another, and, with a shared link, each node's bytes out of (and into)
    the node one after another on its link (one alpha, as a stream); then the reduction.
    (In arrays: 384 ranks' steps are priced in a second, not in half a minute.)"""
    reduce = step.reduce_bytes * network.gamma_us_per_byte
    if not step.messages:
        return reduce
    msgs = np.asarray(step.messages, dtype=float)
    src, dst, size = msgs[:, 0].astype(int), msgs[:, 1].astype(int), msgs[:, 2]
    nodes = np.asarray(node_of)
    src_node, dst_node = nodes[src], nodes[dst]
    same = src_node == dst_node
    inside, between = network.path(True), network.inter
    t = np.where(same, inside.alpha_us + size * inside.beta_us_per_byte,
                 between.alpha_us + size * between.beta_us_per_byte)
    longest = max(float(np.bincount(src, weights=t).max()), float(np.bincount(dst, weights=t).max()), 0.0)
    cross = ~same
    if network.shared_link and cross.any():
        for ends in (src_node[cross], dst_node[cross]):   # only the nodes some message leaves or enters
            per_node = np.bincount(ends, weights=size[cross])[np.unique(ends)]
            longest = max(longest, float(between.time(per_node.max())))
    return longest + reduce


def schedule_time(steps: Iterable[Step], network: Network, node_of: Sequence[int]) -> float:
    """The time (us) of a schedule: its steps one after another (step_time)."""
    nodes = np.asarray(node_of)
    return float(sum(step_time(s, network, nodes) for s in steps))


def placement(p: int, nodes: int, order: str) -> list[int]:
    """Each rank's node for p ranks on `nodes` nodes: 'block' fills a node before the next (as
    srun --distribution=block), 'cyclic' deals the ranks out one node at a time; 'world' is block."""
    if nodes < 1 or p % nodes:
        raise HpclabError(f"{p} ranks do not spread evenly over {nodes} node(s)", "use a rank count the nodes divide")
    if order in ("block", "world"):
        return [r // (p // nodes) for r in range(p)]
    if order == "cyclic":
        return [r % nodes for r in range(p)]
    raise HpclabError(f"unknown placement {order!r}", "use block or cyclic")


# --- predictions over sizes and placements -----------------------------------------------------

def predict(network: Network, p: int, nodes: int, sizes: Iterable[float], algorithms: dict[str, Sequence[str]],
            orders: Sequence[str] = ("block", "cyclic"), segments: int = 1) -> pd.DataFrame:
    """Each algorithm's predicted time per size and placement. algorithms: {op: [model names]}.
    Returns op, order, algorithm, bytes, t_pred_usec (one row each)."""
    rows = []
    for order in orders:
        node_of = placement(p, nodes, order)
        for op, algs in algorithms.items():
            for alg in algs:
                for n in sizes:
                    t = schedule_time(schedule(op, alg, p, n, segments, node_of), network, node_of)
                    rows.append({"op": op, "order": order, "algorithm": alg, "bytes": int(n), "t_pred_usec": t})
    return pd.DataFrame(rows, columns=["op", "order", "algorithm", "bytes", "t_pred_usec"])


def winners(pred: pd.DataFrame, time: str = "t_pred_usec") -> pd.DataFrame:
    """The fastest algorithm per (op, order, bytes) of a predict() table: op, order, bytes,
    algorithm, its time, runner_up and `lead` (runner-up's time over the winner's)."""
    rows = []
    for (op, order, n), cell in pred.groupby(["op", "order", "bytes"], sort=False):
        cell = cell.sort_values(time)
        best = cell.iloc[0]
        second = cell.iloc[1] if len(cell) > 1 else None
        rows.append({"op": op, "order": order, "bytes": int(n), "algorithm": best["algorithm"], time: best[time],
                     "runner_up": None if second is None else second["algorithm"],
                     "lead": math.nan if second is None or best[time] <= 0 else second[time] / best[time]})
    return pd.DataFrame(rows)


def winner_changes(network: Network, p: int, nodes: int, op: str, algorithms: Sequence[str], order: str,
                   lo: float = 1.0, hi: float = float(64 << 20), segments: int = 1) -> list[tuple[str, str, float]]:
    """Where the predicted winner changes between lo and hi bytes: [(winner below, winner above,
    the size in bytes where they cost the same)], found on a fine geometric grid and refined by
    bisection (the costs are piecewise linear in the size)."""
    node_of = placement(p, nodes, order)

    def best(n):
        costs = {a: schedule_time(schedule(op, a, p, n, segments, node_of), network, node_of) for a in algorithms}
        return min(costs, key=lambda a: (costs[a], list(algorithms).index(a)))

    grid = np.geomspace(lo, hi, 400)
    out, prev, prev_n = [], best(grid[0]), grid[0]
    for n in grid[1:]:
        now = best(n)
        if now != prev:
            a, b = prev_n, n
            for _ in range(60):
                mid = (a + b) / 2
                a, b = (mid, b) if best(mid) == prev else (a, mid)
            out.append((prev, now, (a + b) / 2))
            prev = now
        prev_n = n
    return out


# --- measured winners, decided by the statistics -----------------------------------------------

def measured_winners(table: pd.DataFrame, time: str = "t_max_usec", paired: bool = True,
                     margin: float = stats.MARGIN, level: float = stats.LEVEL) -> pd.DataFrame:
    """The fastest measured algorithm per (op, order, bytes), and whether the statistics decide it.

    table: one row per run and algorithm with op, order, algorithm, bytes, round and `time` (the
    collectives kernel's table with the forced algorithm's model name in `algorithm`). The
    candidate is the algorithm of the lowest median; it is compared with every other algorithm of
    the cell (phrases.compare: stats.decide on the ratio of times, paired by round when `paired`).
    outcome: 'decided' when it is decided faster than each of them; 'tie' when one of them is
    within the margin (no difference larger than it) and none is decided faster; else 'undecided'.
    Returns op, order, bytes, measured (the candidate), outcome, tied (the algorithms within the
    margin, comma-separated), closest (the rival with the highest ratio estimate), ratio, ci (its
    95 % CI, rival over candidate), runs."""
    rows = []
    for (op, order, n), cell in table.groupby(["op", "order", "bytes"], sort=False):
        by_alg = {a: g.sort_values("round") for a, g in cell.groupby("algorithm", sort=False)}
        medians = {a: float(g[time].median()) for a, g in by_alg.items()}
        best = min(medians, key=medians.get)
        comparisons = {}
        for other, g in by_alg.items():
            if other == best:
                continue
            a, b = g, by_alg[best]
            if paired:
                common = sorted(set(a["round"]) & set(b["round"]))
                a, b = a[a["round"].isin(common)], b[b["round"].isin(common)]
            comparisons[other] = phrases.compare(a[time].to_numpy(), b[time].to_numpy(), a_name=other, b_name=best,
                                                 unit="us", paired=paired, margin=margin, level=level)
        faster = [o for o, c in comparisons.items() if c.outcome == "different" and c.winner == best]
        ties = [o for o, c in comparisons.items() if c.outcome == "equivalent"]
        beaten = [o for o, c in comparisons.items() if c.outcome == "different" and c.winner != best]
        outcome = ("decided" if comparisons and len(faster) == len(comparisons) else
                   "tie" if ties and not beaten and len(faster) + len(ties) == len(comparisons) else "undecided")
        closest = min(comparisons, key=lambda o: comparisons[o]._estimate()) if comparisons else None
        c = comparisons.get(closest)
        r = c.decision.ratio if c is not None and c.decision is not None else None
        rows.append({"op": op, "order": order, "bytes": int(n), "measured": best, "outcome": outcome,
                     "tied": ", ".join(ties), "closest": closest,
                     "ratio": math.nan if r is None else r.estimate,
                     "ci": "-" if r is None else f"{r.lo:.3g}-{r.hi:.3g}",
                     "runs": int(by_alg[best][time].count())})
    return pd.DataFrame(rows)


def against_model(measured: pd.DataFrame, predicted: pd.DataFrame) -> pd.DataFrame:
    """measured_winners beside winners(predict(...)) on the same cells: op, order, bytes, measured,
    outcome, predicted (the model's winner), agree (the model named the measured winner; in a
    'tie' cell, any of the tied algorithms counts), counted (the cell is one the statistics
    decide: 'decided' or 'tie')."""
    pred = predicted.rename(columns={"algorithm": "predicted"})[["op", "order", "bytes", "predicted"]]
    out = measured.merge(pred, on=["op", "order", "bytes"], how="left")
    tied = out["tied"].fillna("").str.split(", ")
    out["agree"] = [(pr == m) or (o == "tie" and pr in t) for pr, m, o, t in
                    zip(out["predicted"], out["measured"], out["outcome"], tied)]
    out["counted"] = out["outcome"].isin(["decided", "tie"])
    return out


@dataclass(frozen=True)
class Agreement:
    """How often the model named the measured winner: `right` of `counted` cells the statistics
    decide, out of `cells` in all."""

    right: int
    counted: int
    cells: int

    @property
    def fraction(self) -> float:
        return self.right / self.counted if self.counted else math.nan


def agreement(table: pd.DataFrame) -> Agreement:
    """Count against_model's rows: right (agree among counted), counted, cells."""
    counted = table[table["counted"]]
    return Agreement(int(counted["agree"].sum()), len(counted), len(table))
