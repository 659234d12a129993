"""The placement lesson (notebook 03, lab-placement): named cases, each a label and the spec fields
that produce it, and the STREAM specs that measure them.

Launcher bindings (srun --cpu-bind, mpirun --map-by/--bind-to), the hybrid MPI+OpenMP pitfall of
the 2018 placement study with its three fixes, and local against remote NUMA memory. The runs'
analysis is hpclab.analysis.placement, their figure hpclab.plots.figures.stream_bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hpclab.analysis.placement import FIX, FIX_YIELD, PITFALL, PITFALL_YIELD
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

BINDING_CASES = [
    Case("srun --cpu-bind=cores", {"binding": {"cpu_bind": "cores"}, "omp": _ONE_THREAD}, "each rank on its own core"),
    Case("srun --cpu-bind=none", {"binding": {"cpu_bind": "none"}, "omp": _ONE_THREAD},
         "ranks may run anywhere in the allocation; the Linux scheduler decides"),
    Case("srun --cpu-bind=map_cpu:0,0", {"binding": {"cpu_bind": "map_cpu:0,0"}, "omp": _ONE_THREAD},
         "a deliberate mistake: both ranks pinned to CPU 0"),
    Case("mpirun --map-by core --bind-to core", {"launcher": "mpirun", "omp": _ONE_THREAD,
                                                 "binding": {"map_by": "core", "bind_to": "core"}},
         "Open MPI's own launcher inside the allocation, one core per rank"),
    Case("mpirun --bind-to none", {"launcher": "mpirun", "omp": _ONE_THREAD,
                                   "binding": {"map_by": "core", "bind_to": "none"}},
         "Open MPI maps ranks but does not bind them"),
    Case("srun --cpu-bind=none, OMP_NUM_THREADS unset", {"binding": {"cpu_bind": "none"}},
         "each rank starts one OpenMP thread per CPU it may use: more threads than cores"),
]

PITFALL_CASES = [
    Case(PITFALL, {"binding": {"cpu_bind": "none"}, "omp": _BOUND_THREADS},
         "each rank's OpenMP runtime sees the same CPU mask and binds its thread to the first core"),
    Case(FIX, {"binding": {"cpu_bind": "cores"}, "omp": _BOUND_THREADS},
         "disjoint masks per rank: each runtime binds inside its own core"),
    Case("fix 2: one rank, two threads", {"binding": {"cpu_bind": "cores"}, "cpus_per_task": 2,
                                          "omp": {**_BOUND_THREADS, "num_threads": 2}},
         "a single OpenMP runtime places all threads itself", ntasks=1),
    Case("fix 3: OpenMP does not bind (OMP_PROC_BIND=false)", {"binding": {"cpu_bind": "none"},
                                                               "omp": {"num_threads": 1, "proc_bind": "false"}},
         "threads float; the Linux scheduler spreads them"),
]

# The pitfall's loss has two parts. Two ranks on one core take turns: one core does the work of
# two (at most half the bandwidth is left). And each rank that finishes first waits in
# MPI_Barrier, which Open MPI busy-polls: the waiting rank keeps the core until the scheduler
# preempts it, while the other rank, which still has work, cannot run. mpi_yield_when_idle=1 makes
# the polling rank call sched_yield, so the comparison below separates the two parts.
_YIELD = {"mpi_yield_when_idle": "1"}

YIELD_CASES = [
    Case(PITFALL_YIELD, {"binding": {"cpu_bind": "none"}, "omp": _BOUND_THREADS, "mca": _YIELD},
         "the same shared core, but a rank waiting in MPI gives the core to the other one"),
    Case(FIX_YIELD, {"binding": {"cpu_bind": "cores"}, "omp": _BOUND_THREADS, "mca": _YIELD},
         "disjoint cores; yielding should change nothing here"),
]


def specs(cases: list[Case], size: int, reps: int = 20, repetitions: int = 3, experiment: str = "placement") -> list:
    """STREAM specs for the cases (each repeated `repetitions` times as separate jobs)."""
    out = []
    for c in cases:
        out.append(spec.make_spec(kernel="stream", ntasks=c.ntasks, args={"size": size, "reps": reps},
                                  label=c.label, repetitions=repetitions, experiment=experiment,
                                  **c.fields, **c.extra))
    return out


def numa_cases(topo) -> list[Case]:
    """Local against remote memory on a node with several NUMA domains: one rank bound to the
    cores of NUMA node 0, its memory bound to node 0 (local) or to the next node (remote).
    Returns no cases on a single-NUMA node, where there is nothing to compare."""
    nodes = sorted(int(n) for n in topo.numa_nodes["numa"]) if len(topo.numa_nodes) else []
    if len(nodes) < 2:
        return []
    local, remote = nodes[0], nodes[1]
    return [
        Case(f"memory on NUMA {local} (local)", {"binding": {"cpu_bind": "none"}, "omp": _ONE_THREAD,
                                                 "numactl": {"cpunodebind": str(local), "membind": str(local)}},
             "threads and memory on the same NUMA node", ntasks=1),
        Case(f"memory on NUMA {remote} (remote)", {"binding": {"cpu_bind": "none"}, "omp": _ONE_THREAD,
                                                   "numactl": {"cpunodebind": str(local), "membind": str(remote)}},
             "threads on one NUMA node, memory on another", ntasks=1),
    ]
