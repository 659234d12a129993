"""Instruction counts of a multi-rank solver run, per rank and phase: POP's computational half.

POP's instruction scalability compares the useful instructions (those outside MPI) of a run at P
ranks with the reference run's. callgrind counts every instruction a rank executes, exactly and
repeatably, whatever else the machine does (and whether or not ranks share a core), so the
counts are a property of the program and the decomposition, not of this noisy VM. Each rank runs
under callgrind as a task of one Slurm job step (srun words from hpclab.jobs.templates.step_argv)
and writes callgrind.out.<rank>; callgrind_annotate turns each into functions, and
hpclab.tools.profilers.phase_of into the solver's phases. The useful instructions are the solve
loop's compute phases (red/black sweeps, residuum, halo copy): the MPI library (where a waiting
rank polls, so its count measures waiting, not work), start-up and the loader are left out.

Cycles, which IPC and frequency scalability need, come only from hardware counters read per
compute region; `cycles_status()` says why they are not available on a node.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from hpclab.core import commands
from hpclab.core.errors import HpclabError
from hpclab.jobs import templates
from hpclab.site import profile as site_mod
from hpclab.tools import profilers

USEFUL = profilers.LOOP_PHASES


@dataclass(frozen=True)
class InstructionCounts:
    """One counted run: ranks, grid n, iters, its folder, and per (rank, phase) instructions."""

    ranks: int
    n: int
    iters: int
    path: Path
    table: pd.DataFrame  # rank, phase, instructions

    @property
    def useful(self) -> float:
        """Instructions of the solve loop's compute phases, summed over ranks."""
        return float(self.table.loc[self.table["phase"].isin(USEFUL), "instructions"].sum())

    def per_rank(self) -> pd.Series:
        t = self.table[self.table["phase"].isin(USEFUL)]
        return t.groupby("rank")["instructions"].sum()


def count(n: int, iters: int, ranks: int, extra_args=(), experiment: str = "04-pop",
          binary: str | Path | None = None, timeout: float = 900.0) -> InstructionCounts:
    """Count the instructions of a `ranks`-rank solver run (grid n x n, `iters` sweeps) per rank
    and phase with callgrind, as one Slurm job step (ranks may share cores: counts do not
    depend on it). Raises HpclabError when valgrind is missing or the run fails."""
    st = profilers.valgrind_status()
    if not (st["installed"] and st["annotate"]):
        raise HpclabError("valgrind (with callgrind_annotate) is not installed",
                          "Debian: apt-get install valgrind (scripts/setup.sh does this)")
    if not isinstance(ranks, int) or isinstance(ranks, bool) or ranks < 1:
        raise HpclabError(f"ranks={ranks!r} is not a positive integer", "e.g. ranks=2")
    exe = Path(binary) if binary else profilers.profiling_binary()
    folder = profilers._new_folder(experiment)
    site = site_mod.load_site()
    cores = site.partition().cores_per_node
    argv = templates.step_argv(site, job_name="hpclab-counts", time="00:15:00", ntasks=ranks,
                               cpu_bind="cores" if ranks <= cores else "none")
    if ranks > cores:  # counting needs no core of its own: let the ranks share
        argv.insert(1, "--overcommit")
    argv += ["valgrind", "--tool=callgrind", "--callgrind-out-file=callgrind.out.%q{SLURM_PROCID}",
             str(exe), *profilers._solver_args(n, iters, extra_args)]
    profilers._run(folder, argv, templates.step_env(site), timeout, "callgrind")
    rows = []
    for r in range(ranks):
        out = folder / f"callgrind.out.{r}"
        if not out.is_file():
            raise HpclabError(f"rank {r} wrote no {out.name} (folder {folder})", "read the stderr file in the folder")
        res = commands.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", str(out)],
                           "annotate a rank's callgrind profile", timeout=120)
        if res is None or res.returncode != 0:
            raise HpclabError(f"callgrind_annotate could not read {out}", "is the file complete? count again")
        (folder / f"annotate-self.{r}.txt").write_text(res.stdout)
        rows.append(phase_counts(res.stdout).assign(rank=r))
    return InstructionCounts(ranks, n, iters, folder, pd.concat(rows, ignore_index=True)[["rank", "phase", "instructions"]])


def phase_counts(annotate_text: str) -> pd.DataFrame:
    """One rank's instructions per solver phase (phase, instructions), from callgrind_annotate's
    self counts (--inclusive=no)."""
    functions = profilers.parse_callgrind_annotate(annotate_text).rename(columns={"count": "self"})
    phases = profilers.solver_phases(functions)
    return pd.DataFrame({"phase": phases["phase"], "instructions": phases["self"].astype(float)})


def cycles_status() -> str:
    """Why cycles (for IPC and frequency scalability) are not counted here: '' when they could be."""
    st = profilers.perf_status()
    if not st["hardware_counters"]:
        return f"perf on this node: {st['detail']}; callgrind counts instructions, not cycles"
    return ("this node has hardware counters, but the course reads cycles only per compute region, "
            "which needs region markers (LIKWID or PAPI) the solver does not have yet")
