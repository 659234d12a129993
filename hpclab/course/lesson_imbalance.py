"""The imbalance lessons (notebooks 05 and 05b): which traced runs to make on this cluster, and the
experiments that make them.

The analysis of the runs is hpclab.analysis.imbalance, the figures hpclab.plots.imbalance and
hpclab.plots.trace. Here:

- `site_layout`, `cluster_slots`, `physical_cores`, `oversubscription`: what this cluster offers;
- `configurations(slots)`, `dependency_configurations(...)`: which process grids and exchange
  styles fit on it;
- `poisson_specs(...)`, `pingpong_specs(...)`: the traced Poisson runs and the pingpong runs the
  network model is fitted to;
- `subdomain_specs(...)`, `measure_subdomains(...)`: single-rank runs of each simulated case's
  subdomain shape, as real Slurm jobs;
- `mapping_specs(...)`, `measure_mapping(...)`: the linear against a blocked rank-to-node
  mapping, traced on virtual nodes;
- `node_plan`, `dedicated_setup(...)`, `dedicated_specs(...)`, `measure_dedicated(...)`,
  `dedicated_model(...)`: the split measured with a core per rank, on the node's own cores or on
  one-core virtual nodes (hpclab.course.sizing decides which).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import pandas as pd

from hpclab.analysis.imbalance import (FIT_MAX_BYTES, SEED_CASES, mapping_counts, mapping_layouts,
                                       subdomain_shapes, subdomain_table)
from hpclab.core import paths
from hpclab.core.errors import HpclabError
from hpclab.jobs import experiment as exp
from hpclab.site import multinode
from hpclab.site import profile as site_profile
from hpclab.spec import model as spec
from hpclab.trace import mapping

EXPERIMENT = "05-imbalance"


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
                   experiment: str = EXPERIMENT) -> dict:
    """Pingpong specs for the model's two links: 'intra' (2 ranks on one node, if a node has 2
    CPUs) and 'inter' (one rank on each of 2 nodes, if there are 2 nodes); None where the
    cluster cannot place them."""
    base = dict(kernel="pingpong", ntasks=2, args={"max_bytes": max_bytes}, experiment=experiment)
    return {"intra": spec.make_spec(**base, nodes=1, label="model fit: one node") if cores_per_node >= 2 else None,
            "inter": spec.make_spec(**base, nodes=2, ntasks_per_node=1, label="model fit: two nodes")
            if nodes >= 2 else None}


def oversubscription(ntasks: int, cores: int | None = None) -> str:
    """One sentence: does a job of ntasks ranks oversubscribe this machine's cores?"""
    cores = cores or physical_cores()
    if ntasks > cores:
        return (f"{ntasks} ranks share {cores} core(s): the run is oversubscribed "
                f"({ntasks / cores:.1f} ranks per core).")
    return f"{ntasks} ranks on {cores} core(s): one core or more per rank, no oversubscription."


SUBDOMAIN_EXPERIMENT = "05-subdomains"


# Lattice updates per single-rank run: about a second of compute (a few ns per point and sweep).
UPDATES_PER_RUN = 2e8


def subdomain_specs(shapes: pd.DataFrame, *, iters: int | None = None, repetitions: int = 3,
                    experiment: str = SUBDOMAIN_EXPERIMENT) -> list:
    """Single-rank Poisson specs, one per distinct local shape of subdomain_shapes (cases with
    the same shape share it), each run `repetitions` times. iters: sweeps per run (default:
    about UPDATES_PER_RUN lattice updates, i.e. a second or so of compute). Labels are
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
                       keep: str = "row_length", iters: int | None = None, repetitions: int = 3, progress: bool = True,
                       timeout: float = 900, experiment: str = SUBDOMAIN_EXPERIMENT) -> pd.DataFrame:
    """Run each case's subdomain shape (subdomain_shapes(cases, n=, scale=, keep=): the seed's
    local grid, scaled to this machine's cache) on one rank as real Slurm jobs of the poisson kernel (--shape) and return
    subdomain_table: per case and run, the compute rate in ns per point of each phase, with the
    run ids. This is what makes the 1x384 strip's short rows cost what they cost here."""
    shapes = subdomain_shapes(cases, n=n, scale=scale, keep=keep)
    runs = exp.run(subdomain_specs(shapes, iters=iters, repetitions=repetitions, experiment=experiment),
                   progress=progress, timeout=timeout)
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
                  "hpclab.trace.mapping.slurm_hostfile and run the specs of hpclab.course.lesson_imbalance.mapping_specs inside it.")
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
    (1 Gb/s by default: a network whose transfer time is of the order of the compute), one rank
    each. eager_shm, eager_tcp: the eager limits (bytes) of shared memory and TCP
    (hpclab.site.ompi.eager_limit). rows: rows of each light rank (default 20 between nodes, 8
    inside a node, where a message costs far less). Raises HpclabError for heavy < 1."""
    if heavy < 1:
        raise HpclabError(f"heavy = {heavy}: the first rank's share of rows must be at least 1", "use 1 (even) or more")
    if plan.imbalance_dedicated:
        where, ranks, eager, link_used = "node", plan.imbalance_ranks, eager_shm, ""
        rows = rows or 8
        case = (f"this node has {plan.cores} cores: {ranks} ranks get a core each on the node itself, and the halos "
                f"travel through shared memory")
    elif plan.vnodes >= 2:
        where, ranks, eager, link_used = "vnodes", plan.vnodes, eager_tcp, link
        rows = rows or 20
        case = (f"this node has {plan.cores} cores, fewer than the lesson's {plan.imbalance_ranks} ranks: the split "
                f"with a core per rank is measured on {ranks} virtual nodes of one core each, one rank per node, "
                f"joined by a {link} link")
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


def measure_dedicated(d: Dedicated, *, iters: int, repetitions: int, progress: bool = True,
                      timeout: float = 900) -> tuple[object, list]:
    """Run dedicated_specs: on virtual nodes (hpclab.site.multinode; the single-node cluster is
    back afterwards) or on the node. Returns (the pingpong run, the traced Poisson runs)."""
    specs = dedicated_specs(d, iters=iters, repetitions=repetitions)
    if d.where == "vnodes":
        with multinode.virtual_nodes(d.ranks, link=d.link, cpus_per_node=1):
            runs = exp.run_again_if_startup_crashed(specs, timeout=timeout, progress=progress)
    else:
        runs = exp.run(specs, progress=progress, timeout=timeout)
    fit = specs[0].label  # the pingpong comes first (dedicated_specs)
    return next(r for r in runs if r.spec.label == fit), [r for r in runs if r.spec.label != fit]


def dedicated_model(d: Dedicated, pingpong, *, eager_shm: int, eager_tcp: int):
    """The network model of the dedicated-core runs, fitted to their pingpong (between the two
    nodes, or inside the node) up to 4x the halo message: (model, table of where each link and
    the inter-node eager limit come from)."""
    from hpclab.analysis.imbalance import inter_eager_limit, link_rows, pingpong_model

    pingpongs = {"intra": None, "inter": pingpong} if d.where == "vnodes" else {"intra": pingpong, "inter": None}
    intra, inter, sources = link_rows(pingpongs)
    inter_eager, why = inter_eager_limit(sources, eager_tcp)
    model = pingpong_model(intra, inter_rows=inter, eager=eager_shm, inter_eager=inter_eager,
                           max_bytes=4 * d.message_bytes, name="fitted (dedicated cores)")
    sources = sources.assign(eager_limit_from=["btl shared memory eager limit (ompi_info)", why])
    return model, sources
