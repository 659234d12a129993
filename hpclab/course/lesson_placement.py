"""The placement lesson (notebook 03, lab-placement): named cases, each a label and the spec fields
that produce it, and the STREAM specs that measure them.

Launcher bindings (srun --cpu-bind, mpirun --map-by/--bind-to), the hybrid MPI+OpenMP pitfall of
the 2018 placement study with its three fixes, and local against remote NUMA memory. The runs'
analysis is hpclab.analysis.placement, their figure hpclab.plots.figures.stream_bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hpclab.analysis.placement import FIX, FIX_YIELD, PITFALL, PITFALL_YIELD
from hpclab.core.errors import HpclabError
from hpclab.course import sizing
from hpclab.spec import model as spec


@dataclass(frozen=True)
class Case:
    label: str
    fields: dict
    why: str
    ntasks: int = 2
    extra: dict = field(default_factory=dict)

_BOUND_THREADS = {"num_threads": 1, "proc_bind": "true", "places": "cores"}

_ONE_THREAD = {"num_threads": 1}

def binding_cases(ranks: int = 2) -> list[Case]:
    """The launcher-binding cases for `ranks` ranks of one thread each (the last case leaves
    OMP_NUM_THREADS unset). The deliberate mistake pins every rank to CPU 0."""
    zeros = ",".join("0" * ranks)
    return [
        Case("srun --cpu-bind=cores", {"binding": {"cpu_bind": "cores"}, "omp": _ONE_THREAD}, "each rank on its own core",
             ntasks=ranks),
        Case("srun --cpu-bind=none", {"binding": {"cpu_bind": "none"}, "omp": _ONE_THREAD},
             "ranks may run anywhere in the allocation; the Linux scheduler decides", ntasks=ranks),
        Case(f"srun --cpu-bind=map_cpu:{zeros}", {"binding": {"cpu_bind": f"map_cpu:{zeros}"}, "omp": _ONE_THREAD},
             "a deliberate mistake: every rank pinned to CPU 0", ntasks=ranks),
        Case("mpirun --map-by core --bind-to core", {"launcher": "mpirun", "omp": _ONE_THREAD,
                                                     "binding": {"map_by": "core", "bind_to": "core"}},
             "Open MPI's own launcher inside the allocation, one core per rank", ntasks=ranks),
        Case("mpirun --bind-to none", {"launcher": "mpirun", "omp": _ONE_THREAD,
                                       "binding": {"map_by": "core", "bind_to": "none"}},
             "Open MPI maps ranks but does not bind them", ntasks=ranks),
        Case("srun --cpu-bind=none, OMP_NUM_THREADS unset", {"binding": {"cpu_bind": "none"}},
             "each rank starts one OpenMP thread per CPU it may use: more threads than cores", ntasks=ranks),
    ]


def pitfall_cases(ranks: int = 2) -> list[Case]:
    """The hybrid pitfall and its three fixes for `ranks` ranks of one bound OpenMP thread each
    (fix 2: one rank with `ranks` threads)."""
    return [
        Case(PITFALL, {"binding": {"cpu_bind": "none"}, "omp": _BOUND_THREADS},
             "each rank's OpenMP runtime sees the same CPU mask and binds its thread to the first core", ntasks=ranks),
        Case(FIX, {"binding": {"cpu_bind": "cores"}, "omp": _BOUND_THREADS},
             "disjoint masks per rank: each runtime binds inside its own core", ntasks=ranks),
        Case(f"fix 2: one rank, {ranks} threads", {"binding": {"cpu_bind": "cores"}, "cpus_per_task": ranks,
                                                  "omp": {**_BOUND_THREADS, "num_threads": ranks}},
             "a single OpenMP runtime places all threads itself", ntasks=1),
        Case("fix 3: OpenMP does not bind (OMP_PROC_BIND=false)", {"binding": {"cpu_bind": "none"},
                                                                   "omp": {"num_threads": 1, "proc_bind": "false"}},
             "threads float; the Linux scheduler spreads them", ntasks=ranks),
    ]


# The pitfall's loss has two parts. Ranks on one core take turns: one core does the work of
# several. And each rank that finishes first waits in MPI_Barrier, which Open MPI busy-polls: the
# waiting rank keeps the core until the scheduler preempts it, while a rank that still has work
# cannot run. mpi_yield_when_idle=1 makes the polling rank call sched_yield, so the comparison of
# the four cases separates the two parts. Open MPI turns yielding on by itself only when its own
# launcher knows a node is oversubscribed (more ranks than slots); here the ranks do not exceed
# the cores, it is the OpenMP binding that stacks them, so no launcher can tell.
_YIELD = {"mpi_yield_when_idle": "1"}


def yield_cases(ranks: int = 2) -> list[Case]:
    """The pitfall and fix 1 again, with Open MPI yielding the core while it waits."""
    return [
        Case(PITFALL_YIELD, {"binding": {"cpu_bind": "none"}, "omp": _BOUND_THREADS, "mca": _YIELD},
             "the same shared core, but a rank waiting in MPI gives the core to the other one", ntasks=ranks),
        Case(FIX_YIELD, {"binding": {"cpu_bind": "cores"}, "omp": _BOUND_THREADS, "mca": _YIELD},
             "disjoint cores; yielding should change nothing here", ntasks=ranks),
    ]


# The two-rank lists (the lab's and the tests'; the notebook takes its rank count from the plan).
BINDING_CASES = binding_cases(2)
PITFALL_CASES = pitfall_cases(2)
YIELD_CASES = yield_cases(2)


def specs(cases: list[Case], size: int | None = None, reps: int = 20, repetitions: int = 3,
          experiment: str = "placement", node_size: int | None = None) -> list:
    """STREAM specs for the cases (each repeated `repetitions` times as separate jobs).

    size: doubles per array of each rank; or node_size: doubles per array of the whole job, split
    over each case's ranks (so a one-rank case and a two-rank case stream the same arrays in all,
    which is what a size rule about the node's last-level cache needs)."""
    if (size is None) == (node_size is None):
        raise HpclabError("give either size (per rank) or node_size (per job)", "e.g. node_size=plan.stream_elements")
    out = []
    for c in cases:
        n = size if size is not None else max(1000, -(-node_size // c.ntasks // 1000) * 1000)
        out.append(spec.make_spec(kernel="stream", ntasks=c.ntasks, args={"size": n, "reps": reps},
                                  label=c.label, repetitions=repetitions, experiment=experiment,
                                  **c.fields, **c.extra))
    return out


REGIMES = {"memory": "memory-resident: the node's arrays are at least 4x its last-level cache, so every "
                     "repetition streams from memory (STREAM's rule)",
           "cache": "in cache: the node's arrays fill at most a quarter of its last-level cache, so the "
                    "cores, not the memory, set the pace; each repetition is short"}


def regimes(plan: sizing.LessonPlan, ranks: int) -> "pd.DataFrame":
    """The two STREAM regimes of the lesson on this node, named for what they measure: doubles
    per array for the job (node_size) and per rank, one rank's three arrays in MB, the job's arrays
    as a multiple of the last-level cache, and what the regime is."""
    import pandas as pd  # costly; only the notebook's table needs it

    rows = []
    for name, memory in (("memory", True), ("cache", False)):
        node = plan.stream_elements if memory else plan.cache_elements
        per_rank = plan.stream_per_rank(ranks, memory)
        llc = plan.llc_bytes
        rows.append({"regime": name, "node_size": node, "per_rank": per_rank,
                     "rank_arrays_mb": plan.stream_bytes(ranks, memory) / 1e6,
                     "arrays_vs_llc": (3 * 8 * per_rank * ranks / llc) if llc else float("nan"),
                     "what": REGIMES[name] if memory is False or plan.stream_memory_resident
                     else "partly cached: memory cannot hold arrays of 4x the last-level cache"})
    return pd.DataFrame(rows).set_index("regime")


def numa_cases(node) -> list[Case]:
    """Local against remote memory on a node with several NUMA domains: one rank bound to the
    cores of a NUMA node, its memory bound to that node (local) or to another one (remote).
    node: a LessonPlan (hpclab.course.sizing.plan) or an hwloc Topology. Returns no cases on a
    single-NUMA node, where there is nothing to compare."""
    plan = node if isinstance(node, sizing.LessonPlan) else sizing.plan(node)
    if not plan.numa_measurable:
        return []
    local, remote = plan.numa_local, plan.numa_remote
    return [
        Case(f"memory on NUMA {local} (local)", {"binding": {"cpu_bind": "none"}, "omp": _ONE_THREAD,
                                                 "numactl": {"cpunodebind": str(local), "membind": str(local)}},
             "threads and memory on the same NUMA node", ntasks=1),
        Case(f"memory on NUMA {remote} (remote)", {"binding": {"cpu_bind": "none"}, "omp": _ONE_THREAD,
                                                   "numactl": {"cpunodebind": str(local), "membind": str(remote)}},
             "threads on one NUMA node, memory on another", ntasks=1),
    ]
