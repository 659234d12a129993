"""Course helpers for notebook 05 (imbalance): traced Poisson runs, their four-way split, and the
same analysis simulated at the 2014 talk's 384-rank scale.

The analysis itself lives in hpclab.trace (replay, split, wait states, matrices, mappings);
this module only strings it together for the notebook:

- `configurations(slots)`: which process grids and exchange styles fit on this cluster;
- `poisson_specs(...)`, `analyse(runs)`: traced runs -> one row per run with the split (seconds);
- `summary(table)`: min / median / max of each component over repetitions;
- `pingpong_model(...)`: an intra/inter-node Hockney model fitted to a pingpong run of this
  machine (intra) and, for the inter-node link, to the quoted 2019 InfiniBand pingpong;
- `seed_scale(...)`: the 384-rank, 16-node Poisson case generated from rates measured here,
  replayed under that model, split the same way (a simulation, labelled as such);
- `side_by_side_figure(...)`: our diagram next to the quoted 2014 one;
- `measure_mapping(...)`: the linear against a blocked rank-to-node mapping, traced on virtual
  nodes, with the inter-node messages predicted and counted (`mapping_counts`);
- `dependency_configurations(...)`, `rendezvous_n(...)`, `dependency_table(...)`: the naive
  exchange (the 2014 code's order) against the non-blocking one, with halo messages above the
  eager limit, and T_depend of each relative to non-blocking;
- `measure_subdomains(...)`: single-rank runs of each simulated case's subdomain shape (the
  seed's local grids, scaled to this machine's cache), whose per-case rates
  (`subdomain_rates`) give `seed_scale` its compute bursts.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hpclab.core.errors import HpclabError
from hpclab.site import ompi

EXPERIMENT = "05-imbalance"
# What one bar of the imbalance diagram holds, in stacking order (attributes of trace.split.Split).
# The five parts of hpclab.trace.split in stacking order. "rest" is the time the network model
# does not explain: on an oversubscribed run, mostly ranks waiting for a core. A split without a
# model (or a quoted diagram) has no rest.
PARTS = (("T_comp", "compute"), ("T_transfer", "transfer"), ("T_load", "load imbalance"),
         ("T_depend", "dependency"), ("T_rest", "rest: not running or not modelled"))
REST = PARTS[-1][1]
COLORS = {"compute": "#4c72b0", "transfer": "#dd8452", "load imbalance": "#c44e52",
          "dependency": "#8172b3", "interconnect": "#dd8452", REST: "#9a9a9a"}
# What each part calls for, for the quiz whose answer is the learner's own largest part.
ADVICE = {"transfer": "a faster network or a placement that keeps messages inside a node",
          "load imbalance": "rebalancing the domain decomposition",
          "dependency": "reordering the sends and receives (non-blocking or ordered exchange)",
          REST: "giving every rank a core of its own (fewer ranks, or more cores)"}
# Halo messages of the solver are at most a few 10 kB: fit the pingpong over that range only, so
# the latency is not swamped by megabyte messages that the solver never sends.
FIT_MAX_BYTES = 65536


@dataclass(frozen=True)
class Config:
    """One traced Poisson configuration: process grid 'PxQ' and halo exchange style."""

    grid: str
    exchange: str
    oversubscribe: bool = False  # more ranks than the job's CPUs: Slurm overcommits (see spec)

    @property
    def ntasks(self) -> int:
        p, q = (int(x) for x in self.grid.split("x"))
        return p * q

    @property
    def label(self) -> str:
        p, q = (int(x) for x in self.grid.split("x"))
        dim = "2D" if p > 1 and q > 1 else "1D"
        return f"{dim} {self.grid} {self.exchange}"


def site_layout(site=None) -> tuple[int, int]:
    """(nodes, CPUs per node) of the site's default partition, as Slurm schedules them."""
    from hpclab.site import profile as site_mod
    st = site or site_mod.load_site()
    part = st.partition()
    if not part.nodes or not part.cores_per_node:
        raise HpclabError(f"site {st.name!r} does not say how many nodes and cores partition {part.name!r} has",
                          "add nodes and cores_per_node to the site profile, or set discover_cores: true")
    return part.nodes, part.cores_per_node


def cluster_slots(site=None) -> int:
    """CPUs Slurm can give one job on the site's default partition (nodes x cores per node)."""
    nodes, cores = site_layout(site)
    return nodes * cores


def physical_cores() -> int:
    """Cores this process may run on (the machine the local cluster shares)."""
    return len(os.sched_getaffinity(0))


def configurations(slots: int) -> list[Config]:
    """The grids to trace: 2D 2x2 against the 1D grids 4x1 and 1x4 (blocking), plus 2x2
    non-blocking. With fewer than 4 CPUs per job (a 2-core laptop) the same four runs are
    oversubscribed, 4 ranks on `slots` CPUs, and the notebook says what that does to the numbers.
    Raises HpclabError below 2 CPUs."""
    if slots < 2:
        raise HpclabError(f"the cluster offers {slots} CPU(s) per job; tracing a halo exchange needs 2",
                          "start the cluster on a machine with at least 2 cores")
    over = slots < 4
    return [Config("2x2", "blocking", over), Config("4x1", "blocking", over), Config("1x4", "blocking", over),
            Config("2x2", "nonblocking", over)]


def dependency_configurations(slots: int, grid: str = "4x1") -> list[Config]:
    """The seed's non-blocking lesson: the naive exchange (every rank sends up first, the 2014
    code's order) against the non-blocking one, on `grid` (default the 4-rank chain 4x1, where the
    naive order makes each rank wait for the whole chain). Oversubscribed when the job has fewer
    CPUs than ranks. Use with rendezvous_n, so the halo messages are above the eager limit."""
    if slots < 2:
        raise HpclabError(f"the cluster offers {slots} CPU(s) per job; tracing a halo exchange needs 2",
                          "start the cluster on a machine with at least 2 cores")
    over = slots < Config(grid, "naive").ntasks
    return [Config(grid, "naive", over), Config(grid, "nonblocking", over)]


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
    column `exchange` (from the label) and, per row, T_depend divided by the median T_depend of
    the non-blocking runs (`depend_vs_nonblocking`; NaN without non-blocking runs or when their
    median is 0).

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
    from hpclab.trace.replay import replay
    from hpclab.trace.split import run_time
    tab = split_table(analysed, iterations)
    tab.insert(1, "exchange", [str(lbl).split()[-1] for lbl in tab["label"]])

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


def poisson_specs(configs: list[Config], *, n: int, iters: int, repetitions: int,
                  cores_per_node: int | None = None, experiment: str = EXPERIMENT) -> list:
    """Traced Poisson specs, one per configuration (each repeated `repetitions` times as jobs).
    n: grid points per side; iters: solver iterations; cores_per_node (if given): ask for as
    many nodes as the ranks need. Labels are the configurations' labels."""
    from hpclab.spec import model as spec
    out = []
    for c in configs:
        # An oversubscribed run fits no node count by definition: keep it on one node.
        nodes = max(1, math.ceil(c.ntasks / cores_per_node)) if cores_per_node and not c.oversubscribe else 1
        out.append(spec.make_spec(kernel="poisson", ntasks=c.ntasks, nodes=nodes, label=c.label, trace=True,
                                  oversubscribe=c.oversubscribe,
                                  args={"n": n, "grid": c.grid, "exchange": c.exchange, "iters": iters},
                                  repetitions=repetitions, experiment=experiment))
    return out


def pingpong_specs(nodes: int, cores_per_node: int, max_bytes: int = FIT_MAX_BYTES,
                   experiment: str = EXPERIMENT) -> dict:
    """Pingpong specs for the model's two links: 'intra' (2 ranks on one node, if a node has 2
    CPUs) and 'inter' (one rank on each of 2 nodes, if there are 2 nodes); None where the
    cluster cannot place them."""
    from hpclab.spec import model as spec
    base = dict(kernel="pingpong", ntasks=2, args={"max_bytes": max_bytes}, experiment=experiment)
    return {"intra": spec.make_spec(**base, nodes=1, label="model fit: one node") if cores_per_node >= 2 else None,
            "inter": spec.make_spec(**base, nodes=2, ntasks_per_node=1, label="model fit: two nodes")
            if nodes >= 2 else None}


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
    from hpclab.trace.model import IDEAL, NetworkModel
    if eager is None:
        return IDEAL
    return NetworkModel(f"ideal (eager limit {eager} B)", IDEAL.intra, IDEAL.inter, int(eager),
                        inter_eager_limit=inter_eager)


def analyse(runs, eager: int | None = None, model=None) -> list[Analysed]:
    """Load each run's trace (hpclab.trace.load.load_run), replay it on the ideal network (with
    the eager limit `eager` in bytes, see ideal_model) and split it (hpclab.trace.split): five
    parts with `model` (the machine's fitted NetworkModel, pingpong_model), four without.
    runs: experiment.Run objects of traced Poisson specs."""
    from hpclab.trace.load import load_run
    from hpclab.trace.replay import replay
    from hpclab.trace.split import split
    ideal_net = ideal_model(eager)
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
    from hpclab.trace.profile import regions
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


# --- the network model ---------------------------------------------------------------------------


def quoted_inter_rows(network: str = "40G InfiniBand (Mellanox)", component: str = "pml/ucx") -> list[dict]:
    """Pingpong rows {bytes, t_usec} of one quoted 2019 network (hpclab.core.seedfacts.pingpong_2019):
    the inter-node link of the simulation, since one VM has no network to measure."""
    from hpclab.core import seedfacts
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
    from hpclab.trace.model import NO_LIMIT, model_from_pingpong
    use = [r for r in rows if r["bytes"] <= max_bytes]
    model = model_from_pingpong(use, inter_rows=inter_rows, eager_limit=NO_LIMIT if eager is None else eager,
                                name=name)
    return model.with_inter_eager(inter_eager) if inter_eager is not None else model


def model_table(model) -> pd.DataFrame:
    """The model's links in people's units: latency (us), bandwidth (MB/s), eager limit (bytes)."""
    from hpclab.trace.model import NO_LIMIT
    rows = []
    for which, link in (("intra-node", model.intra), ("inter-node", model.inter)):
        limit = model.eager_limit if which == "intra-node" else model.inter_eager
        rows.append({"link": which, "latency_us": link.latency_ns / 1e3,
                     "bandwidth_MB_s": link.bandwidth_bpns * 1e3,
                     "eager_limit_bytes": None if limit >= NO_LIMIT else limit})
    return pd.DataFrame(rows).set_index("link")


# --- the seed's scale, simulated -------------------------------------------------------------------


def measured_rates(analysed: list[Analysed]) -> dict[str, float]:
    """ns per grid point per iteration for each compute phase (red, black, copy, residuum):
    the median over the given runs of hpclab.trace.poisson.rates_from_poisson."""
    from hpclab.trace.poisson import PHASES, rates_from_poisson
    if not analysed:
        raise HpclabError("no runs to take compute rates from", "run the traced Poisson experiment first")
    each = [rates_from_poisson(a.result["results"]) for a in analysed]
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


# The configurations of the talk's 384-rank study (seed 001), plus the two changes it proposes.
SEED_CASES = (  # the 2014 code's exchange: every rank sends first, then receives ("naive")
    ("2D 24x16", 24, 16, "naive", "linear"),
    ("1D 384x1", 384, 1, "naive", "linear"),
    ("1D 1x384", 1, 384, "naive", "linear"),
    ("2D 24x16 non-blocking", 24, 16, "nonblocking", "linear"),
    ("2D 24x16 blocked mapping", 24, 16, "naive", "blocked"),
)


def rates_per_case(rates: dict, cases=SEED_CASES) -> dict[str, dict[str, float]]:
    """{case label: {phase: ns per point}} from either one set of rates for every case
    ({phase: ns}, e.g. measured_rates) or rates per case (subdomain_rates). Raises HpclabError
    naming the cases that have no rates."""
    from hpclab.trace.poisson import PHASES
    if set(rates) == set(PHASES):
        return {c[0]: dict(rates) for c in cases}
    missing = [c[0] for c in cases if c[0] not in rates]
    if missing:
        raise HpclabError(f"no compute rates for case(s) {', '.join(map(repr, missing))}",
                          f"pass {{phase: ns}} for all cases ({', '.join(PHASES)}) or subdomain_rates() of a "
                          "measure_subdomains() table made for these cases")
    return {c[0]: dict(rates[c[0]]) for c in cases}


def seed_scale(rates: dict, model, *, iterations: int, cases=SEED_CASES, n: int | None = None,
               cores: int | None = None, exchanges_per_iteration: int = 2) -> dict[str, Simulated]:
    """Generate and split the talk's cases (label, P, Q, exchange, mapping) with compute rates
    measured here: each trace is built on `model` (the 'real' run), replayed on the ideal network,
    and split. rates: {phase: ns per point} for every case, or {case label: {phase: ns}} with each
    case's own rates, as subdomain_rates(measure_subdomains(...)) gives them (a 1x384 strip of
    short rows computes at another rate than a 24x16 tile; the single-rank runs measure both).
    n and cores default to the talk's (3600 points per side, 24 cores per node);
    mapping 'linear' fills nodes in rank order, 'blocked' puts a tile of the grid on each node.
    Two exchanges per iteration, as this course's solver does (the talk's code did three)."""
    from hpclab.trace.mapping import blocked_mapping, linear_mapping
    from hpclab.trace.poisson import SEED_SCALE, poisson_trace
    from hpclab.trace.replay import replay
    from hpclab.trace.split import split
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


# --- compute rates of each decomposition's subdomain, measured on one rank -----------------------

SUBDOMAIN_EXPERIMENT = "05-subdomains"
# seed 001's cluster: Xeon E5-2697 v2 (Ivy Bridge), 256 KiB of L2 per core.
SEED_L2_BYTES = 256 * 1024
# The kernel's two arrays per grid point (u and h^2 f, doubles): the working set of a sweep.
BYTES_PER_POINT = 16
# Lattice updates per single-rank run: about a second of compute (a few ns per point and sweep).
UPDATES_PER_RUN = 2e8


def l2_bytes(cpu: int = 0) -> int:
    """This machine's level-2 cache per core in bytes, from /sys/devices/system/cpu/cpuN/cache.
    Raises HpclabError when Linux does not report it."""
    from pathlib import Path
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


def subdomain_shapes(cases=SEED_CASES, *, n: int | None = None, scale: float | None = None,
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
    from collections import Counter
    from hpclab.trace.poisson import SEED_SCALE, split_sizes
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


def subdomain_specs(shapes: pd.DataFrame, *, iters: int | None = None, repetitions: int = 3,
                    experiment: str = SUBDOMAIN_EXPERIMENT) -> list:
    """Single-rank Poisson specs, one per distinct local shape of subdomain_shapes (cases with
    the same shape share it), each run `repetitions` times. iters: sweeps per run (default:
    about UPDATES_PER_RUN lattice updates, i.e. a second or so of compute). Labels are
    'subdomain LXxLY'."""
    from hpclab.spec import model as spec
    if shapes.empty:
        raise HpclabError("no subdomain shapes to measure", "pass subdomain_shapes(...) of at least one case")
    out = []
    for (lx, ly), _ in shapes.groupby(["local_x", "local_y"], sort=False):
        k = iters or max(10, round(UPDATES_PER_RUN / (lx * ly)))
        out.append(spec.make_spec(kernel="poisson", ntasks=1, label=f"subdomain {lx}x{ly}",
                                  args={"shape": f"{lx}x{ly}", "grid": "1x1", "iters": k},
                                  repetitions=repetitions, experiment=experiment))
    return out


def subdomain_table(runs, shapes: pd.DataFrame) -> pd.DataFrame:
    """Tidy rows, one per (case, single-rank run): case, grid, seed_x, seed_y, local_x, local_y,
    points, run (the run id: provenance), repetition, iterations, the compute rate of each phase
    (red, black, copy, residuum: ns per grid point per iteration, hpclab.trace.poisson.
    rates_from_poisson) and their sum `ns_per_point`. runs: completed runs of subdomain_specs."""
    from hpclab.trace.poisson import PHASES, rates_from_poisson
    by_shape: dict[tuple[int, int], list] = {}
    for r in runs:
        res = r.result()["results"]
        shape = tuple(res.get("shape") or (res["n"], res["n"]))
        rate = rates_from_poisson(res)
        by_shape.setdefault(shape, []).append(
            {"run": r.run_id, "repetition": int(r.folder.status().get("repetition", 1)),
             "iterations": res["iterations"], **rate, "ns_per_point": sum(rate[ph] for ph in PHASES)})
    rows = []
    for _, c in shapes.iterrows():
        got = by_shape.get((int(c["local_x"]), int(c["local_y"])))
        if not got:
            raise HpclabError(f"no single-rank run of the {c['local_x']}x{c['local_y']} subdomain of {c['case']!r}",
                              "run subdomain_specs(shapes) and pass their runs")
        base = {k: c[k] for k in ("case", "grid", "seed_x", "seed_y", "local_x", "local_y", "points")}
        rows += [{**base, **g} for g in got]
    return pd.DataFrame(rows)


def measure_subdomains(cases=SEED_CASES, *, n: int | None = None, scale: float | None = None,
                       keep: str = "row_length", iters: int | None = None, repetitions: int = 3, progress: bool = True,
                       timeout: float = 900, experiment: str = SUBDOMAIN_EXPERIMENT) -> pd.DataFrame:
    """Run each case's subdomain shape (subdomain_shapes(cases, n=, scale=, keep=): the seed's
    local grid, scaled to this machine's cache) on one rank as real Slurm jobs of the poisson kernel (--shape) and return
    subdomain_table: per case and run, the compute rate in ns per point of each phase, with the
    run ids. This is what makes the 1x384 strip's short rows cost what they cost here."""
    from hpclab.jobs import experiment as exp
    shapes = subdomain_shapes(cases, n=n, scale=scale, keep=keep)
    runs = exp.run(subdomain_specs(shapes, iters=iters, repetitions=repetitions, experiment=experiment),
                   progress=progress, timeout=timeout)
    return subdomain_table(runs, shapes)


def subdomain_rates(table: pd.DataFrame) -> dict[str, dict[str, float]]:
    """{case: {phase: ns per point}}: the median over a subdomain_table's runs of each case, for
    seed_scale."""
    from hpclab.trace.poisson import PHASES
    if table.empty:
        raise HpclabError("the subdomain table is empty", "measure_subdomains() first")
    missing = [ph for ph in PHASES if ph not in table.columns]
    if missing:
        raise HpclabError(f"the subdomain table lacks the phase column(s) {', '.join(missing)}",
                          "pass the table measure_subdomains() or subdomain_table() returns")
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


def subdomain_figure(table: pd.DataFrame, title: str = "Compute rate of each decomposition's subdomain, one rank"):
    """Bars of the median ns per grid point and iteration (all phases) per distinct subdomain
    of a subdomain_table, with the min-max range of its runs as an error bar; each bar is
    labelled with its local shape and the seed's. Returns a matplotlib Figure."""
    from matplotlib.figure import Figure
    s = subdomain_summary(table).drop_duplicates(subset=["local_x", "local_y"])
    fig = Figure(figsize=(2.4 + 1.6 * len(s), 4.0), layout="constrained")
    ax = fig.add_subplot()
    med = s["ns_per_point_median"].to_numpy(float)
    err = np.vstack([med - s["ns_per_point_min"].to_numpy(float), s["ns_per_point_max"].to_numpy(float) - med])
    labels = [f"{case}\n{r.local_x}x{r.local_y} (seed {r.seed_x}x{r.seed_y})" for case, r in s.iterrows()]
    ax.bar(labels, med, yerr=err, capsize=4, color=COLORS["compute"], width=0.6)
    ax.set_ylabel("ns per grid point and iteration (median, min-max)")
    ax.set_title(title, loc="left", fontsize="medium")
    return fig


def simulated_table(sims: dict[str, Simulated]) -> pd.DataFrame:
    """One row per simulated case: ms per iteration of each component, inter-node messages per
    iteration (counted in the trace) and the parallel efficiency."""
    from hpclab.trace.mapping import internode_from_trace
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
    from hpclab.core import seedfacts
    q = seedfacts.imbalance_2014().rename(columns={"interconnect": "transfer"})
    return q[[name for _, name in PARTS if name != REST]].astype(float)


def parts_of(splits: dict, scale: float = 1e-9) -> pd.DataFrame:
    """label -> Split as a table of the five parts (compute, transfer, load imbalance,
    dependency, rest), times multiplied by `scale` (default: ns -> s)."""
    return pd.DataFrame({label: {name: getattr(s, key) * scale for key, name in PARTS}
                         for label, s in splits.items()}).T


def _stack(ax, parts: pd.DataFrame):
    labels = [str(x) for x in parts.index]
    pos = np.zeros(len(labels))
    neg = np.zeros(len(labels))
    for _, name in PARTS:
        if name not in parts:  # a quoted diagram has no rest part
            continue
        v = parts[name].to_numpy(float)
        base = np.where(v >= 0, pos, neg)
        ax.bar(labels, v, bottom=base, color=COLORS[name], label=name, width=0.6)
        pos += np.where(v >= 0, v, 0)
        neg += np.where(v < 0, v, 0)
    top = float(pos.max()) if len(pos) else 0.0
    if top > 0:  # room above the tallest stack; autoscaling clips stacked bars here
        ax.set_ylim(min(float(neg.min()) * 1.08, 0.0), top * 1.08)
    ax.tick_params(axis="x", labelrotation=20)
    for t in ax.get_xticklabels():
        t.set_horizontalalignment("right")


def diagram_figure(parts: pd.DataFrame, title: str, unit: str):
    """One imbalance diagram: stacked bars of the four parts (rows = runs, columns as in
    parts_of), in `unit`. Returns a matplotlib Figure."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(2.6 + 1.5 * len(parts), 4.4), layout="constrained")
    ax = fig.add_subplot()
    _stack(ax, parts)
    ax.set_title(title, loc="left", fontsize="medium")
    ax.set_ylabel(unit)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return fig


def side_by_side_figure(ours: pd.DataFrame, ours_title: str, ours_unit: str, quoted: pd.DataFrame | None = None):
    """Imbalance diagrams as stacked bars: `ours` (rows = runs, columns = the four parts, in
    `ours_unit`) on the left, the talk's quoted diagram (default: quoted_parts(), accumulated
    seconds) on the right, labelled as quoted. Returns a matplotlib Figure."""
    from matplotlib.figure import Figure
    quoted = quoted_parts() if quoted is None else quoted
    fig = Figure(figsize=(11, 4.6), layout="constrained")
    a, b = fig.subplots(1, 2, width_ratios=[max(len(ours), 2), max(len(quoted), 2)])
    _stack(a, ours)
    a.set_title(ours_title, loc="left", fontsize="medium")
    a.set_ylabel(ours_unit)
    _stack(b, quoted)
    b.set_title("Quoted: ITAC 2014, 384 ranks on 16 nodes\n(seed 001; seconds accumulated over ranks)",
                loc="left", fontsize="medium")
    b.set_ylabel("s (accumulated, as quoted)")
    handles, names = a.get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncols=4, fontsize="small")
    return fig


def oversubscription(ntasks: int, cores: int | None = None) -> str:
    """One sentence: does a job of ntasks ranks oversubscribe this machine's cores?"""
    cores = cores or physical_cores()
    if ntasks > cores:
        return (f"{ntasks} ranks share {cores} core(s): the run is oversubscribed "
                f"({ntasks / cores:.1f} ranks per core).")
    return f"{ntasks} ranks on {cores} core(s): one core or more per rank, no oversubscription."


def nic_busy(trace, model, iterations: int) -> pd.DataFrame:
    """Per node: inter-node messages and bytes it sends per iteration, and how long one network
    port at the model's inter-node latency and bandwidth needs to push them (us per iteration:
    messages x L + bytes / BW). The replay charges each message on its own, as if every message
    had a link to itself; this bound shows what sharing one port per node costs."""
    from hpclab.trace.matrix import aggregate, message_matrix
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
    import dataclasses
    from hpclab.trace.mapping import hosts_of, linear_mapping
    from hpclab.trace.matrix import aggregate, message_matrix
    from hpclab.trace.replay import replay
    from hpclab.trace.split import run_time
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


def link_rows(pingpongs: dict) -> tuple[list[dict], list[dict], pd.DataFrame]:
    """Pingpong rows for the model's links from runs of pingpong_specs ({'intra': Run | None,
    'inter': Run | None}): (intra rows, inter rows, a table saying where each link came from).
    Without an inter-node run the inter link is the quoted 2019 InfiniBand (quoted_inter_rows);
    without an intra-node run (one CPU per node) the intra link reuses the inter-node rows."""
    got = {k: r.result()["results"]["rows"] for k, r in pingpongs.items() if r is not None}
    if not got:
        raise HpclabError("no pingpong run to fit a network model to", "run imbalance.pingpong_specs(...) first")
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

MAPPING_EXPERIMENT = "05-mapping"


def mapping_layouts(px: int, py: int, ranks_per_node: int) -> dict[str, list[int]]:
    """{"linear": node of each rank, "blocked": ...}: ranks filling nodes in order, against the
    squarest tile of ranks per node that differs from it (on some grids the squarest tile *is* the
    linear mapping, e.g. 1 x 2 tiles on a 2 x 4 grid with 2 ranks per node)."""
    from hpclab.trace import mapping
    linear = mapping.linear_mapping(px, py, ranks_per_node)
    tiles = sorted(mapping.tile_shapes(px, py, ranks_per_node), key=lambda t: abs(t[0] - t[1]))
    for tile in tiles:
        blocked = mapping.blocked_mapping(px, py, ranks_per_node, tile=tile)
        if blocked != linear:
            return {"linear": linear, "blocked": blocked}
    raise HpclabError(f"on a {px} x {py} grid with {ranks_per_node} rank(s) per node every tile is the linear mapping",
                      "choose a grid with more than one rank row and column per node")


def mapping_specs(px: int, py: int, names: list[str], *, n: int, iters: int, repetitions: int = 1,
                  experiment: str = MAPPING_EXPERIMENT) -> tuple[dict[str, list[int]], list]:
    """Traced Poisson specs of a px x py grid on the nodes `names` (px*py / len(names) ranks on
    each), one per mapping of mapping_layouts, placed rank by rank with srun
    --distribution=arbitrary and a SLURM_HOSTFILE written below build/mappings/ (not /tmp: each
    virtual node has its own). Returns ({label: node index of each rank}, specs)."""
    from hpclab.core import paths
    from hpclab.spec import model as spec
    from hpclab.trace import mapping
    ranks = px * py
    if ranks % len(names):
        raise HpclabError(f"{ranks} ranks do not divide evenly over {len(names)} node(s)",
                          "choose a grid whose size is a multiple of the node count")
    layouts = mapping_layouts(px, py, ranks // len(names))
    folder = paths.build_dir() / "mappings"
    folder.mkdir(parents=True, exist_ok=True)
    specs = []
    for label, nodes in layouts.items():
        hostfile = folder / f"{px}x{py}-{len(names)}nodes-{label}.hosts"
        hostfile.write_text(mapping.slurm_hostfile(nodes, names=names))
        specs.append(spec.make_spec(
            kernel="poisson", nodes=len(names), ntasks=ranks, oversubscribe=True, trace=True, label=label,
            args={"n": n, "grid": f"{px}x{py}", "exchange": "nonblocking", "iters": iters},
            binding={"distribution": "arbitrary"}, env={"SLURM_HOSTFILE": str(hostfile)},
            repetitions=repetitions, experiment=experiment))
    return layouts, specs


def exchanges_of(trace) -> int:
    """Halo exchanges rank 0 made (its 'exchange' regions): how often every grid edge carried a message each way."""
    ev = trace.events
    return int(((ev["rank"] == 0) & (ev["call"] == "region_begin") & (ev["name"] == "exchange")).sum())


def mapping_counts(runs, layouts: dict[str, list[int]], px: int, py: int, iterations: int) -> pd.DataFrame:
    """One row per traced run: its mapping, whether every rank ran on the node the mapping gave
    it, the inter-node messages predicted from the grid (hpclab.trace.mapping) and counted in the
    trace's per-node message matrix, the inter-node bytes, and the measured ms per iteration."""
    from hpclab.trace import mapping, split as tsplit
    from hpclab.trace.load import load_run
    from hpclab.trace.matrix import aggregate, message_matrix
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
            "ranks where mapped": len(pairs) == len(set(nodes)) == len(set(where)),
            "inter-node messages, predicted": mapping.internode_messages(px, py, nodes, exchanges=exchanges_of(trace)),
            "inter-node messages, traced": int(per_node.off_diagonal("count")),
            "inter-node MB": per_node.off_diagonal("volume") / 1e6,
            "ms per iteration": tsplit.run_time(trace) * 1e-6 / iterations})
    return pd.DataFrame(rows)


def measure_mapping(px: int = 2, py: int = 4, nodes: int = 2, *, link: str = "1g", cpus_per_node: int = 2,
                    n: int, iters: int, repetitions: int = 1, progress: bool = True) -> pd.DataFrame:
    """Trace the linear and the blocked mapping of a px x py Poisson grid on `nodes` virtual nodes
    of the local cluster (hpclab.site.multinode, joined by `link`; the single-node cluster is back
    afterwards) and return mapping_counts of the runs. Ranks per node above cpus_per_node are
    oversubscribed, as the notebook explains. On a real site there are no virtual nodes to pin
    ranks to by name: prints why and returns an empty table."""
    from hpclab.jobs import experiment
    from hpclab.site import multinode
    with multinode.virtual_nodes(nodes, link=link, cpus_per_node=cpus_per_node) as report:
        if report is None:
            print("Not on the local cluster: write a host file for your own allocation with "
                  "hpclab.trace.mapping.slurm_hostfile and run the specs of imbalance.mapping_specs inside it.")
            return pd.DataFrame()
        layouts, specs = mapping_specs(px, py, report.nodes, n=n, iters=iters, repetitions=repetitions)
        runs = experiment.run_again_if_startup_crashed(specs, timeout=900, progress=progress)
    return mapping_counts(runs, layouts, px, py, iters)
