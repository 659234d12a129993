"""The imbalance analysis of traced Poisson runs (notebooks 05 and 05b): their split, and the same
analysis simulated at the 2014 talk's 384-rank scale.

The trace machinery lives in hpclab.trace (replay, split, wait states, matrices, mappings); this
module strings it together over runs and tables, and prints, draws, submits and words nothing (the
lessons' specs and experiments, the talk's cases, and the sentences on what the runs show are the
imbalance lesson's, in hpclab.course.lessons; the figures are hpclab.plots.imbalance):

- `halo_bytes`, `rendezvous_n`: the halo messages of a grid, and the n that puts them above the
  eager limit;
- `analyse(runs)`, `split_table`, `summary`: traced runs -> one row per run with the split
  (seconds) -> min / median / max of each component over repetitions;
- `pingpong_model(...)`, `link_rows`, `model_table`: an intra/inter-node Hockney model fitted to
  a pingpong run of this machine (intra) and, for the inter-node link, to the quoted 2019
  InfiniBand pingpong;
- `seed_scale(...)`: the talk's 384-rank, 16-node Poisson cases generated from rates measured
  here, replayed under that model, split the same way (a simulation, labelled as such);
- `dependency_table(...)`: the naive exchange (the 2014 code's order) against the non-blocking
  one, T_depend of each relative to non-blocking;
- `subdomain_shapes`, `subdomain_table`, `subdomain_rates`: each simulated case's subdomain shape
  (the seed's local grids, scaled to this machine's cache) and the compute rates its single-rank
  runs give `seed_scale`;
- `mapping_layouts`, `mapping_counts`: the linear against a blocked rank-to-node mapping, with
  the inter-node messages predicted and counted;
- `split_shares`, `inter_eager_limit`: a measured split's parts as shares of its run time, and
  the eager limit the model gives its inter-node link.

A case of the simulation is a tuple (label, P, Q, exchange, mapping): P x Q ranks, exchange
"naive" (every rank sends first, then receives) or "nonblocking", mapping "linear" or "blocked".
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hpclab.core.errors import HpclabError
from hpclab.core import seedfacts
from hpclab.kernels import pingpong, poisson as poisson_report
from hpclab.trace import mapping, split as tsplit
from hpclab.trace.load import load_run
from hpclab.trace.mapping import blocked_mapping, hosts_of, internode_from_trace, linear_mapping
from hpclab.trace.matrix import aggregate, message_matrix
from hpclab.trace.model import IDEAL, NO_LIMIT, NetworkModel, model_from_pingpong
from hpclab.trace.poisson import PHASES, SEED_SCALE, poisson_trace, rates_from_poisson, split_sizes
from hpclab.trace.profile import regions
from hpclab.trace.replay import replay
from hpclab.trace.split import run_time, split

# The five parts of hpclab.trace.split in stacking order. "rest" is the time the network model
# does not explain: on an oversubscribed run, mostly ranks waiting for a core. A split without a
# model (or a quoted diagram) has no rest.
PARTS = (("T_comp", "compute"), ("T_transfer", "transfer"), ("T_load", "load imbalance"),
         ("T_depend", "dependency"), ("T_rest", "rest: not running or not modelled"))

REST = PARTS[-1][1]

# Halo messages of the solver are at most a few 10 kB: fit the pingpong over that range only, so
# the latency is not swamped by megabyte messages that the solver never sends.
FIT_MAX_BYTES = 65536


def halo_bytes(grid: str, n: int) -> int:
    """The smallest halo message (bytes) of an n x n Poisson run on grid 'PxQ': a rank sends
    its row of n/Q doubles along x (if P > 1) and its column of n/P doubles along y (if Q > 1),
    the shortest pieces of the uneven split (floor) counting. 0 on a 1x1 grid (no messages)."""
    p, q = (int(x) for x in grid.split("x"))
    sizes = ([8 * (n // q)] if p > 1 else []) + ([8 * (n // p)] if q > 1 else [])
    return min(sizes) if sizes else 0


def rendezvous_n(grid: str, eager: int, factor: float = 2.0, multiple: int = 64) -> int:
    """The smallest n (a multiple of `multiple`) whose halo messages on grid 'PxQ' are all at
    least `factor` x `eager` bytes (see halo_bytes), so every blocking send of the exchange waits
    for its receive (rendezvous) and the naive exchange's chain is real. eager: the eager limit
    in bytes (ompi.eager_limit()). A factor of 2 keeps clear of the limit's header slack: measured
    here, vader sends a 4096-byte payload by rendezvous already (docs/kernel-contract.md)."""
    p, q = (int(x) for x in grid.split("x"))
    if p * q < 2:
        raise HpclabError(f"grid {grid} has one rank and sends no halo messages", "use a grid of 2 or more ranks")
    if eager < 0 or factor <= 0 or multiple < 1:
        raise HpclabError(f"eager = {eager}, factor = {factor}, multiple = {multiple}: need eager >= 0, factor > 0, "
                          "multiple >= 1")
    n = multiple
    while halo_bytes(grid, n) < factor * eager:
        n += multiple
    return n


def dependency_table(analysed: list[Analysed], iterations: int | None = None, model=None) -> pd.DataFrame:
    """T_depend (and the rest of the split) per exchange style: split_table of the runs with a
    column `exchange` (from the label), `T_solve` (the solver's own time for its solve loop, the
    kernel's wall_time: T_real without the set-up the trace's window holds; same unit) and, per
    row, T_depend divided by the median T_depend of the non-blocking runs
    (`depend_vs_nonblocking`; NaN without non-blocking runs or when their median is 0).

    On the ideal network a message costs nothing, so a rendezvous chain costs nothing either
    when the ranks arrive together: the naive order shows in T_depend only through the
    arrival differences (noise, imbalance) it passes along the chain. What the chain really
    costs is one message time per link, one after the other: 2 (P - 1) message times per
    dimension and exchange on a chain of P ranks, against about one for the non-blocking
    exchange. With `model` (a NetworkModel with latency, bandwidth and eager limit, e.g.
    pingpong_model(..., eager=ompi.eager_limit())) each trace is also replayed on it, and the
    columns `T_chain` (replay on the model minus the ideal replay: what messages cost, same
    unit as the other times) and `chain_vs_nonblocking` (over the non-blocking runs' median)
    show that cost."""
    tab = split_table(analysed, iterations)
    tab.insert(1, "exchange", [str(lbl).split()[-1] for lbl in tab["label"]])
    # the solver's own time for its solve loop (the kernel's wall_time, slowest rank), in the table's
    # unit: T_real without the set-up and connection start the trace's window holds
    scale = 1.0 if iterations is None else 1e3 / iterations
    tab["T_solve"] = [poisson_report.wall_time(a.result) * scale if a.result else float("nan") for a in analysed]

    def vs_nonblocking(col):
        base = tab.loc[tab["exchange"] == "nonblocking", col]
        ref = float(base.median()) if len(base) else float("nan")
        return tab[col] / ref if ref and ref == ref else float("nan")

    tab["depend_vs_nonblocking"] = vs_nonblocking("T_depend")
    if model is not None:
        scale = 1e-9 if iterations is None else 1e-6 / iterations
        tab["T_chain"] = [(run_time(replay(a.trace, model)) - run_time(a.ideal)) * scale for a in analysed]
        tab["chain_vs_nonblocking"] = vs_nonblocking("T_chain")
    return tab


@dataclass
class Analysed:
    """One traced run: its label, repetition, the measured trace, its ideal replay and split."""

    label: str
    repetition: int
    path: object
    trace: object
    ideal: object
    split: object
    result: dict = field(repr=False, default_factory=dict)


def ideal_model(eager: int | None = None, inter_eager: int | None = None):
    """The ideal network (zero latency, infinite bandwidth) that keeps MPI's protocol: messages
    above `eager` bytes (`inter_eager` between nodes, if given) still wait for their receive to
    be posted (rendezvous), as on any real network. With eager=None every message is eager
    (hpclab.trace.model.IDEAL)."""
    if eager is None:
        return IDEAL
    return NetworkModel(f"ideal (eager limit {eager} B)", IDEAL.intra, IDEAL.inter, int(eager),
                        inter_eager_limit=inter_eager)


def analyse(runs, eager: int | None = None, model=None, inter_eager: int | None = None) -> list[Analysed]:
    """Load each run's trace (hpclab.trace.load.load_run), replay it on the ideal network (with
    the eager limit `eager` in bytes, `inter_eager` between nodes, see ideal_model) and split it
    (hpclab.trace.split): five parts with `model` (the machine's fitted NetworkModel,
    pingpong_model), four without. runs: experiment.Run objects of traced Poisson specs."""
    ideal_net = ideal_model(eager, inter_eager)
    out = []
    for r in runs:
        tr = load_run(r.path)
        ideal = replay(tr, ideal_net)
        rep = int(r.folder.status().get("repetition", 1))
        out.append(Analysed(r.spec.label or r.spec.args.grid, rep, r.path, tr, ideal,
                            split(tr, ideal, model=model), r.result()))
    return out


def split_table(analysed: list[Analysed], iterations: int | None = None) -> pd.DataFrame:
    """One row per run: label, repetition, T_real, T_ideal, T_model, the five parts (T_comp,
    T_transfer, T_load, T_depend, T_rest), T_wait and T_off_cpu (mean time switched out during
    compute bursts) in seconds, or ms per iteration if `iterations` is given, and the POP
    efficiencies."""
    rows = []
    scale = 1e-9 if iterations is None else 1e-6 / iterations
    for a in analysed:
        s = a.split
        row = {"label": a.label, "repetition": a.repetition, "ranks": s.nranks}
        for k in ("T_real", "T_ideal", "T_model", "T_comp", "T_transfer", "T_load", "T_depend", "T_rest",
                  "T_wait", "T_off_cpu"):
            row[k] = getattr(s, k) * scale
        for k in ("load_balance", "serialisation", "transfer", "parallel"):
            row[k] = getattr(s, k)
        rows.append(row)
    return pd.DataFrame(rows)


def summary(table: pd.DataFrame, columns=("T_real", "T_comp", "T_transfer", "T_load", "T_depend", "T_rest",
                                          "parallel")) -> pd.DataFrame:
    """min / median / max over repetitions of each column, one row per label (order kept)."""
    order = list(dict.fromkeys(table["label"]))
    g = table.groupby("label", sort=False)[list(columns)].agg(["min", "median", "max"])
    return g.loc[order]


def median_runs(analysed: list[Analysed]) -> dict[str, Analysed]:
    """Per label, the repetition whose T_real is the median (the lower middle one for an even
    count): the run the notebook draws diagrams and timelines from."""
    by: dict[str, list[Analysed]] = {}
    for a in analysed:
        by.setdefault(a.label, []).append(a)
    out = {}
    for label, items in by.items():
        items = sorted(items, key=lambda a: a.split.T_real)
        out[label] = items[(len(items) - 1) // 2]
    return out


def iteration_window(trace, k: int) -> tuple[int, int]:
    """(t0, t1) ns around solver iteration k (0-based) on all ranks: from the earliest start of
    the k-th 'red' sweep to the latest end of the residuum that closes it (the solver computes
    one residuum before its first iteration, so that is the (k+1)-th)."""
    inst = regions(trace).instances
    if inst.empty or not {"red", "residuum"} <= set(inst["name"]):
        raise HpclabError("this trace has no 'red'/'residuum' regions",
                          "iteration windows need a traced run of the poisson kernel (tracer hooks active)")
    red = inst[inst["name"] == "red"].copy()
    res = inst[inst["name"] == "residuum"].copy()
    red["k"] = red.groupby("rank").cumcount()
    res["k"] = res.groupby("rank").cumcount() - 1
    a, b = red[red["k"] == k], res[res["k"] == k]
    if a.empty or b.empty:
        raise HpclabError(f"iteration {k} is not in this trace ({int(red['k'].max()) + 1} iterations)",
                          "iterations count from 0")
    return int(a["t0"].min()), int(b["t1"].max())


def quoted_inter_rows(network: str = "40G InfiniBand (Mellanox)", component: str = "pml/ucx") -> list[dict]:
    """Pingpong rows {bytes, t_usec} of one quoted 2019 network (hpclab.core.seedfacts.pingpong_2019):
    the inter-node link of the simulation, since one VM has no network to measure."""
    q = seedfacts.pingpong_2019()
    q = q[(q["network"] == network) & (q["component"] == component)]
    if q.empty:
        raise HpclabError(f"no quoted pingpong for {network!r} / {component!r}",
                          "see hpclab.core.seedfacts.pingpong_2019() for the networks available")
    return q[["bytes", "t_usec"]].to_dict("records")


def pingpong_model(rows: list[dict], *, inter_rows: list[dict] | None = None,
                   eager: int | None = None, inter_eager: int | None = None, max_bytes: int = FIT_MAX_BYTES,
                   name: str = "fitted"):
    """A NetworkModel (hpclab.trace.model) whose intra-node link is fitted to pingpong rows
    ({'bytes', 't_usec'}) up to max_bytes, and whose inter-node link is fitted to inter_rows
    (default: the same as intra). eager: eager limit in bytes (default: no rendezvous);
    inter_eager: the limit between nodes when the transport there differs (default: eager)."""
    use = [r for r in rows if r["bytes"] <= max_bytes]
    model = model_from_pingpong(use, inter_rows=inter_rows, eager_limit=NO_LIMIT if eager is None else eager,
                                name=name)
    return model.with_inter_eager(inter_eager) if inter_eager is not None else model


def model_table(model) -> pd.DataFrame:
    """The model's links in people's units: latency (us), bandwidth (MB/s), eager limit (bytes)."""
    rows = []
    for which, link in (("intra-node", model.intra), ("inter-node", model.inter)):
        limit = model.eager_limit if which == "intra-node" else model.inter_eager
        rows.append({"link": which, "latency_us": link.latency_ns / 1e3,
                     "bandwidth_MB_s": link.bandwidth_bpns * 1e3,
                     "eager_limit_bytes": None if limit >= NO_LIMIT else limit})
    return pd.DataFrame(rows).set_index("link")


def measured_rates(analysed: list[Analysed]) -> dict[str, float]:
    """ns per grid point per iteration for each compute phase (red, black, copy, residuum):
    the median over the given runs of hpclab.trace.poisson.rates_from_poisson."""
    if not analysed:
        raise HpclabError("no runs to take compute rates from", "run the traced Poisson experiment first")
    each = [rates_from_poisson(poisson_report.measures(a.result)) for a in analysed]
    return {ph: statistics.median(e[ph] for e in each) for ph in PHASES}


@dataclass
class Simulated:
    """One simulated configuration: label, the trace replayed on the model, its ideal replay,
    the split, the rank -> node list and the iterations simulated."""

    label: str
    trace: object
    ideal: object
    split: object
    nodes: list
    iterations: int

def rates_per_case(rates: dict, cases) -> dict[str, dict[str, float]]:
    """{case label: {phase: ns per point}} from either one set of rates for every case
    ({phase: ns}, e.g. measured_rates) or rates per case (subdomain_rates). Raises HpclabError
    naming the cases that have no rates."""
    if set(rates) == set(PHASES):
        return {c[0]: dict(rates) for c in cases}
    missing = [c[0] for c in cases if c[0] not in rates]
    if missing:
        raise HpclabError(f"no compute rates for case(s) {', '.join(map(repr, missing))}",
                          f"pass {{phase: ns}} for all cases ({', '.join(PHASES)}) or subdomain_rates() of a "
                          "measure_subdomains() table made for these cases")
    return {c[0]: dict(rates[c[0]]) for c in cases}


def seed_scale(rates: dict, model, *, iterations: int, cases, n: int | None = None,
               cores: int | None = None, exchanges_per_iteration: int = 2) -> dict[str, Simulated]:
    """Generate and split `cases` (label, P, Q, exchange, mapping; the talk's are the imbalance
    lesson's SEED_CASES) with compute rates measured here: each trace is built on `model` (the 'real' run), replayed on the ideal network,
    and split. rates: {phase: ns per point} for every case, or {case label: {phase: ns}} with each
    case's own rates, as subdomain_rates(measure_subdomains(...)) gives them (a 1x384 strip of
    short rows computes at another rate than a 24x16 tile; the single-rank runs measure both).
    n and cores default to the talk's (3600 points per side, 24 cores per node);
    mapping 'linear' fills nodes in rank order, 'blocked' puts a tile of the grid on each node.
    Two exchanges per iteration, as this course's solver does (the talk's code did three)."""
    n = n or SEED_SCALE["n"]
    k = cores or SEED_SCALE["cores"]
    per_case = rates_per_case(rates, cases)
    out = {}
    for label, px, py, exch, how in cases:
        if how not in ("linear", "blocked"):
            raise HpclabError(f"mapping {how!r} for {label!r}: use 'linear' or 'blocked'")
        nodes = linear_mapping(px, py, k) if how == "linear" else blocked_mapping(px, py, k)
        tr = poisson_trace(px, py, n=n, iterations=iterations, ns_per_point=per_case[label], nodes=nodes,
                           exchange=exch, exchanges_per_iteration=exchanges_per_iteration, model=model)
        ideal = replay(tr, ideal_model(model.eager_limit, model.inter_eager_limit))
        out[label] = Simulated(label, tr, ideal, split(tr, ideal), nodes, iterations)
    return out

# seed 001's cluster: Xeon E5-2697 v2 (Ivy Bridge), 256 KiB of L2 per core.
SEED_L2_BYTES = 256 * 1024

# The kernel's two arrays per grid point (u and h^2 f, doubles): the working set of a sweep.
BYTES_PER_POINT = 16


def l2_bytes(cpu: int = 0) -> int:
    """This machine's level-2 cache per core in bytes, from /sys/devices/system/cpu/cpuN/cache.
    Raises HpclabError when Linux does not report it."""
    base = Path(f"/sys/devices/system/cpu/cpu{cpu}/cache")
    for idx in sorted(base.glob("index*")):
        try:
            level = int((idx / "level").read_text())
            kind = (idx / "type").read_text().strip()
            size = (idx / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        if level == 2 and kind in ("Unified", "Data"):
            mult = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(size[-1:].upper(), 1)
            return int(size.rstrip("KkMmGg")) * mult
    raise HpclabError(f"Linux reports no level-2 cache under {base}",
                      "pass scale= to subdomain_shapes (1.0 keeps the seed's local sizes as they are)")


def cache_scale() -> float:
    """How many times more points a subdomain needs here to stand to this machine's L2 cache as the
    seed's stood to Ivy Bridge's: l2_bytes() / 256 KiB (4.0 for a 1 MiB L2)."""
    return l2_bytes() / SEED_L2_BYTES


def subdomain_shapes(cases, *, n: int | None = None, scale: float | None = None,
                     keep: str = "row_length") -> pd.DataFrame:
    """The local grid of each case's ranks, as the seed had it and scaled to this machine.

    For each case (label, P, Q, ...) of an n x n grid (default the seed's 3600) take the most
    common local shape of the block split: nx = n/P rows of ny = n/Q points, rows contiguous in
    memory (1x384 gives 3600 x 9, 24x16 gives 150 x 225, 384x1 gives 9 x 3600). Then multiply
    its points by `scale`, default cache_scale(): the seed's 33,750 points x 16 bytes (our two
    arrays) = 540 kB were about twice Ivy Bridge's 256 KiB L2 and well inside a core's 2.5 MB
    share of L3; with this machine's L2 the same ratio needs l2 / 256 KiB times the points (4x for
    1 MiB: about 2.2 MB). Unscaled, the seed's sizes would sit inside a 1 MiB L2, a memory regime
    the seed did not measure.

    keep="row_length" (default) scales the number of rows and keeps each row's length: the
    strip of 1x384 keeps its 9-point rows (the "short vector length 3600/384 < 10" the seed
    blames for its slow compute) and 24x16 its 225-point rows. keep="aspect" scales both sides
    by sqrt(scale), keeping the aspect ratio instead: the strip's rows double to 18 points at
    scale 4, and on this machine that already removes most of the penalty (measured: a 7200 x 18
    strip computes about as fast as a 300 x 450 tile, a 3600 x 9 one almost 3x slower than 150 x
    225). The penalty is one of row length, so the default keeps it.

    Returns one row per case: case, grid ('PxQ'), seed_x, seed_y (the seed's local shape),
    ranks (how many of the case's ranks have it), local_x, local_y (the scaled shape one rank
    runs with --shape), points, working_set_bytes (with the halo), scale, keep."""
    n = n or SEED_SCALE["n"]
    scale = cache_scale() if scale is None else float(scale)
    if not scale > 0:
        raise HpclabError(f"scale = {scale}: the factor on the number of points must be positive")
    if keep not in ("row_length", "aspect"):
        raise HpclabError(f"keep = {keep!r}: use 'row_length' (scale the rows' count) or 'aspect' (both sides)")
    rows = []
    for label, px, py, *_ in cases:
        if px < 1 or py < 1 or px > n or py > n:
            raise HpclabError(f"case {label!r}: a {px}x{py} process grid does not fit {n} x {n} points")
        shapes = Counter((a, b) for a in split_sizes(n, px) for b in split_sizes(n, py))
        (sx, sy), count = max(shapes.items(), key=lambda kv: (kv[1], kv[0]))
        if keep == "aspect":
            lx, ly = max(1, round(sx * math.sqrt(scale))), max(1, round(sy * math.sqrt(scale)))
        else:
            lx, ly = max(1, round(sx * scale)), sy
        rows.append({"case": label, "grid": f"{px}x{py}", "seed_x": sx, "seed_y": sy, "ranks": count,
                     "local_x": lx, "local_y": ly, "points": lx * ly,
                     "working_set_bytes": BYTES_PER_POINT * (lx + 2) * (ly + 2), "scale": scale, "keep": keep})
    return pd.DataFrame(rows)


def subdomain_table(runs, shapes: pd.DataFrame) -> pd.DataFrame:
    """Tidy rows, one per (case, single-rank run): case, grid, seed_x, seed_y, local_x, local_y,
    points, run (the run id: provenance), repetition, iterations, the compute rate of each phase
    (red, black, copy, residuum: ns per grid point per iteration, hpclab.trace.poisson.
    rates_from_poisson) and their sum `ns_per_point`. runs: completed runs of subdomain_specs."""
    by_shape: dict[tuple[int, int], list] = {}
    for r in runs:
        doc = r.result()
        res = poisson_report.measures(doc)
        shape = poisson_report.subdomain_shape(doc)
        rate = rates_from_poisson(res)
        by_shape.setdefault(shape, []).append(
            {"run": r.run_id, "repetition": int(r.folder.status().get("repetition", 1)),
             "iterations": res["iterations"], **rate, "ns_per_point": sum(rate[ph] for ph in PHASES)})
    rows = []
    for _, c in shapes.iterrows():
        got = by_shape.get((int(c["local_x"]), int(c["local_y"])))
        if not got:
            raise HpclabError(f"no single-rank run of the {c['local_x']}x{c['local_y']} subdomain of {c['case']!r}",
                              "run hpclab.course.lessons.imbalance.subdomain_specs(shapes) and pass their runs")
        base = {k: c[k] for k in ("case", "grid", "seed_x", "seed_y", "local_x", "local_y", "points")}
        rows += [{**base, **g} for g in got]
    return pd.DataFrame(rows)


def subdomain_rates(table: pd.DataFrame) -> dict[str, dict[str, float]]:
    """{case: {phase: ns per point}}: the median over a subdomain_table's runs of each case, for
    seed_scale."""
    if table.empty:
        raise HpclabError("the subdomain table is empty",
                          "run hpclab.course.lessons.imbalance.measure_subdomains() first")
    missing = [ph for ph in PHASES if ph not in table.columns]
    if missing:
        raise HpclabError(f"the subdomain table lacks the phase column(s) {', '.join(missing)}",
                          "pass the table measure_subdomains() (hpclab.course.lessons.imbalance) or "
                          "subdomain_table() returns")
    med = table.groupby("case", sort=False)[list(PHASES)].median()
    return {case: {ph: float(row[ph]) for ph in PHASES} for case, row in med.iterrows()}


def subdomain_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per case: the seed's and our local shape, the runs, and min / median / max of ns per point
    (all phases), plus the median relative to the fastest case (1.0 = fastest)."""
    g = table.groupby("case", sort=False)
    out = g[["grid", "seed_x", "seed_y", "local_x", "local_y"]].first()
    out["runs"] = g["run"].agg(lambda r: ", ".join(r))
    out["ns_per_point_min"] = g["ns_per_point"].min()
    out["ns_per_point_median"] = g["ns_per_point"].median()
    out["ns_per_point_max"] = g["ns_per_point"].max()
    out["vs_fastest"] = out["ns_per_point_median"] / out["ns_per_point_median"].min()
    return out


def simulated_table(sims: dict[str, Simulated]) -> pd.DataFrame:
    """One row per simulated case: ms per iteration of each component, inter-node messages per
    iteration (counted in the trace) and the parallel efficiency."""
    rows = []
    for label, s in sims.items():
        sp = s.split
        per = 1e-6 / s.iterations
        rows.append({"case": label, "T_real": sp.T_real * per, "T_comp": sp.T_comp * per,
                     "T_transfer": sp.T_transfer * per, "T_load": sp.T_load * per,
                     "T_depend": sp.T_depend * per,
                     "internode_msgs": internode_from_trace(s.trace, s.iterations),
                     "parallel": sp.parallel})
    return pd.DataFrame(rows).set_index("case")


def largest_waste(split) -> str:
    """The name (as in PARTS) of the largest part of a Split after compute: where tuning starts."""
    waste = {name: getattr(split, key) for key, name in PARTS if key != "T_comp"}
    return max(waste, key=waste.get)


def shares(parts: pd.DataFrame) -> pd.DataFrame:
    """Each row's components as a share of the row's total (fractions summing to 1)."""
    return parts.div(parts.sum(axis=1), axis=0)


def quoted_parts() -> pd.DataFrame:
    """The talk's refined imbalance diagram (hpclab.core.seedfacts.imbalance_2014) with our column
    names: compute, transfer (the talk's 'interconnect'), load imbalance, dependency."""
    q = seedfacts.imbalance_2014().rename(columns={"interconnect": "transfer"})
    return q[[name for _, name in PARTS if name != REST]].astype(float)


def parts_of(splits: dict, scale: float = 1e-9) -> pd.DataFrame:
    """label -> Split as a table of the five parts (compute, transfer, load imbalance,
    dependency, rest), times multiplied by `scale` (default: ns -> s)."""
    return pd.DataFrame({label: {name: getattr(s, key) * scale for key, name in PARTS}
                         for label, s in splits.items()}).T


def nic_busy(trace, model, iterations: int) -> pd.DataFrame:
    """Per node: inter-node messages and bytes it sends per iteration, and how long one network
    port at the model's inter-node latency and bandwidth needs to push them (us per iteration:
    messages x L + bytes / BW). The replay charges each message on its own, as if every message
    had a link to itself; this bound shows what sharing one port per node costs."""
    if iterations < 1:
        raise HpclabError(f"iterations = {iterations} must be at least 1")
    mm = aggregate(message_matrix(trace), trace.hosts)
    cnt, vol = mm.count.copy(), mm.volume.copy()
    np.fill_diagonal(cnt, 0)
    np.fill_diagonal(vol, 0)
    msgs = cnt.sum(axis=1) / iterations
    nbytes = vol.sum(axis=1) / iterations
    busy = (msgs * model.inter.latency_ns + nbytes / model.inter.bandwidth_bpns) / 1e3
    return pd.DataFrame({"internode_msgs": msgs, "internode_bytes": nbytes, "port_busy_us": busy},
                        index=pd.Index(mm.labels, name="node"))


def mapping_replays(trace, model, cores: int, grid: str) -> pd.DataFrame:
    """A measured trace treated as if its ranks sat on nodes of `cores` ranks each: replay it
    on `model` with all ranks on one node, with Slurm's block (linear) mapping and, when it
    differs, the cyclic one (rank r on node r mod nodes). grid: the run's 'PxQ'. One row per
    mapping: nodes, inter-node messages per traced run (from the node-aggregated matrix) and
    the replayed run time (ms)."""
    p, q = (int(x) for x in grid.split("x"))
    if p * q != trace.nranks:
        raise HpclabError(f"grid {grid} has {p * q} ranks but the trace has {trace.nranks}")
    if cores < 1 or trace.nranks % cores:
        raise HpclabError(f"{trace.nranks} ranks do not fill nodes of {cores} cores",
                          "choose a core count that divides the number of ranks")
    count = trace.nranks // cores
    maps = {"one node": [0] * trace.nranks, "block (linear)": linear_mapping(p, q, cores)}
    cyclic = [r % count for r in range(trace.nranks)]
    if cyclic != maps["block (linear)"]:
        maps["cyclic"] = cyclic
    mm = message_matrix(trace)
    rows = []
    for name, nodes in maps.items():
        hosts = hosts_of(nodes)
        t = dataclasses.replace(trace, hosts=hosts)
        rows.append({"mapping": name, "nodes": max(nodes) + 1,
                     "internode_msgs": aggregate(mm, hosts).off_diagonal("count"),
                     "replayed_ms": run_time(replay(t, model)) / 1e6})
    return pd.DataFrame(rows).set_index("mapping")


def median_rows(runs) -> list[dict]:
    """One pingpong row {bytes, t_usec} per message size: the median t_usec over `runs` (Runs of
    the pingpong kernel, or one Run). A run slowed down by other work on a shared machine (a
    rank switched out in the middle of its round trips) moves a median of three no further than
    the other two allow."""
    runs = runs if isinstance(runs, (list, tuple)) else [runs]
    by: dict[int, list[float]] = {}
    for r in runs:
        for row in pingpong.message_rows(r.result()):
            by.setdefault(int(row["bytes"]), []).append(float(row["t_usec"]))
    return [{"bytes": b, "t_usec": statistics.median(ts)} for b, ts in sorted(by.items())]


def link_rows(pingpongs: dict) -> tuple[list[dict], list[dict], pd.DataFrame]:
    """Pingpong rows for the model's links from runs of pingpong_specs ({'intra': Run, a list of
    Runs (repetitions: median_rows) or None, 'inter': the same}): (intra rows, inter rows, a
    table saying where each link came from). Without an inter-node run the inter link is the
    quoted 2019 InfiniBand (quoted_inter_rows); without an intra-node run (one CPU per node) the
    intra link reuses the inter-node rows."""
    got = {k: median_rows(r) for k, r in pingpongs.items() if r}
    if not got:
        raise HpclabError("no pingpong run to fit a network model to",
                          "run hpclab.course.lessons.imbalance.pingpong_specs(...) first")
    if "inter" in got:
        inter, inter_src = got["inter"], "measured: pingpong between two nodes of this cluster"
    else:
        inter, inter_src = quoted_inter_rows(), "quoted: 40G InfiniBand, pml/ucx (Goglin 2019, seed 000)"
    if "intra" in got:
        intra, intra_src = got["intra"], "measured: pingpong inside one node of this cluster"
    else:
        intra, intra_src = inter, "one CPU per node: same rows as the inter-node link"
    src = pd.DataFrame({"source": [intra_src, inter_src]}, index=pd.Index(["intra-node", "inter-node"], name="link"))
    return intra, inter, src


# --- the mapping, measured on (virtual) nodes ----------------------------------------------------


def mapping_layouts(px: int, py: int, ranks_per_node: int) -> dict[str, list[int]]:
    """{"linear": node of each rank, "blocked": ...}: ranks filling nodes in order, against the
    squarest tile of ranks per node that differs from it (on some grids the squarest tile *is* the
    linear mapping, e.g. 1 x 2 tiles on a 2 x 4 grid with 2 ranks per node)."""
    linear = mapping.linear_mapping(px, py, ranks_per_node)
    tiles = sorted(mapping.tile_shapes(px, py, ranks_per_node), key=lambda t: abs(t[0] - t[1]))
    for tile in tiles:
        blocked = mapping.blocked_mapping(px, py, ranks_per_node, tile=tile)
        if blocked != linear:
            return {"linear": linear, "blocked": blocked}
    raise HpclabError(f"on a {px} x {py} grid with {ranks_per_node} rank(s) per node every tile is the linear mapping",
                      "choose a grid with more than one rank row and column per node")


def exchanges_of(trace) -> int:
    """Halo exchanges rank 0 made (its 'exchange' regions): how often every grid edge carried a message each way."""
    ev = trace.events
    return int(((ev["rank"] == 0) & (ev["call"] == "region_begin") & (ev["name"] == "exchange")).sum())


def mapping_counts(runs, layouts: dict[str, list[int]], px: int, py: int, iterations: int) -> pd.DataFrame:
    """One row per traced run: its mapping, its repetition (round), whether every rank ran on the
    node the mapping gave it, the inter-node messages predicted from the grid (hpclab.trace.mapping) and counted in the
    trace's per-node message matrix, the inter-node bytes, and the measured ms per iteration."""
    rows = []
    for run in runs:
        nodes = layouts[run.spec.label]
        trace = load_run(run.path)
        where = [trace.hosts[r] for r in range(px * py)]
        # mapped: ranks given one node share a host, ranks given different nodes do not
        pairs = set(zip(nodes, where))
        per_node = aggregate(message_matrix(trace), trace.hosts)
        rows.append({
            "mapping": run.spec.label, "run": run.path.name,
            "repetition": int(run.folder.status().get("repetition", 1)),
            "ranks where mapped": len(pairs) == len(set(nodes)) == len(set(where)),
            "inter-node messages, predicted": mapping.internode_messages(px, py, nodes, exchanges=exchanges_of(trace)),
            "inter-node messages, traced": int(per_node.off_diagonal("count")),
            "inter-node MB": per_node.off_diagonal("volume") / 1e6,
            "ms per iteration": tsplit.run_time(trace) * 1e-6 / iterations})
    return pd.DataFrame(rows)


# --- the split measured with a core per rank ------------------------------------------------------

SPLIT_NAMES = {"T_comp": "compute", "T_transfer": "transfer", "T_load": "load imbalance", "T_depend": "dependency",
               "T_rest": "rest"}


def split_shares(table: pd.DataFrame) -> pd.DataFrame:
    """Each run's five parts (split_table rows) as shares of its T_real, with its label and
    repetition: one row per run."""
    shares = table[list(SPLIT_NAMES)].div(table["T_real"], axis=0).rename(columns=SPLIT_NAMES)
    return pd.concat([table[["label", "repetition"]], shares], axis=1)


def inter_eager_limit(link_sources: pd.DataFrame, tcp_eager: int) -> tuple[int, str]:
    """The eager limit (bytes) the model gives its inter-node link, and where it comes from
    (link_sources: the table link_rows returns). A link measured between this cluster's nodes runs
    Open MPI's TCP BTL: `tcp_eager` (btl_tcp_eager_limit). The quoted 2019 InfiniBand link ran
    pml/ucx, whose rendezvous threshold is UCX's own (UCX_RNDV_THRESH, chosen at run time), and the
    2014 study's Intel MPI 5.0 switched between nodes at its DAPL fabric's
    I_MPI_DAPL_DIRECT_COPY_THRESHOLD, which the training does not quote; the model takes Intel
    MPI's general I_MPI_EAGER_THRESHOLD default, 256 KiB, and says so."""
    if str(link_sources.loc["inter-node", "source"]).startswith("measured"):
        return int(tcp_eager), "btl_tcp_eager_limit (Open MPI's TCP between nodes)"
    return (int(seedfacts.INTEL_MPI_EAGER_THRESHOLD),
            "assumed: Intel MPI's I_MPI_EAGER_THRESHOLD default (UCX_RNDV_THRESH and the study's DAPL threshold "
            "are not quoted)")
