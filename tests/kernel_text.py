"""Text parsers of the STREAM and Poisson reports, for the tests only.

hpclab reads these kernels' runs from their JSON report (hpclab.kernels.stream / poisson). The
text tables are the same numbers for a person; the tests parse them here to check that text and
JSON agree and that a cut or damaged text fails with its file and line.
"""

from __future__ import annotations

import pandas as pd

from hpclab.kernels import stream
from hpclab.kernels.contract import fail, parse_report_text, report_attrs, typed
from hpclab.kernels.poisson import COLUMNS as POISSON_COLUMNS
from hpclab.kernels.stream import ALL_FUNCTIONS, FUNCTIONS


def _numbers(fields: list[str], source: str, lineno: int, what: str) -> list[float]:
    try:
        return [float(f) for f in fields]
    except ValueError:
        raise fail(source, lineno, f"{what}: expected numbers, found {' '.join(fields)[:80]!r}",
                   "the report may be damaged; re-run") from None


def parse_stream_text(text: str, source: str = "stdout") -> pd.DataFrame:
    """Parse STREAM's stdout alone: the Function / Best Rate table and the per-rank table.

    Returns the per-rank table with stream.COLUMNS (one row per rank and function; mb_s is that
    rank's best rate [MB/s, 10^6 B/s]; host, cpu, allowed, threads, thread_cpus from the host[] and
    thread[] lines). .attrs["kernels"] holds the aggregate table as records (function,
    best_mb_s, avg_time, min_time, max_time [s]), plus the report's config, validation,
    placement (records), arguments (see contract.report_attrs).
    Raises HpclabError naming file and line when a table is missing, garbled or cut short.
    """
    report = parse_report_text(text, source=source, kernel="stream")
    krows, rates, state, header_at = [], [], "before", None
    for lineno, line in report.body:
        fields = line.replace(":", " ").split()
        if not fields:
            continue
        if state == "before":
            if fields[0] == "Function" and "Best Rate" in line:
                state, header_at = "kernels", lineno
            continue  # STREAM-style notes before the table are not data
        if state == "kernels" and fields[0] in ALL_FUNCTIONS:
            if len(fields) != 5:
                raise fail(source, lineno, f"{fields[0]}: expected rate, avg, min and max time, "
                           f"found {line.strip()[:80]!r}", "the report may be damaged; re-run")
            rate, avg, tmin, tmax = _numbers(fields[1:], source, lineno, fields[0])
            krows.append({"function": fields[0], "best_mb_s": rate, "avg_time": avg,
                          "min_time": tmin, "max_time": tmax})
            continue
        if state == "kernels" and (line.startswith("Rates count the bytes") or
                                   line.startswith("with write-allocate")):
            continue  # the byte-count notes (COUNTED_BYTES, MOVED_BYTES say the same)
        if state == "kernels" and fields[0] == "rank":
            order = [f for f in fields[1:] if f in ALL_FUNCTIONS]
            if not set(FUNCTIONS) <= set(order):
                raise fail(source, lineno, f"per-rank header should name {', '.join(FUNCTIONS)}",
                           "the report may be damaged; re-run")
            state = "ranks"
            continue
        if state == "ranks" and fields[0].isdigit():
            values = _numbers(fields[1:1 + len(order)], source, lineno, f"rank {fields[0]}")
            if len(values) != len(order):
                raise fail(source, lineno, f"rank {fields[0]}: expected {len(order)} rates",
                           "the report may be damaged; re-run")
            rates.append((int(fields[0]), dict(zip(order, values))))
            continue
        if state == "ranks" and fields[0] == "sum":
            state = "done"
            continue
        if state == "done":
            continue
        raise fail(source, lineno, f"unexpected line in the STREAM tables: {line.strip()[:80]!r}",
                   "the report may be damaged; re-run")
    end = report.last_line
    if header_at is None:
        raise fail(source, end, "no 'Function  Best Rate MB/s ...' table (truncated?)",
                   "the job probably died after validating; read its stderr")
    missing = [f for f in FUNCTIONS if f not in {r["function"] for r in krows}]
    # (Update and Sum are optional: reports of kernel builds before them have four functions)
    if missing:
        raise fail(source, end, f"STREAM table lacks {', '.join(missing)} (truncated?)",
                   "re-run the kernel")
    ranks = report.config.get("ranks")
    if ranks == 1 and state == "kernels" and not rates:
        # one rank: the kernel prints no per-rank table; its rates are the table's best rates
        rates = [(0, {r["function"]: r["best_mb_s"] for r in krows})]
        state = "done"
    if state != "done" or (isinstance(ranks, int) and len(rates) != ranks):
        raise fail(source, end, f"per-rank table has {len(rates)} of {ranks} ranks or no 'sum' "
                   "line (truncated?)", "re-run the kernel")
    table = stream.join_placement(rates, report.placement, int(report.config.get("threads") or 1))
    table.attrs.update(report_attrs(report))
    table.attrs["kernels"] = krows
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
                           "update TEXT_PHASES in tests/kernel_text.py for this kernel version")
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
    table = pd.DataFrame(rows, columns=POISSON_COLUMNS)
    table.attrs.update(report_attrs(report))
    table.attrs["summary"] = summary
    table.attrs["residuals"] = residuals
    return table
