"""The imbalance lessons (notebooks 05 and 05b, lab-imbalance): where a parallel run's time goes
(compute, transfer, load imbalance, dependency), measured on this cluster and simulated at the
2014 talk's 384-rank scale.

Its runs: which traced runs to make on this cluster, and the experiments that make them:

- `site_layout`, `cluster_slots`, `physical_cores`, `oversubscription`: what this cluster offers;
- `configurations(slots)`, `dependency_configurations(...)`: which process grids and exchange
  styles fit on it;
- `poisson_specs(...)`, `pingpong_specs(...)`: the traced Poisson runs and the pingpong runs the
  network model is fitted to;
- `SEED_CASES`: the talk's 384-rank configurations, which hpclab.analysis.imbalance simulates
  (`seed_scale`); `subdomain_specs(...)`, `measure_subdomains(...)`: single-rank runs of each
  case's subdomain shape, as real Slurm jobs;
- `mapping_specs(...)`, `measure_mapping(...)`: the linear against a blocked rank-to-node
  mapping, traced on virtual nodes;
- `node_plan`, `dedicated_setup(...)`, `dedicated_specs(...)`, `measure_dedicated(...)`,
  `dedicated_model(...)`: the split measured with a core per rank, on the node's own cores or on
  one-core virtual nodes (hpclab.course.sizing decides which).

Its words: `ADVICE` for the learner's largest part, and the reports built from the numbers
(`split_report`, `exchange_report`, `collective_wait_report`, `eager_send_report`,
`simulated_report`, `simulated_ranking`). Its claims: the talk's five, with their fidelity rows
(`imbalance_split`, `nonblocking_dependency`, `grid_2d_vs_1d`, `mapping_messages`,
`mapping_time`). Its lab's expected answers: `reference`, from the runs a student packed.

The analysis of the runs is hpclab.analysis.imbalance, the figures hpclab.plots.imbalance and
hpclab.plots.trace.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import pandas as pd

from hpclab.analysis import phrases
from hpclab.analysis.imbalance import (FIT_MAX_BYTES, REST, SPLIT_NAMES, inter_eager_limit, link_rows,
                                       mapping_counts, mapping_layouts, model_table, nic_busy, pingpong_model,
                                       split_shares, subdomain_shapes, subdomain_table)
from hpclab.core import paths, seedfacts
from hpclab.core.errors import HpclabError, JobFailed
from hpclab.course.fidelity import Claim, Row, make_row
from hpclab.course.lessons import Lesson, register
from hpclab.course.quiz import accepted
from hpclab.jobs import experiment as exp
from hpclab.site import multinode
from hpclab.site import profile as site_profile
from hpclab.spec import model as spec
from hpclab.trace import load, mapping, split
from hpclab.trace.replay import replay

# --- the runs: traced configurations on this cluster ---------------------------------------------

EXPERIMENT = "05-imbalance"

# Rounds of a paired comparison (one job of each spec per round, submitted together so they
# alternate A B A B): seven put the 95 % CI between the 3rd smallest and the 3rd largest of the
# pairs' Walsh averages, so one or two disturbed rounds cannot flip a decision. A fixed number,
# not run(until=...): the effects here are sized to be decided at seven rounds, where until's first
# look (stats.stop_rule, 7 rounds at the stricter 0.975 a look needs) asks every pair to agree and
# its rounds, submitted one after the other, cost about a third more time than all queued at once.
ROUNDS = 7


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
    st = site or site_profile.load_site()
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


def poisson_specs(configs: list[Config], *, n: int, iters: int, repetitions: int,
                  cores_per_node: int | None = None, experiment: str = EXPERIMENT) -> list:
    """Traced Poisson specs, one per configuration (each repeated `repetitions` times as jobs).
    n: grid points per side; iters: solver iterations; cores_per_node (if given): ask for as
    many nodes as the ranks need. Labels are the configurations' labels."""
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
                   experiment: str = EXPERIMENT, repetitions: int = 3) -> dict:
    """Pingpong specs for the model's two links: 'intra' (2 ranks on one node, if a node has 2
    CPUs) and 'inter' (one rank on each of 2 nodes, if there are 2 nodes); None where the
    cluster cannot place them. Each runs `repetitions` times: the model is fitted to the median
    of each size (analysis.imbalance.median_rows), so one run disturbed by other work on a shared
    machine does not make the model (measured here: 23 us and 0.98 GB/s from one such run, where
    the node's shared memory gives 0.8 us and 9.5 GB/s)."""
    base = dict(kernel="pingpong", ntasks=2, args={"max_bytes": max_bytes}, experiment=experiment,
                repetitions=repetitions)
    return {"intra": spec.make_spec(**base, nodes=1, label="model fit: one node") if cores_per_node >= 2 else None,
            "inter": spec.make_spec(**base, nodes=2, ntasks_per_node=1, label="model fit: two nodes")
            if nodes >= 2 else None}


def machine_plan(plan, ranks: int, dedicated: "Dedicated") -> str:
    """Notebook 05's plan on this machine, in a sentence or two (said once): its cores and NUMA
    nodes, whether `ranks` traced ranks get a core each, and where the lesson gives each rank one
    (dedicated.case)."""
    cores = physical_cores()
    numa = f"{plan.numa_nodes} NUMA node{'s' if plan.numa_nodes != 1 else ''}"
    four = (f"traced with {ranks} ranks it is oversubscribed, {ranks / cores:.1f} ranks per core" if ranks > cores
            else f"traced with {ranks} ranks it gives each a core")
    if dedicated.where == "none":
        return f"This machine: {cores} cores, {numa}; {four}, and nothing gives ranks a core each."
    return f"This machine: {cores} cores, {numa}; {four}. A core per rank: {dedicated.case}."


def mapping_plan(px: int, py: int, nodes: int, cpus_per_node: int) -> str:
    """Notebook 05b's plan for the measured mapping, in one sentence (said once): px*py ranks on
    `nodes` virtual nodes of cpus_per_node CPUs, against this machine's cores."""
    ranks, cores = px * py, physical_cores()
    if ranks > cores:
        return (f"This machine: {cores} cores, so the {ranks} ranks on {nodes} virtual nodes of {cpus_per_node} CPUs "
                f"share them ({ranks / cores:.1f} per core): their times measure waiting for a core, while the "
                "message counts do not depend on it.")
    return f"This machine: {cores} cores, a core for each of the {ranks} ranks on {nodes} virtual nodes."


def measure_model(nodes: int, cores_per_node: int, *, eager: int, eager_tcp: int, experiment: str = EXPERIMENT,
                  progress: bool = True):
    """The network model of notebooks 05 and 05b: pingpong_specs run (each link three times),
    fitted to the median of each size (analysis.imbalance: link_rows, pingpong_model), the
    inter-node eager limit from inter_eager_limit. Returns (model, intra rows, inter rows, a
    table of each link's numbers and where they come from, the pingpong runs)."""
    specs = pingpong_specs(nodes, cores_per_node, experiment=experiment)
    runs = exp.run([s for s in specs.values() if s is not None], progress=progress)
    pingpongs = {k: [r for r in runs if r.spec.label == s.label] if s else None for k, s in specs.items()}
    intra, inter, sources = link_rows(pingpongs)
    inter_eager, inter_from = inter_eager_limit(sources, eager_tcp)
    model = pingpong_model(intra, inter_rows=inter, eager=eager, inter_eager=inter_eager, name="fitted")
    table = model_table(model).join(sources).assign(
        eager_limit_from=["btl shared memory eager limit (ompi_info)", inter_from])
    return model, intra, inter, table, list(runs)


def oversubscription(ntasks: int, cores: int | None = None) -> str:
    """One sentence: does a job of ntasks ranks oversubscribe this machine's cores?"""
    cores = cores or physical_cores()
    if ntasks > cores:
        return (f"{ntasks} ranks share {cores} core(s): the run is oversubscribed "
                f"({ntasks / cores:.1f} ranks per core).")
    return f"{ntasks} ranks on {cores} core(s): one core or more per rank, no oversubscription."


# --- the talk's 384-rank cases, and their subdomains run on one rank here ------------------------

# The configurations of the talk's 384-rank study (seed 001), plus the two changes it proposes:
# (label, P, Q, exchange, mapping), for hpclab.analysis.imbalance.seed_scale and subdomain_shapes.
SEED_CASES = (  # the 2014 code's exchange: every rank sends first, then receives ("naive")
    ("2D 24x16", 24, 16, "naive", "linear"),
    ("1D 384x1", 384, 1, "naive", "linear"),
    ("1D 1x384", 1, 384, "naive", "linear"),
    ("2D 24x16 non-blocking", 24, 16, "nonblocking", "linear"),
    ("2D 24x16 blocked mapping", 24, 16, "naive", "blocked"),
)


SUBDOMAIN_EXPERIMENT = "05-subdomains"


# Lattice updates per single-rank run: a few tenths of a second of compute (a few ns per point and sweep).
UPDATES_PER_RUN = 5e7


def subdomain_specs(shapes: pd.DataFrame, *, iters: int | None = None, repetitions: int = 3,
                    experiment: str = SUBDOMAIN_EXPERIMENT) -> list:
    """Single-rank Poisson specs, one per distinct local shape of subdomain_shapes (cases with
    the same shape share it), each run `repetitions` times. iters: sweeps per run (default:
    about UPDATES_PER_RUN lattice updates, a few tenths of a second of compute). Labels are
    'subdomain LXxLY'."""
    if shapes.empty:
        raise HpclabError("no subdomain shapes to measure", "pass subdomain_shapes(...) of at least one case")
    out = []
    for (lx, ly), _ in shapes.groupby(["local_x", "local_y"], sort=False):
        k = iters or max(10, round(UPDATES_PER_RUN / (lx * ly)))
        out.append(spec.make_spec(kernel="poisson", ntasks=1, label=f"subdomain {lx}x{ly}",
                                  args={"shape": f"{lx}x{ly}", "grid": "1x1", "iters": k},
                                  repetitions=repetitions, experiment=experiment))
    return out


def measure_subdomains(cases=SEED_CASES, *, n: int | None = None, scale: float | None = None,
                       keep: str = "row_length", iters: int | None = None, repetitions: int = ROUNDS,
                       others: int = 3, strip: str = "1D 1x384", tile: str = "2D 24x16", progress: bool = True,
                       timeout: float = 900, experiment: str = SUBDOMAIN_EXPERIMENT) -> pd.DataFrame:
    """Run each case's subdomain shape (subdomain_shapes(cases, n=, scale=, keep=): the seed's
    local grid, scaled to this machine's cache) on one rank as real Slurm jobs of the poisson
    kernel (--shape), submitted together so that the rounds alternate: the `strip` and `tile`
    cases' shapes `repetitions` times each (grid_2d_vs_1d compares them paired by round), every
    other shape `others` times (their median rate feeds the simulation), and return subdomain_table:
    per case and run, the compute rate in ns per point of each phase, with the run ids and
    rounds. This is what makes the 1x384 strip's short rows cost what they cost here.

    A fixed number of rounds, not run(until=...): the strip's penalty is large (2.5x here), so
    seven rounds decide it every time, and all rounds queued at once keep both of this machine's
    cores busy, where rounds one after the other would leave one idle."""
    shapes = subdomain_shapes(cases, n=n, scale=scale, keep=keep)
    specs = subdomain_specs(shapes, iters=iters, repetitions=repetitions, experiment=experiment)
    compared = {f"subdomain {r.local_x}x{r.local_y}" for _, r in shapes[shapes["case"].isin([strip, tile])].iterrows()}
    specs = [sp if sp.label in compared else sp.model_copy(update={"repetitions": min(repetitions, others)})
             for sp in specs]
    runs = exp.run(specs, progress=progress, timeout=timeout)
    return subdomain_table(runs, shapes)


MAPPING_EXPERIMENT = "05-mapping"


def mapping_specs(px: int, py: int, names: list[str], *, n: int, iters: int, repetitions: int = 1,
                  experiment: str = MAPPING_EXPERIMENT) -> tuple[dict[str, list[int]], list]:
    """Traced Poisson specs of a px x py grid on the nodes `names` (px*py / len(names) ranks on
    each), one per mapping of mapping_layouts, placed rank by rank with srun
    --distribution=arbitrary and a SLURM_HOSTFILE written below build/mappings/ (not /tmp: each
    virtual node has its own). Returns ({label: node index of each rank}, specs)."""
    ranks = px * py
    if ranks % len(names):
        raise HpclabError(f"{ranks} ranks do not divide evenly over {len(names)} node(s)",
                          "choose a grid whose size is a multiple of the node count")
    layouts = mapping_layouts(px, py, ranks // len(names))
    folder = paths.output_dir() / "mappings"
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


def measure_mapping(px: int = 2, py: int = 4, nodes: int = 2, *, link: str = "1g", cpus_per_node: int = 2,
                    n: int, iters: int, repetitions: int = 1, progress: bool = True) -> pd.DataFrame:
    """Trace the linear and the blocked mapping of a px x py Poisson grid on `nodes` virtual nodes
    of the local cluster (hpclab.site.multinode, joined by `link`; the single-node cluster is back
    afterwards) and return mapping_counts of the runs. Ranks per node above cpus_per_node are
    oversubscribed, as the notebook explains. On a real site there are no virtual nodes to pin
    ranks to by name: prints why and returns an empty table."""
    with multinode.virtual_nodes(nodes, link=link, cpus_per_node=cpus_per_node) as report:
        if report is None:
            print("Not on the local cluster: write a host file for your own allocation with "
                  "hpclab.trace.mapping.slurm_hostfile and run the specs of mapping_specs (this lesson) inside it.")
            return pd.DataFrame()
        layouts, specs = mapping_specs(px, py, report.nodes, n=n, iters=iters, repetitions=repetitions)
        runs = exp.run_again_if_startup_crashed(specs, timeout=900, progress=progress)
    return mapping_counts(runs, layouts, px, py, iters)


# --- the split measured with a core per rank ------------------------------------------------------

DEDICATED_EXPERIMENT = "05-dedicated"
# Halo messages between virtual nodes span at least this many token buckets of the link
# (links.yaml: the rate holds on messages of at least 8 buckets).
BUCKETS_PER_HALO = 8


@dataclass(frozen=True)
class Dedicated:
    """How notebook 05 measures its split with a core per rank on this machine (dedicated_setup).

    where: "node" (the node's own cores), "vnodes" (one-core virtual nodes joined by `link`) or
    "none" (a single core: nothing gives two ranks a core each). ranks: the ranks, a chain along
    x (grid 'Px1'); shape 'NXxNY': the NX rows are split over the ranks, the first rank along x
    taking `heavy` times the rows of each other (poisson --heavy: the load imbalance), and each
    halo message is a row of NY doubles, at least twice `eager` (the eager limit in bytes of the
    link the halos cross) and, on a shaped link, BUCKETS_PER_HALO of its token buckets, so the naive exchange's blocking sends wait for their receives (the
    chain). case: one sentence saying which case this is."""

    where: str
    ranks: int
    grid: str
    shape: str
    heavy: float
    eager: int
    link: str
    case: str

    @property
    def message_bytes(self) -> int:
        return 8 * int(self.shape.split("x")[1])

    def label(self, exchange: str) -> str:
        return f"{self.grid}, rank 0 x{self.heavy:g} rows, {exchange}"

    @property
    def setting(self) -> str:
        """Where the runs ran, short, for a fidelity row: '2 one-core virtual nodes, 1g link'."""
        if self.where == "vnodes":
            return f"{self.ranks} one-core virtual nodes, {self.link} link"
        return "a core per rank on this node" if self.where == "node" else "nowhere"


def node_plan():
    """The lessons' sizes on this machine: hpclab.course.sizing.plan of hwloc's topology."""
    from hpclab.course import sizing
    from hpclab.site import topology

    return sizing.measured_plan(topology.from_lstopo())


def dedicated_setup(plan, *, eager_shm: int, eager_tcp: int, heavy: float = 2.0, rows: int | None = None,
                    link: str = "1g") -> Dedicated:
    """Where and how to measure the split with a core per rank, from a LessonPlan
    (hpclab.course.sizing.plan): on the node itself with plan.imbalance_ranks ranks when they each
    get a core (imbalance_dedicated), else on plan.vnodes one-core virtual nodes joined by `link`
    (1 Gb/s by default), one rank each. eager_shm, eager_tcp: the eager limits (bytes) of shared
    memory and TCP (hpclab.site.ompi.eager_limit). rows: rows of each light rank (default 4 between
    nodes, 8 inside a node, where a message costs far less). Between virtual nodes a halo message
    spans BUCKETS_PER_HALO token buckets (about 8 ms on 1 Gb/s) and 4 rows of 125,056 points are
    about 3 ms of compute, so the naive exchange's chain (two message times where the non-blocking
    exchange pays one) is most of an iteration: measured here, 60-77 against 35-49 ms per
    iteration, an effect far beyond the runs' noise. Raises HpclabError for heavy < 1."""
    if heavy < 1:
        raise HpclabError(f"heavy = {heavy}: the first rank's share of rows must be at least 1", "use 1 (even) or more")
    if plan.imbalance_dedicated:
        where, ranks, eager, link_used = "node", plan.imbalance_ranks, eager_shm, ""
        rows = rows or 8
        case = f"{ranks} ranks on this node's {plan.cores} cores, a core each, the halos through shared memory"
    elif plan.vnodes >= 2:
        where, ranks, eager, link_used = "vnodes", plan.vnodes, eager_tcp, link
        rows = rows or 4
        case = f"{ranks} one-core virtual nodes joined by a {link} link, one rank each"
    else:
        return Dedicated("none", 0, "", "", heavy, 0, "",
                         f"this node has {plan.cores} core(s): no configuration gives two ranks a core each")
    message = 2 * eager
    if link_used:
        # A shaped link's token bucket passes its first burst_bytes at the veth's own speed and
        # refills while the ranks compute: a halo of about one bucket crosses almost unshaped,
        # while the pingpong the model is fitted to runs back to back at the line rate (the
        # replay then over-predicted the transfer: the split's rest was -44 %). Halos of at least
        # BUCKETS_PER_HALO buckets make the line rate govern both.
        from hpclab.cluster import links

        message = max(message, BUCKETS_PER_HALO * links.load_profiles()[link_used].burst_bytes())
    ny = 64 * math.ceil(message / 8 / 64)
    nx = round(rows * (heavy + ranks - 1))
    return Dedicated(where, ranks, f"{ranks}x1", f"{nx}x{ny}", heavy, eager, link_used, case)


def dedicated_specs(d: Dedicated, *, iters: int, repetitions: int, experiment: str = DEDICATED_EXPERIMENT) -> list:
    """The runs of the dedicated-core split: a pingpong for the network model (between two nodes,
    or inside the node; up to 4x the halo message) and the traced Poisson run with the naive and
    with the non-blocking exchange, each `repetitions` times. The pingpong comes first."""
    if d.where == "none":
        raise HpclabError(d.case, "run notebook 05 on a machine with at least 2 cores")
    across = d.where == "vnodes"
    # the kernel's own round trips (40 MiB a size): with 20 a size the fit gave 102 MB/s and 61 us on
    # the 1 Gb/s link instead of 125 MB/s, TCP's start on each size weighing in
    pp = spec.make_spec(kernel="pingpong", ntasks=2, nodes=2 if across else 1, ntasks_per_node=1 if across else None,
                        args={"max_bytes": 4 * d.message_bytes}, label="model fit: dedicated", experiment=experiment)
    out = [pp]
    for exchange in ("naive", "nonblocking"):
        out.append(spec.make_spec(
            kernel="poisson", ntasks=d.ranks, nodes=d.ranks if across else 1, ntasks_per_node=1 if across else None,
            trace=True, label=d.label(exchange),
            args={"shape": d.shape, "grid": d.grid, "exchange": exchange, "iters": iters, "heavy": d.heavy},
            repetitions=repetitions, experiment=experiment))
    return out




def run_paired(specs: list, *, rounds: int = ROUNDS, progress: bool = True, timeout: float = 900) -> list:
    """experiment.run of `specs`, `rounds` repetitions each, submitted together (the rounds
    alternate, so the runs pair by repetition); when runs died inside MPI_Init (Open MPI 4.1 on
    virtual nodes, now and then: experiment.died_in_mpi_startup) the whole experiment runs once
    more, so every round stays a pair. Returns the runs."""
    specs = [sp.model_copy(update={"repetitions": rounds}) for sp in specs]
    for attempt in (1, 2):
        try:
            return exp.run(specs, progress=progress, timeout=timeout)
        except JobFailed as err:
            if attempt == 2 or not err.runs or not all(exp.died_in_mpi_startup(r) for r in err.runs):
                raise
    raise AssertionError("unreachable")


def measure_dedicated(d: Dedicated, *, iters: int, rounds: int = ROUNDS, progress: bool = True,
                      timeout: float = 900) -> tuple[object, list]:
    """Run dedicated_specs on virtual nodes (hpclab.site.multinode; the single-node cluster is back
    afterwards) or on the node: the pingpong once, then the naive and the non-blocking exchange in
    `rounds` alternating rounds (run_paired). Returns (the pingpong run, the traced Poisson runs,
    naive ones first; each run's repetition is its round)."""
    specs = dedicated_specs(d, iters=iters, repetitions=1)

    def measure():
        pp = exp.run(specs[0], progress=progress, timeout=timeout)[0]
        return pp, list(run_paired(specs[1:], rounds=rounds, progress=progress, timeout=timeout))

    if d.where == "vnodes":
        with multinode.virtual_nodes(d.ranks, link=d.link, cpus_per_node=1):
            return measure()
    return measure()


def dedicated_model(d: Dedicated, pingpong, *, eager_shm: int, eager_tcp: int):
    """The network model of the dedicated-core runs, fitted to their pingpong (between the two
    nodes, or inside the node) up to 4x the halo message: (model, table of where each link and
    the inter-node eager limit come from)."""
    pingpongs = {"intra": None, "inter": pingpong} if d.where == "vnodes" else {"intra": pingpong, "inter": None}
    intra, inter, sources = link_rows(pingpongs)
    inter_eager, why = inter_eager_limit(sources, eager_tcp)
    model = pingpong_model(intra, inter_rows=inter, eager=eager_shm, inter_eager=inter_eager,
                           max_bytes=4 * d.message_bytes, name="fitted (dedicated cores)")
    sources = sources.assign(eager_limit_from=["btl shared memory eager limit (ompi_info)", why])
    return model, sources


# --- the lessons' words: advice, and reports built from the numbers -------------------------------

# What each part calls for, for the quiz whose answer is the learner's own largest part.
ADVICE = {"transfer": "a faster network or a placement that keeps messages inside a node",
          "load imbalance": "rebalancing the domain decomposition",
          "dependency": "reordering the sends and receives (non-blocking or ordered exchange)",
          REST: "giving every rank a core of its own (fewer ranks, or more cores)"}

REST_LIMIT = 0.10  # the rest a clean measured split leaves: at most this share of T_real


def median_table(table: pd.DataFrame, columns=("T_real", "T_comp", "T_transfer", "T_load", "T_depend", "T_rest",
                                                "T_off_cpu")) -> pd.DataFrame:
    """The median over each configuration's runs (split_table rows, ms per iteration) of T_real,
    the five parts and T_off_cpu, one row per label in the table's order, with the run count."""
    order = list(dict.fromkeys(table["label"]))
    out = table.groupby("label", sort=False)[[c for c in columns if c in table]].median().loc[order]
    out.insert(0, "runs", table.groupby("label", sort=False).size().loc[order])
    return out


def largest_part_takeaway(split, label: str, oversubscribed: bool) -> str:
    """The takeaway of section 3's diagram (at most 40 words): the largest part after compute of
    one run's Split and its share of T_real, and, on an oversubscribed run, the replay's
    prediction of compute's share with a core per rank (T_comp / T_model)."""
    waste = {name: getattr(split, key) for key, name in SPLIT_NAMES.items() if key != "T_comp"}
    biggest = max(waste, key=waste.get)
    text = f"After compute, the largest part of the {label} run is {biggest}: {phrases.pct(waste[biggest] / split.T_real)} of T_real"
    if oversubscribed and biggest == "rest":
        return (text + ", time its ranks waited for a core. With a core each, the replay predicts compute at "
                f"{phrases.pct(split.T_comp / split.T_model)} of the run (T_model).")
    return text + "."


def dedicated_table(d: "Dedicated") -> pd.DataFrame:
    """The dedicated-core case in numbers, one row: ranks and grid, rows of the light ranks and of
    the first (heavy) one, points per row, the halo message and the eager limit of its link (on a
    single core, where nothing gives ranks a core each: the case's sentence)."""
    if d.where == "none":
        return pd.DataFrame({"case": [d.case]})
    nx, ny = (int(v) for v in d.shape.split("x"))
    light = nx / (d.heavy + d.ranks - 1)
    return pd.DataFrame([{"ranks": d.ranks, "grid": d.grid, "rows, first rank": round(light * d.heavy),
                          "rows, each other rank": round(light), "points per row": ny,
                          "halo message (bytes)": d.message_bytes, "eager limit (bytes)": d.eager,
                          "link": d.link or "shared memory"}]).set_index("ranks")


def split_shares_table(table: pd.DataFrame) -> pd.DataFrame:
    """Each run's five parts as % of its T_real (split_table or dependency_table rows), one row per
    run: label's last word (the exchange) and round, then compute, transfer, load imbalance,
    dependency and rest. A table, not sentences: the learner reads the numbers."""
    shares = split_shares(table)
    out = (shares[list(SPLIT_NAMES.values())] * 100).round(0).astype(int)
    out.insert(0, "round", shares["repetition"].astype(int))
    out.insert(0, "run", [str(lbl).split()[-1] for lbl in shares["label"]])
    return out.sort_values(["run", "round"]).reset_index(drop=True)


def _paired_rounds(table: pd.DataFrame, col: str, a: str, b: str, by: str = "exchange") -> tuple[list, list, bool]:
    """col of the rows where `by` is a and where it is b, in round order; paired when both sides
    have exactly the same rounds (they ran in one experiment, alternating)."""
    sa = table[table[by] == a].sort_values("repetition")
    sb = table[table[by] == b].sort_values("repetition")
    paired = len(sa) == len(sb) and list(sa["repetition"]) == list(sb["repetition"])
    return list(sa[col]), list(sb[col]), paired


def exchange_comparison(table: pd.DataFrame, col: str | None = None) -> phrases.Comparison:
    """The naive against the non-blocking exchange in `col` (rows of dependency_table: exchange,
    repetition = the round, col in ms per iteration; default T_solve, the solver's own time per
    iteration, when the table has it, else T_real), decided by hpclab.analysis.stats: paired when
    both ran the same rounds. T_solve leaves out the set-up and connection start the trace's
    T_real holds, the same for both exchanges and noisy. Raises HpclabError without both exchanges."""
    if not {"naive", "nonblocking"} <= set(table.get("exchange", [])):
        raise HpclabError("the table needs naive and nonblocking runs", "pass dependency_table of both exchanges")
    col = col or ("T_solve" if "T_solve" in table and table["T_solve"].notna().all() else "T_real")
    a, b, paired = _paired_rounds(table, col, "naive", "nonblocking")
    return phrases.compare(a, b, a_name="the naive exchange", b_name="the non-blocking one",
                           quantity=col, unit="ms per iteration", paired=paired)


def exchange_medians(table: pd.DataFrame) -> pd.DataFrame:
    """Median over the rounds of T_real, the parts the chain moves and T_off_cpu (ms per
    iteration), one row per exchange: the small table beside the decision."""
    cols = [c for c in ("T_solve", "T_real", "T_comp", "T_transfer", "T_depend", "T_chain", "T_rest", "T_off_cpu")
            if c in table]
    return table.groupby("exchange")[cols].median()


def dedicated_takeaway(table: pd.DataFrame) -> str:
    """The takeaway of the dedicated-core diagram (at most 40 words), from the numbers: the
    naive runs' largest part and how it compares with the non-blocking runs'; then, when a run's
    rest is below zero, why, or else the rest of the non-blocking runs when it is larger than the
    naive runs' (the model's overlap of the two directions not found)."""
    med = exchange_medians(table)
    share = lambda ex, col: med.loc[ex, col] / med.loc[ex, "T_real"]
    parts = [c for c in ("T_comp", "T_transfer", "T_depend") if c in med]
    lead = max(parts, key=lambda c: med.loc["naive", c])
    base = med.loc["nonblocking", lead]
    text = (f"{SPLIT_NAMES[lead].capitalize()} leads the naive runs ({phrases.pct(share('naive', lead))} of T_real)"
            + (f", {med.loc['naive', lead] / base:.1f}x the non-blocking runs': their messages paid one after another."
               if base > 0 else "."))
    rest = med.loc["nonblocking", "T_rest"]
    if (table["T_rest"] < 0).any():   # where a negative rest appears, it is explained (the one second sentence)
        text += " A rest below zero: the model replays that run slightly slower than it ran."
    elif rest > med.loc["naive", "T_rest"] and share("nonblocking", "T_rest") > REST_LIMIT:
        off = med.loc["nonblocking", "T_off_cpu"] if "T_off_cpu" in med else float("nan")
        text += (f" The non-blocking runs' rest ({phrases.pct(share('nonblocking', 'T_rest'))}) is overlap the model "
                 "expects and the link did not give" + ("." if off < rest / 2 else ", or time switched out."))
    return text


def collective_wait_table(waits: pd.DataFrame, splits: dict, iterations: dict) -> pd.DataFrame:
    """Per run, the waiting in MPI_Allreduce (Wait at NxN, from the rows of
    hpclab.trace.waitstates.by_callsite with a column `run` and `total_ns`) in ms per rank and
    iteration, beside the run's load imbalance and rest (its Split) per iteration, and which of
    them can account for it (`cause`: the one at least half the wait, load imbalance first; else
    'delays passed along', the exchanges before). splits: {run label: Split}; iterations: {run
    label: solver iterations}."""
    rows = []
    for label, s in splits.items():
        it = iterations[label]
        sub = waits[(waits["run"] == label) & waits["callsite"].astype(str).str.contains("MPI_Allreduce")]
        wait = float(sub["total_ns"].sum()) / s.nranks / it / 1e6
        load_ms, rest_ms = s.T_load / it / 1e6, s.T_rest / it / 1e6
        if wait <= 0:
            cause = "no wait"
        elif load_ms >= 0.5 * wait:
            cause = "load imbalance"
        elif rest_ms >= 0.5 * wait:
            cause = "rest (switched out)"
        else:
            cause = "delays passed along"
        rows.append({"run": label, "Allreduce wait": wait, "load imbalance": load_ms, "rest": rest_ms,
                     "cause": cause})
    return pd.DataFrame(rows).set_index("run")


def eager_send_report(trace, window: tuple[int, int], eager: int) -> str:
    """The takeaway of the measured timeline (at most 40 words): the blocking MPI_Send calls of
    `trace` inside `window` (ns) whose message is at most `eager` bytes, their median wall time,
    and how much of it the rank ran inside the MPI library (its CPU time) or was switched out."""
    ev = trace.events
    sel = ev[(ev["call"] == "MPI_Send") & (ev["bytes"] <= eager) & (ev["peer"] >= 0)
             & (ev["t_enter"] >= window[0]) & (ev["t_exit"] <= window[1])]
    if sel.empty:
        return "No eager MPI_Send call falls inside this window."
    wall = phrases.Spread.of((sel["t_exit"] - sel["t_enter"]) / 1e3)
    n = len(sel)
    if "cpu_enter" not in sel or (sel["cpu_enter"] < 0).any():
        return f"{n} eager MPI_Send call(s) in this window last {wall.median:.1f} us (median; no CPU times recorded)."
    cpu = phrases.Spread.of((sel["cpu_exit"] - sel["cpu_enter"]) / 1e3)
    off = min(max(1 - cpu.median / wall.median, 0.0), 1.0) if wall.median > 0 else 0.0
    bars = f"The {n} eager MPI_Send bars (median {wall.median:.1f} us) are" if n > 1 else \
        f"The eager MPI_Send bar ({wall.median:.1f} us) is"
    return (f"{bars} the rank inside the MPI library ({(1 - off) * 100:.0f} %) or switched out "
            f"({off * 100:.0f} %), not the message: an eager send waits for nobody.")


# A simulated case with shared node links (each node's messages queue for one link per direction)
# is kept as a prediction while its transfer stays within this factor of a bound: the same trace
# replayed with a link per message (no sharing at all), plus the busiest node port's busy time
# (nic_busy: messages x L + bytes / BW), the most that queueing behind a node's other messages
# can add. Far above it, the excess is the model's own: each message holds its sender's and its
# receiver's link for its whole transfer (as in Dimemas), so links wait for each other, which an
# adapter that pipelines many messages does not do. Measured here: 0.67-1.02x the bound for the
# 2D mappings and the 1D grids, 3.6x for the non-blocking 2D exchange.
PORT_BOUND_FACTOR = 1.25


def port_check(sims: dict, shared, unshared) -> pd.DataFrame:
    """Per simulated case (sims: {label: hpclab.analysis.imbalance.Simulated}, replayed on the
    model `shared`, whose node links are shared): its transfer part; the bound, its trace's
    transfer replayed on `unshared` (the same model, a link per message) plus the busiest node
    port's busy time on `shared`'s inter-node link; all in ms per iteration; their ratio, and
    whether the case is kept as a prediction (ratio within PORT_BOUND_FACTOR)."""
    rows = []
    for label, sim in sims.items():
        per = 1e-6 / sim.iterations
        transfer = sim.split.T_transfer * per
        alone = (split.run_time(replay(sim.trace, unshared)) - split.run_time(sim.ideal)) * per
        port = float(nic_busy(sim.trace, shared, sim.iterations)["port_busy_us"].max()) / 1e3
        bound = alone + port
        ratio = transfer / bound if bound > 0 else float("nan")
        rows.append({"case": label, "transfer": transfer, "a link per message": alone, "busiest port": port,
                     "transfer / bound": ratio, "kept as prediction": bool(bound > 0 and ratio <= PORT_BOUND_FACTOR)})
    return pd.DataFrame(rows).set_index("case")


def port_check_text(check: pd.DataFrame) -> str:
    """The one position on the simulation, from port_check's numbers (at most 40 words): which
    cases it keeps as predictions and which it does not, with the ratio that decides."""
    kept, dropped = check[check["kept as prediction"]], check[~check["kept as prediction"]]
    text = (f"Kept as predictions: {len(kept)} cases, their transfer at most {kept['transfer / bound'].max():.2f}x "
            "the bound." if len(kept) else "No case is kept.")
    for label, row in dropped.iterrows():
        text += f" Not {label}: {row['transfer / bound']:.1f}x, links waiting for each other in the model."
    return text


def mapping_kept_text(check: pd.DataFrame, linear: str = "2D 24x16", blocked: str = "2D 24x16 blocked mapping") -> str:
    """Whether port_check keeps the two mappings' simulated times as the prediction, in words from
    its numbers (one sentence)."""
    ratios = {k: check.loc[k, "transfer / bound"] for k in (linear, blocked)}
    kept = {k: bool(check.loc[k, "kept as prediction"]) for k in (linear, blocked)}
    shown = ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items())
    if all(kept.values()):
        return f"Both mappings stay within the check's bound ({shown}): their simulated times are the prediction."
    return (f"Not both mappings stay within the check's bound ({shown}): the simulation gives no prediction "
            "of the mapping's time.")


def subdomain_takeaway(subdomains: pd.DataFrame, strip: str = "1D 1x384", tile: str = "2D 24x16") -> str:
    """The takeaway of the subdomain figure (at most 40 words): how the strip's compute per point
    compares with the tile's, decided as grid_2d_vs_1d decides it, beside the seed's factor."""
    both = subdomains[subdomains["case"].isin([strip, tile])]
    a, b, paired = _paired_rounds(both, "ns_per_point", strip, tile, by="case")
    cmp = phrases.compare(a, b, a_name=strip, b_name=tile, quantity="compute per grid point", unit="ns",
                          paired=paired)
    seed = f"(seed {_seed_strip_vs_tile():.2f}x)"
    if cmp.outcome == "different":
        return (f"The {strip} strip's short rows compute {cmp.difference()} per point than the {tile} tile {seed}: "
                "inner loops of a few points vectorise badly.")
    if cmp.outcome == "equivalent":
        return f"The {strip} strip computes as fast per point as the {tile} tile here, within 5 % {seed}."
    return f"This machine cannot tell the {strip} strip's compute per point from the {tile} tile's {seed}."


def seed_diagram_takeaway(ours: pd.DataFrame, quoted: pd.DataFrame, tile: str = "2D 24x16",
                          strip: str = "1D 1x384") -> str:
    """The takeaway of the simulated-beside-quoted diagram (at most 40 words): transfer's share of
    the 2D run and compute's share of the 1D strip, simulated and quoted (ours, quoted: rows =
    cases, columns = compute, transfer, load imbalance, dependency; any one unit each)."""
    a, q = ours.div(ours.sum(axis=1), axis=0), quoted.div(quoted.sum(axis=1), axis=0)
    return (f"Transfer is {phrases.pct(a.loc[tile, 'transfer'])} of the simulated {tile} run against "
            f"{phrases.pct(q.loc[tile, 'transfer'])} in 2014; compute {phrases.pct(a.loc[strip, 'compute'])} of the "
            f"{strip} run against {phrases.pct(q.loc[strip, 'compute'])}. Compare proportions: the machines differ.")


def mapping_map_takeaway(name: str, internode: int, other: int | None = None) -> str:
    """The takeaway of one node-to-node heat map (at most 40 words): how many messages per
    exchange cross nodes with this mapping, and against the other mapping's count."""
    text = f"{name}: {internode} messages per exchange cross nodes"
    if other:
        text += f", {internode / other:.2f}x the other mapping's {other}"
    return text + "; each coloured cell off the diagonal is a pair of nodes that talk."


def simulated_report(sim_table: pd.DataFrame, a: str, b: str) -> str:
    """One sentence on two simulated cases of simulated_table (rows a and b): their iteration
    times, and which is shorter and by how much. A simulation is deterministic (one value per
    case, no spread), and the sentence says it is a simulation."""
    ta, tb = float(sim_table.loc[a, "T_real"]), float(sim_table.loc[b, "T_real"])
    if ta == tb:
        return f"In the simulation, {a} and {b} take the same time per iteration ({ta:.4f} ms)."
    faster, slower = (a, b) if ta < tb else (b, a)
    tf, ts = min(ta, tb), max(ta, tb)
    return (f"In the simulation, {faster} takes {tf:.4f} ms per iteration and {slower} {ts:.4f} ms: "
            f"{slower} is {(ts / tf - 1) * 100:.0f} % slower (one simulated run each, no spread: a model's output).")


def simulated_ranking(sim_table: pd.DataFrame, cases) -> str:
    """The simulated cases `cases` (rows of simulated_table), shortest iteration first, as one
    sentence with their ms per iteration."""
    t = sim_table.loc[list(cases), "T_real"].astype(float).sort_values()
    return ("Simulated time per iteration, shortest first: "
            + ", ".join(f"{label} {v:.4f} ms" for label, v in t.items()) + ".")


# --- the claims these lessons test, and their rows in the fidelity table ---------------------------

_ITAC = "ITAC training 2014 (seed 001)"

GRID_2D_VS_1D = Claim(
    "grid-2d-vs-1d",
    "A 1 x P decomposition of the Poisson grid (long thin strips, short rows) computes slower than a "
    "near-square 2D one, because short rows vectorise badly.",
    f"{_ITAC}: 384 ranks, compute 4.46 s for the 24x16 grid vs 11.45 s for 1x384 (accumulated).")
NONBLOCKING_DEPENDENCY = Claim(
    "nonblocking-dependency",
    "A naive blocking halo exchange (send up, then receive) serialises into a chain once messages "
    "exceed the eager limit; a non-blocking exchange removes the dependency wait.",
    f"{_ITAC}: the blocking run's wait time on P6 'has vanished' with the non-blocking exchange.")
MAPPING_MESSAGES = Claim(
    "mapping-messages",
    "Placing blocks of the process grid on a node instead of consecutive ranks cuts the messages "
    "that cross the network.",
    f"{_ITAC}: 24x16 grid, 24 ranks per node: the linear mapping leaves '16 or 17 boundary' lines between a "
    "node and the others; with a 6x4 tile per node 'the number of processor boundary lines between nodes are: 4 "
    "(vertical) and 6 (horizontal)'. (Its '16X and 17X more Inter Node message compared to 1D' compares the 2D "
    "decomposition with the 1D one, not the two mappings.)")
MAPPING_TIME = Claim(
    "mapping-time",
    "The mapping with fewer inter-node messages makes the run faster.",
    f"{_ITAC}: speedup from 96 to 768 ranks, '2D with optimized mapping shows by far the best results!'")
IMBALANCE_SPLIT = Claim(
    "imbalance-split",
    "Replaying a trace on an ideal network splits run time into compute, transfer, load imbalance "
    "and dependency; for the 2D solver on InfiniBand, compute and transfer dominate.",
    f"{_ITAC}: 24x16 grid, compute 4.46 s, interconnect 3.89 s, load imbalance 0.12 s, dependency "
    "0.59 s (accumulated over ranks).")


def _seed_strip_vs_tile() -> float:
    """ITAC 2014's compute of the 1x384 grid over the 24x16 one, from hpclab.core.seedfacts."""

    compute = seedfacts.imbalance_2014()["compute"]
    return float(compute["1D 1x384"] / compute["2D 24x16"])


def noise_note(runs, d: "Dedicated | None" = None, company: bool = False) -> str:
    """What else ran beside `runs` (Run objects or run ids; hpclab.runs.parse.noise.beside_other_work),
    for a fidelity row; '' for runs on virtual nodes (d.where == 'vnodes'): there the watch reads the one kernel
    the virtual nodes share and counts the job's own peer rank and network work as other work
    (14 of 14 dedicated runs flagged, 1.0-1.3 cores 'elsewhere', on an otherwise idle machine).
    company=True for runs queued together by design (measure_subdomains: one rank each, two at a
    time, paired by round), which are each other's company, not other work."""
    from hpclab.runs.parse import noise

    if d is not None and d.where == "vnodes":
        return ""
    unique = list(dict.fromkeys(runs))   # run ids (a subdomain table repeats shared runs) or Run objects
    return noise.beside_other_work([r if hasattr(r, "path") else exp.Run.open(r) for r in unique], company=company)


def grid_2d_vs_1d(subdomains, runs=(), strip: str = "1D 1x384", tile: str = "2D 24x16", noise: str = "") -> Row:
    """From notebook 05b's single-rank runs of each decomposition's subdomain (measure_subdomains:
    one rank per subdomain, scaled to this machine's L2 cache): does the 1x384 strip compute
    slower per point than the 24x16 tile here? Decided by hpclab.analysis.stats (paired by round
    when both shapes ran the same rounds of one experiment): 'yes' when the strip is decided
    slower, 'no' when decided equivalent or faster, 'partly' when this machine cannot decide.
    noise: noise_note of the runs, if any, appended to the row's text."""
    g = subdomains.groupby("case") if len(subdomains) else None
    if g is None or not {strip, tile} <= set(g.groups):
        return make_row(GRID_2D_VS_1D.id, "-", "not shown", f"the subdomains {strip} and {tile} were not both measured", runs)
    both = subdomains[subdomains["case"].isin([strip, tile])]
    if "repetition" in both:
        a, b, paired = _paired_rounds(both, "ns_per_point", strip, tile, by="case")
    else:
        a, b, paired = list(g.get_group(strip)["ns_per_point"]), list(g.get_group(tile)["ns_per_point"]), False
    cmp = phrases.compare(a, b, a_name=f"{strip}'s strip", b_name=f"{tile}'s tile",
                          quantity="compute per grid point", unit="ns", paired=paired)
    seed_ratio = _seed_strip_vs_tile()
    here = (f"one rank per subdomain, scaled to this machine's L2 cache (seed {seed_ratio:.2f}x): {cmp.sentence()}"
            + (f" {noise}." if noise else ""))
    runs = list(runs) or list(both["run"])
    if cmp.beyond_spread and cmp.word() == "slower":
        return make_row(GRID_2D_VS_1D.id, here, "yes",
                        "measured and decided: the strip's short rows compute slower on this machine too", runs,
                        beyond_spread=True)
    if cmp.outcome == "undecided":
        return make_row(GRID_2D_VS_1D.id, here, "partly",
                        "this machine's runs cannot decide between the strip and the tile", runs)
    return make_row(GRID_2D_VS_1D.id, here, "no",
                    "decided: this machine computes the strip's short rows as fast as the tile's, or faster", runs)


def nonblocking_dependency(dependency, runs=(), setting: str = "", noise: str = "") -> Row:
    """From notebook 05's naive and non-blocking traced runs (hpclab.analysis.imbalance.dependency_table,
    with a model for T_chain; repetition = the round): is the naive exchange slower, measured?
    The solver's time per iteration (T_solve, else T_real) decided by hpclab.analysis.stats
    (exchange_comparison: paired by round when both ran the same rounds). 'yes' when decided slower; 'no' when decided faster or
    equivalent. Only when the runs cannot decide does the replay speak: T_chain (the replay on
    the fitted network minus the ideal replay: what the messages cost one after another) makes
    it 'predicted' (at least 1.5x the non-blocking exchange's) or 'partly'. The replay's ratio is
    always in the prediction column, labelled. setting: where the runs ran (e.g. 'one-core
    virtual nodes, 1g'); noise: hpclab.runs.parse.noise.beside_other_work of the runs, if any."""
    naive = dependency[dependency["exchange"] == "naive"] if len(dependency) else dependency
    nonblocking = dependency[dependency["exchange"] == "nonblocking"] if len(dependency) else dependency
    if naive.empty or nonblocking.empty:
        return make_row(NONBLOCKING_DEPENDENCY.id, "-", "not shown",
                        "the naive and non-blocking runs were not both traced", runs)
    cmp = exchange_comparison(dependency)
    where = f"{naive['ranks'].iloc[0]} ranks" + (f", {setting}" if setting else "")
    here = f"{where}, halos above the eager limit: {cmp.sentence()}" + (f" {noise}." if noise else "")
    prediction, chain = "", None
    if "T_chain" in dependency and nonblocking["T_chain"].median() > 0:
        chain = naive["T_chain"].median() / nonblocking["T_chain"].median()
        prediction = (f"replayed on the fitted network (a prediction): the messages cost {chain:.1f}x more with the "
                      f"naive exchange (T_chain {naive['T_chain'].median():.3g} vs "
                      f"{nonblocking['T_chain'].median():.3g} ms per iteration)")
    if cmp.beyond_spread and cmp.winner == cmp.b_name:
        return make_row(NONBLOCKING_DEPENDENCY.id, here, "yes",
                        "measured and decided: the naive exchange's chain makes every iteration longer, and the "
                        "non-blocking exchange removes it", runs, beyond_spread=True, prediction=prediction)
    if cmp.beyond_spread:
        return make_row(NONBLOCKING_DEPENDENCY.id, here, "no",
                        "measured and decided: the naive exchange was the faster one here", runs, prediction=prediction)
    if cmp.outcome == "equivalent":
        return make_row(NONBLOCKING_DEPENDENCY.id, here, "no",
                        "measured and decided: the two exchanges take the same time here", runs, prediction=prediction)
    if chain is not None and chain >= 1.5:   # 2 ranks: 2 message times against 1 at most (P ranks: 2 (P - 1))
        return make_row(NONBLOCKING_DEPENDENCY.id, here, "predicted",
                        "the measured runs cannot decide; only the replay shows the chain (its messages paid one "
                        "after another)", runs, evidence="replayed", prediction=prediction)
    if chain is not None and chain > 1:
        return make_row(NONBLOCKING_DEPENDENCY.id, here, "partly",
                        "the measured runs cannot decide, and the replay puts the chain at less than 1.5x the "
                        "non-blocking exchange's message cost", runs, evidence="replayed", prediction=prediction)
    return make_row(NONBLOCKING_DEPENDENCY.id, here, "no",
                    "neither the measured runs nor a replay show the naive exchange costing more", runs,
                    prediction=prediction)


def imbalance_split(table, label: str, oversubscribed: bool, runs=(), setting: str = "") -> Row:
    """From notebook 05's traced runs of one configuration (rows of
    hpclab.analysis.imbalance.split_table: T_real, T_model and the five parts, one row per
    repetition): do the five parts add up to T_real, and what leads?

    With a core per rank (oversubscribed=False) the split is measured, but on the lesson's
    engineered case (a short chain with a deliberately heavy first rank, dedicated_setup), not on
    the seed's 384 ranks on InfiniBand, which this machine cannot run: 'partly' when the parts add
    up in every run (the row says which parts lead), 'no' when they do not. With more ranks than
    cores the measured run is mostly time switched out; the replay on CPU time (T_model's parts)
    is then a prediction for a core per rank: 'predicted' when compute and transfer lead it,
    'partly' when not (evidence 'replayed'). setting: where the runs ran, for the row's text."""
    if table is None or len(table) == 0:
        return make_row(IMBALANCE_SPLIT.id, "-", "not shown", f"no traced run of {label}", runs)
    names = {"T_comp": "compute", "T_transfer": "transfer", "T_load": "load imbalance", "T_depend": "dependency",
             "T_rest": "rest"}
    shares = table[list(names)].div(table["T_real"], axis=0).rename(columns=names)
    adds = bool((table[list(names)].sum(axis=1).sub(table["T_real"]).abs() <= 0.01 * table["T_real"]).all())
    n = len(table)
    ranks = int(table["ranks"].iloc[0]) if "ranks" in table else 0
    med = shares.median()
    where = ", oversubscribed" if oversubscribed else (f", {setting}" if setting else ", a core per rank")
    here = (f"{label} ({ranks} ranks, {n} run{'s' if n != 1 else ''}{where}), "
            "median shares of T_real: " + ", ".join(f"{k} {v:.0%}" for k, v in med.items())
            + f"; rest {shares['rest'].min():.0%} to {shares['rest'].max():.0%} over the runs")
    if not adds:
        return make_row(IMBALANCE_SPLIT.id, here, "no", "the parts do not add up to the measured time", runs)
    four = ["compute", "transfer", "load imbalance", "dependency"]
    if oversubscribed:
        modelled = shares[four].div(shares[four].sum(axis=1), axis=0)
        lead = all(set(row.nlargest(2).index) == {"compute", "transfer"} for _, row in modelled.iterrows())
        prediction = ("replayed on CPU time (a core per rank, the fitted network): "
                      + ", ".join(f"{k} {v:.0%}" for k, v in modelled.median().items()) + " of T_model")
        if lead:
            return make_row(IMBALANCE_SPLIT.id, here, "predicted",
                            "with more ranks than cores the measured run is mostly time switched out (the rest); only the "
                            "replay on CPU time has compute and transfer lead, a prediction for a core per rank",
                            runs, evidence="replayed", prediction=prediction)
        return make_row(IMBALANCE_SPLIT.id, here, "partly",
                        "with more ranks than cores the measured run is mostly time switched out, and even the replay on "
                        "CPU time does not have compute and transfer lead", runs, evidence="replayed", prediction=prediction)
    lead_each = sum(set(row[four + ["rest"]].nlargest(2).index) == {"compute", "transfer"} for _, row in shares.iterrows())
    top = " and ".join(med[four + ["rest"]].nlargest(2).index)
    return make_row(IMBALANCE_SPLIT.id, here, "partly",
                    f"measured with a core per rank, but on an engineered {ranks}-rank case, not the seed's 384 ranks "
                    f"(this machine cannot run them): the parts add up in every run; {top} lead at the median, "
                    f"compute and transfer are the two largest in {lead_each} of {n} runs", runs)


def mapping_time(sims: dict, measured=None, runs=(), linear: str = "2D 24x16",
                 blocked: str = "2D 24x16 blocked mapping", *, oversubscribed: bool = False,
                 check: pd.DataFrame | None = None) -> Row:
    """Does the mapping with fewer inter-node messages make the run faster?

    The 384-rank simulation with shared node links (sims: {label: hpclab.analysis.imbalance.Simulated})
    always goes to the prediction column, with the fastest simulated case (the seed calls the
    blocked 2D mapping 'by far the best'). Measured (measured: the table of
    hpclab.analysis.imbalance.mapping_counts, 'ms per iteration' per 'mapping' and run) only when
    every rank had a core: with more ranks than cores (oversubscribed=True) the times measure
    waiting for a core, not the link, and the row is 'not shown'. With a core per rank the two
    mappings are decided by hpclab.analysis.stats ('yes' when blocked is decided faster). Without
    measured runs the row rests on the simulation: 'predicted' at most. check: port_check of the
    simulation; a mapping it does not keep leaves no prediction (the row says why)."""
    prediction, gain = "", None
    dropped = [] if check is None else [k for k in (linear, blocked) if k in check.index
                                        and not check.loc[k, "kept as prediction"]]
    if sims and linear in sims and blocked in sims and dropped:
        prediction = (f"none: the simulation of {' and '.join(dropped)} exceeds the bound of its links "
                      f"(port_check), so it is not kept as a prediction")
    elif sims and linear in sims and blocked in sims:
        t = {k: s.split.T_real / s.iterations / 1e6 for k, s in sims.items()}
        gain = 1 - t[blocked] / t[linear]
        best = min(t, key=t.get)
        prediction = (f"simulated, 384 ranks on 16 nodes, links shared per node: {t[linear]:.3f} ms per iteration linear "
                      f"vs {t[blocked]:.3f} ms blocked ({gain:+.0%}); fastest simulated case: {best} ({t[best]:.3f} ms)"
                      + ("" if best == blocked else ", not the blocked 2D mapping the seed calls 'by far the best'"))
    have = measured is not None and len(measured) and {"linear", "blocked"} <= set(measured["mapping"])
    if have and oversubscribed:
        return make_row(MAPPING_TIME.id, "not shown: more ranks than this machine's cores, so the measured times are "
                        "waiting for a core, not the link", "not shown",
                        "an oversubscribed run cannot show a link's cost; the mapping's messages are counted exactly "
                        "(mapping-messages) and its time is only simulated (the prediction column)",
                        list(runs) + list(measured["run"]), prediction=prediction)
    if have:
        ms = measured.assign(repetition=measured.get("repetition", 1))
        a, b, paired = _paired_rounds(ms, "ms per iteration", "blocked", "linear", by="mapping")
        cmp = phrases.compare(a, b, a_name="blocked", b_name="linear", quantity="measured time per iteration",
                              unit="ms", paired=paired)
        here = f"a core per rank: {cmp.sentence()}"
        runs = list(runs) + list(measured["run"])
        if cmp.beyond_spread and cmp.winner == "blocked":
            return make_row(MAPPING_TIME.id, here, "yes", "measured and decided: the blocked mapping is faster",
                            runs, beyond_spread=True, prediction=prediction)
        why = {"different": "measured and decided: the blocked mapping was slower here",
               "equivalent": "measured and decided: the two mappings take the same time here",
               "undecided": "the measured runs cannot decide between the two mappings"}[cmp.outcome]
        return make_row(MAPPING_TIME.id, here, "partly" if cmp.outcome == "undecided" else "no", why, runs,
                        prediction=prediction)
    if gain is None:
        return make_row(MAPPING_TIME.id, "-", "not shown",
                        "not measured here, and the simulation is not kept" if dropped else
                        "neither measured nor simulated here", runs, prediction=prediction)
    here = "not measured here; simulated only (see the prediction)"
    if gain >= 0.05:
        return make_row(MAPPING_TIME.id, here, "predicted",
                        "in the simulation, with a node's messages sharing its link, fewer inter-node messages make the "
                        "iteration shorter", runs, evidence="simulated", prediction=prediction)
    verdict = "partly" if gain > 0 else "no"
    return make_row(MAPPING_TIME.id, here, verdict, "the simulated link is not busy enough for the mapping to change the time much",
                    runs, evidence="simulated", prediction=prediction)


def mapping_messages(counts) -> Row:
    """From notebook 05b's measured mapping (measure_mapping): did the traced
    inter-node messages match the prediction, and did the blocked mapping send fewer? A message
    count has no run-to-run spread: traced counts equal to the grid's prediction are an exact test."""
    if counts is None or len(counts) == 0:
        return make_row(MAPPING_MESSAGES.id, "-", "not shown", "the mapping was not measured on virtual nodes here")
    per = counts.groupby("mapping")[["inter-node messages, predicted", "inter-node messages, traced"]].median()
    exact = bool((counts["inter-node messages, predicted"] == counts["inter-node messages, traced"]).all())
    placed = bool(counts["ranks where mapped"].all())
    lo, hi = per["inter-node messages, traced"].min(), per["inter-node messages, traced"].max()
    ratio = hi / lo if lo > 0 else float("inf")
    fewer = "blocked" in per.index and "linear" in per.index and \
        per.loc["blocked", "inter-node messages, traced"] < per.loc["linear", "inter-node messages, traced"]
    here = ("; ".join(f"{m}: {int(r['inter-node messages, traced'])} traced, {int(r['inter-node messages, predicted'])} "
                      f"predicted" for m, r in per.iterrows()) + f" ({ratio:.1f}x, counted in every run)")
    if exact and placed and fewer:
        return make_row(MAPPING_MESSAGES.id, here, "yes",
                        "an exact count: every trace holds exactly the inter-node messages the grid predicts, fewer with "
                        "the blocked mapping; the seed counts boundary lines between nodes (16 or 17 per node linear, "
                        "4 vertical + 6 horizontal blocked) on 16 nodes, this 2-node grid has fewer to cut",
                        counts["run"], beyond_spread=True)
    if placed and fewer:
        verdict, why = "partly", "the blocked mapping sent fewer inter-node messages, but not exactly the predicted number"
    else:
        verdict, why = "no", "the ranks did not land where mapped, or the blocked mapping did not send fewer messages"
    return make_row(MAPPING_MESSAGES.id, here, verdict, why, counts["run"])


# --- the lab's expected answers -------------------------------------------------------------------

def reference(packed) -> dict:
    """The lab's expected answers from the runs a student packed (packed:
    hpclab.grading.labdata.Packed, verified: roles pingpong and traced): the traced run's parts
    (seconds) on a model fitted to the student's own ping-pong, its ideal speedup, the mapping of
    an 8 x 8 grid on nodes of 4 that sends fewer inter-node messages, and the largest part after
    compute (every part too close to call accepted)."""
    # notebook 05's five parts: the model is fitted to the student's own ping-pong
    rows = packed.table("pingpong")[["bytes", "t_usec"]].to_dict("records")
    parts = split.split(load.load_run(packed.run_dir("traced"), cache=False),
                        model=pingpong_model(rows))
    counts = {name: mapping.internode_messages(8, 8, fn(8, 8, 4))
              for name, fn in (("linear", mapping.linear_mapping),
                               ("blocked", mapping.blocked_mapping))}
    best = min(counts, key=counts.get)
    # interpretation: the largest part after compute; the split cannot place the time the ranks
    # were switched out while computing (T_off_cpu), so parts closer than that are both accepted
    sizes = {"load imbalance": parts.T_load, "dependency": parts.T_depend, "transfer": parts.T_transfer,
             "rest": parts.T_rest}
    noise = float(parts.T_off_cpu) if parts.T_off_cpu > 0 else 0.0   # NaN or none: 0
    return {"T_load": parts.T_load * 1e-9, "T_depend": parts.T_depend * 1e-9,
            "T_transfer": parts.T_transfer * 1e-9, "T_rest": parts.T_rest * 1e-9,
            "ideal_speedup": parts.T_real / parts.T_ideal,
            "best_mapping": best, "best_internode": counts[best],
            "off_cpu": noise * 1e-9,
            "largest_part": accepted(sizes, {k: noise / 2 for k in sizes})}


LESSON = register(Lesson("imbalance", "Imbalance: where a parallel run's time goes, measured and simulated",
                         ("05-imbalance.ipynb", "05b-mapping-and-scale.ipynb"), lab="lab-imbalance",
                         claims=(GRID_2D_VS_1D, NONBLOCKING_DEPENDENCY, MAPPING_MESSAGES, MAPPING_TIME,
                                 IMBALANCE_SPLIT), reference=reference))
