"""Placement experiments: where ranks and threads land, and what memory bandwidth that costs.

Named cases (a label and the spec fields that produce it) for the bindings notebook and lab:
launcher bindings (srun --cpu-bind, mpirun --map-by/--bind-to) and the hybrid MPI+OpenMP pitfall
of the 2018 placement study with its three fixes. `summary()` reduces STREAM runs to one row per
case: the whole job's bandwidth (min/median/max over repetitions), the CPUs each rank ran on, and
whether ranks ended up sharing a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd


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
    Case("pitfall: ranks unbound, OpenMP binds", {"binding": {"cpu_bind": "none"}, "omp": _BOUND_THREADS},
         "each rank's OpenMP runtime sees the same CPU mask and binds its thread to the first core"),
    Case("fix 1: bind the ranks (--cpu-bind=cores)", {"binding": {"cpu_bind": "cores"}, "omp": _BOUND_THREADS},
         "disjoint masks per rank: each runtime binds inside its own core"),
    Case("fix 2: one rank, two threads", {"binding": {"cpu_bind": "cores"}, "cpus_per_task": 2,
                                          "omp": {**_BOUND_THREADS, "num_threads": 2}},
         "a single OpenMP runtime places all threads itself", ntasks=1),
    Case("fix 3: OpenMP does not bind (OMP_PROC_BIND=false)", {"binding": {"cpu_bind": "none"},
                                                               "omp": {"num_threads": 1, "proc_bind": "false"}},
         "threads float; the Linux scheduler spreads them"),
]


def specs(cases: list[Case], size: int, reps: int = 20, repetitions: int = 3, experiment: str = "placement") -> list:
    """STREAM specs for the cases (each repeated `repetitions` times as separate jobs)."""
    from hpclab import spec

    out = []
    for c in cases:
        out.append(spec.make_spec(kernel="stream", ntasks=c.ntasks, args={"size": size, "reps": reps},
                                  label=c.label, repetitions=repetitions, experiment=experiment,
                                  **c.fields, **c.extra))
    return out


def job_rates(runs, function: str = "Triad") -> pd.DataFrame:
    """One row per run: label, run_id, the whole job's best rate (MB/s, all ranks together, timed
    until the slowest rank finished), and where each rank ran (CPU seen by the rank, allowed set)."""
    rows = []
    for run in runs:
        result = run.result()
        rate = result["results"]["kernels"][function]["best_mb_s"]
        cpus = {p["rank"]: sorted({t["cpu"] for t in p.get("threads", [])} or {p["cpu"]}) for p in result["placement"]}
        allowed = {p["rank"]: p["allowed"] for p in result["placement"]}
        used = [c for cs in cpus.values() for c in cs]
        rows.append({"label": run.spec.label, "run_id": run.run_id, "job_mb_s": rate,
                     "cpus_used": cpus, "allowed": allowed, "shared_cpu": len(used) != len(set(used))})
    return pd.DataFrame(rows)


def summary(rates: pd.DataFrame) -> pd.DataFrame:
    """Per case: runs, whole-job bandwidth min/median/max (MB/s), and whether any run had ranks
    or threads sharing a CPU."""
    agg = rates.groupby("label", sort=False).agg(
        runs=("run_id", "count"), job_mb_s_min=("job_mb_s", "min"), job_mb_s_median=("job_mb_s", "median"),
        job_mb_s_max=("job_mb_s", "max"), shared_cpu=("shared_cpu", "any"),
        cpus_used=("cpus_used", lambda s: s.iloc[0]))
    return agg


def lost_fraction(summary_table: pd.DataFrame, bad: str, good: str) -> float:
    """Fraction of the good case's median bandwidth that the bad case loses (0.25 = 25 % lost)."""
    return 1.0 - summary_table.loc[bad, "job_mb_s_median"] / summary_table.loc[good, "job_mb_s_median"]


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
