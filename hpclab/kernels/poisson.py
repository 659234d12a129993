"""Poisson solver: its arguments, its process-grid check, and its reports -> per-rank timers
as tidy rows (rank, phase, kind, seconds).

Each rank times its compute phases (copy, red, black, residuum sweeps) and its MPI phases (halo
exchange, allreduce of the residual); the JSON report holds them under results.per_rank. The
split compute vs MPI, and its spread over ranks, is what the "where does MPI time go" lesson
plots.
"""

from __future__ import annotations

from typing import Literal

import pandas as pd
from pydantic import Field, model_validator

from hpclab.kernels.contract import fail, need, results_of
from hpclab.kernels.registry import Kernel, KernelArgs, register


class PoissonArgs(KernelArgs):
    """poisson: n = global grid points per side; grid = process grid "PxQ" (P*Q = ntasks);
    exchange = halo exchange style (blocking: Send/Recv ordered by parity; sendrecv; nonblocking:
    Isend/Irecv/Waitall; naive: every rank sends up first, the 2014 code's chain); iters = sweeps;
    tol = stop when the residual falls below tol x the initial one; shape = "NXxNY" solves on a
    rectangle instead of the n x n square (one rank timing a decomposition's subdomain shape);
    heavy = F gives the first rank along x F times the rows of every other rank (a deliberate load
    imbalance; default 1, the even split)."""

    kernel: Literal["poisson"] = "poisson"
    n: int | None = Field(None, ge=2)
    shape: str | None = Field(None, pattern=r"^[1-9][0-9]*x[1-9][0-9]*$")
    grid: str | None = Field(None, pattern=r"^[1-9][0-9]*x[1-9][0-9]*$")
    exchange: Literal["blocking", "sendrecv", "nonblocking", "naive"] | None = None
    iters: int | None = Field(None, ge=1)
    tol: float | None = Field(None, gt=0)
    heavy: float | None = Field(None, ge=1, le=16)
    fuse: bool = False  # residuum inside the black sweep: one memory pass less, identical results

    @model_validator(mode="after")
    def _n_or_shape(self):
        if self.n is not None and self.shape is not None:
            raise ValueError(f"give either n (a square, got {self.n}) or shape (a rectangle, got {self.shape!r}), not both")
        return self


def check_spec(spec) -> None:
    """A process grid PxQ must have as many ranks as the job. spec: an hpclab.spec.model.Spec
    (reads ntasks, args). Raises ValueError."""
    if isinstance(spec.args, PoissonArgs) and spec.args.grid:
        p, q = (int(x) for x in spec.args.grid.split("x"))
        if p * q != spec.ntasks:
            raise ValueError(f"poisson grid {spec.args.grid} has {p * q} ranks but ntasks={spec.ntasks}")


COLUMNS = ["rank", "coord_x", "coord_y", "local_x", "local_y", "phase", "kind", "seconds",
           "rank_total"]
# n: points along x (per side on a square); shape: [NX, NY] (reports before --shape lack it:
# None there); exchange: blocking | sendrecv | nonblocking | naive (docs/kernel-contract.md).
# heavy: --heavy F (1 = the even split; reports before --heavy lack it: None there).
SUMMARY_KEYS = ["n", "shape", "grid", "exchange", "heavy", "iterations", "final_residual", "error_max",
                "wall_time", "lattice_updates_per_sec"]


def poisson_table(doc: dict, source: str = "result.json") -> pd.DataFrame:
    """Per-rank timers of a checked Poisson JSON report (from load_result).

    Returns a DataFrame with COLUMNS: one row per (rank, phase); kind is "compute" or "mpi";
    seconds is that rank's total time in the phase; rank_total the rank's whole solve time [s];
    coord_x/y its place in the process grid, local_x/y its subdomain size in grid points.
    .attrs["summary"] holds n, grid, exchange, iterations, residuals, wall_time [s], ...
    """
    res = doc["results"]
    summary = {k: res.get(k) for k in SUMMARY_KEYS}
    rows = []
    for k, entry in enumerate(need(res, "per_rank", "list", "results", source)):
        where = f"results.per_rank[{k}]"
        rank = need(entry, "rank", "int", where, source)
        coords = need(entry, "coords", "list", where, source)
        local = need(entry, "local", "list", where, source)
        total = need(entry, "total", "number", where, source)
        if len(coords) != 2 or len(local) != 2:
            raise fail(source, None, f"{where}: coords and local must have 2 entries",
                       "the file does not follow docs/kernel-contract.md")
        for kind in ("compute", "mpi"):
            phases = need(entry, kind, "dict", where, source)
            for phase, seconds in phases.items():
                if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
                    raise fail(source, None, f"{where}.{kind}.{phase} should be a number of "
                               f"seconds, found {seconds!r}", "the file does not follow the contract")
                rows.append({"rank": rank, "coord_x": coords[0], "coord_y": coords[1],
                             "local_x": local[0], "local_y": local[1], "phase": phase,
                             "kind": kind, "seconds": float(seconds), "rank_total": float(total)})
    if not rows:
        raise fail(source, None, "results.per_rank has no timers", "re-run the kernel")
    table = pd.DataFrame(rows, columns=COLUMNS)
    table.attrs["summary"] = summary
    return table


# ----------------------------------------------------------------------------------------------
# Accessors: the one way code above this floor reads a Poisson report's numbers
# ----------------------------------------------------------------------------------------------

def measures(doc: dict, source: str = "result.json") -> dict:
    """Everything a Poisson report measured (its results object): n, shape, grid, exchange,
    iterations, residual_history, final_residual, wall_time [s], lattice_updates_per_sec, fuse,
    per_rank (one dict per rank: rank, coords, local, compute and mpi {phase: s}, total [s]).
    Raises HpclabError when doc is no Poisson report or has no results object."""
    return results_of(doc, "poisson", source)


def wall_time(doc: dict, source: str = "result.json") -> float:
    """The solver's own time for the whole solve [s] (slowest rank).
    Raises HpclabError when the report does not give it."""
    return float(need(measures(doc, source), "wall_time", "number", "results", source))


def per_rank(doc: dict, source: str = "result.json") -> list[dict]:
    """The per-rank timers of a Poisson report: one dict per rank (rank, coords, local, compute
    and mpi {phase: seconds}, total [s]), in the report's order.
    Raises HpclabError when the report has no results.per_rank list."""
    return need(measures(doc, source), "per_rank", "list", "results", source)


def rank_compute(doc: dict, rank_index: int = 0, source: str = "result.json") -> dict[str, float]:
    """The compute timers {phase: seconds} (copy, red, black, residuum) of the rank_index-th
    entry of results.per_rank. Raises HpclabError when there is no such rank or timers."""
    ranks = per_rank(doc, source)
    if not 0 <= rank_index < len(ranks):
        raise fail(source, None, f"results.per_rank has {len(ranks)} entries, no entry {rank_index}",
                   "pass the result.json of a completed poisson run")
    return need(ranks[rank_index], "compute", "dict", f"results.per_rank[{rank_index}]", source)


def subdomain_shape(doc: dict, source: str = "result.json") -> tuple[int, int]:
    """The grid a run solved on, (NX, NY) points: its shape (--shape), or (n, n) for a square
    (reports before --shape give only n). Raises HpclabError when the report gives neither."""
    res = measures(doc, source)
    if res.get("shape"):
        return tuple(res["shape"])
    n = need(res, "n", "int", "results", source)
    return (n, n)


def run_table(doc: dict, source: str) -> tuple[pd.DataFrame, dict]:
    """A checked JSON report as (timer table, {"summary": n, grid, iterations, ...})."""
    table = poisson_table(doc, source=source)
    return table, {"summary": table.attrs.get("summary", {})}


KERNEL = register(Kernel(name="poisson", args=PoissonArgs, table=run_table, check=check_spec))
