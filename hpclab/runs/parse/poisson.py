"""Poisson solver reports -> per-rank timers as tidy rows (rank, phase, kind, seconds).

Each rank times its compute phases (copy, red, black, residuum sweeps) and its MPI phases (halo
exchange, allreduce of the residual); the JSON report holds them under results.per_rank. The
split compute vs MPI, and its spread over ranks, is what the "where does MPI time go" lesson
plots.
"""

from __future__ import annotations

import pandas as pd

from hpclab.runs.parse.report import need, parse_report_text, report_attrs
from hpclab.runs.parse.source import fail, typed

COLUMNS = ["rank", "coord_x", "coord_y", "local_x", "local_y", "phase", "kind", "seconds",
           "rank_total"]
# n: points along x (per side on a square); shape: [NX, NY] (reports before --shape lack it:
# None there); exchange: blocking | sendrecv | nonblocking | naive (docs/kernel-contract.md).
SUMMARY_KEYS = ["n", "shape", "grid", "exchange", "iterations", "final_residual", "error_max",
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


# Text timer columns: header name -> (phase name as in the JSON report, kind).
TEXT_PHASES = {"copy": ("copy", "compute"), "red": ("red", "compute"),
               "black": ("black", "compute"), "resid": ("residuum", "compute"),
               "halo": ("halo", "mpi"), "allred": ("allreduce", "mpi")}


def parse_poisson_text(text: str, source: str = "stdout") -> pd.DataFrame:
    """Parse the Poisson solver's stdout alone: summary lines, residual table, per-rank timers.

    Returns the timer table with COLUMNS (as poisson_table; seconds are rounded to the 0.1 ms
    the text prints). .attrs: "summary" (iterations, converged, final_residual, error_max,
    wall_time [s], lattice_updates_per_sec, ...), "residuals" (records iteration, residual: the
    sampled history the text prints), and the report's config, validation, placement, ...
    Raises HpclabError naming file and line when a section is missing, garbled or cut short.
    """
    report = parse_report_text(text, source=source, kernel="poisson")
    summary: dict = {}
    residuals, rows = [], []
    state, phases = "summary", []
    for lineno, line in report.body:
        fields = line.split()
        if not fields:
            continue
        if state == "summary" and len(fields) >= 3 and fields[1] == "=":
            key, value = fields[0], " ".join(fields[2:])
            if key == "iterations":
                summary["iterations"] = int(fields[2])
                summary["converged"] = "(converged)" in value
            else:
                summary[key] = typed(value.removesuffix(" s"))
            continue
        if fields == ["iteration", "residual"]:
            state = "residuals"
            continue
        if state == "residuals" and len(fields) == 2 and fields[0].isdigit():
            try:
                residuals.append({"iteration": int(fields[0]), "residual": float(fields[1])})
            except ValueError:
                raise fail(source, lineno, f"bad residual line {line.strip()!r}",
                           "the report may be damaged; re-run") from None
            continue
        if fields[:3] == ["rank", "coords", "local"]:
            names = [f.removesuffix("[s]") for f in fields[3:]]
            if names[-1:] != ["total"]:
                raise fail(source, lineno, "timer header should end with total[s]",
                           "the report may be damaged; re-run")
            unknown = [n for n in names[:-1] if n not in TEXT_PHASES]
            if unknown:
                raise fail(source, lineno, f"unknown timer column(s) {', '.join(unknown)}",
                           "update hpclab.runs.parse.poisson.TEXT_PHASES for this kernel version")
            phases, state = names[:-1], "ranks"
            continue
        if state == "ranks":
            try:
                if len(fields) != 3 + len(phases) + 1:
                    raise ValueError
                rank = int(fields[0])
                cx, cy = (int(v) for v in fields[1].split(","))
                lx, ly = (int(v) for v in fields[2].split("x"))
                values = [float(v) for v in fields[3:]]
            except ValueError:
                raise fail(source, lineno, f"bad timer line {line.strip()[:80]!r} (expected rank, "
                           f"coords, local and {len(phases) + 1} times)",
                           "the report may be damaged; re-run") from None
            for name, seconds in zip(phases, values):
                phase, kind = TEXT_PHASES[name]
                rows.append({"rank": rank, "coord_x": cx, "coord_y": cy, "local_x": lx,
                             "local_y": ly, "phase": phase, "kind": kind, "seconds": seconds,
                             "rank_total": values[-1]})
            continue
        raise fail(source, lineno, f"unexpected line {line.strip()[:80]!r}",
                   "the report may be damaged; re-run")
    end = report.last_line
    ranks = report.config.get("ranks")
    got = len({r["rank"] for r in rows})
    if not rows or (isinstance(ranks, int) and got != ranks):
        raise fail(source, end, f"timer table has {got} of {ranks} ranks (truncated?)",
                   "the job probably died before printing its timers; read its stderr")
    table = pd.DataFrame(rows, columns=COLUMNS)
    table.attrs.update(report_attrs(report))
    table.attrs["summary"] = summary
    table.attrs["residuals"] = residuals
    return table
