"""STREAM reports -> one row per (rank, function) with where that rank and its threads ran.

The text report ends with STREAM's own table (`Function Best Rate MB/s Avg time Min time Max
time`, then one line each for Copy, Scale, Add, Triad; a colon after the name, as the original
STREAM prints, is accepted) and a per-rank table (`rank Copy Scale Add Triad`, one line per rank,
then `sum`). The JSON report holds the same under results.kernels and results.per_rank. MB/s uses MB = 10^6 bytes, as STREAM does; times are in seconds.

Since kernel version 1.0 (this tree) two more functions follow Triad: Update (c = s*c in place, no
write-allocate) and Sum (read-only), and two note lines after the table give the bytes per element
each rate counts and the bytes the core moves with write-allocate. Reports without them (older
runs) still parse: the four STREAM functions are required, the two others optional.
"""

from __future__ import annotations

import pandas as pd

from hpclab.runs.parse.report import need, report_attrs, parse_report_text, placement_table
from hpclab.runs.parse.source import fail

FUNCTIONS = ["Copy", "Scale", "Add", "Triad"]
EXTRA_FUNCTIONS = ["Update", "Sum"]  # known-traffic kernels, absent from older reports
ALL_FUNCTIONS = FUNCTIONS + EXTRA_FUNCTIONS
# Bytes per element: as the rates count them (STREAM's convention) and as the core moves them
# with ordinary (write-allocate) stores. Older reports lack these numbers in their JSON.
COUNTED_BYTES = {"Copy": 16, "Scale": 16, "Add": 24, "Triad": 24, "Update": 16, "Sum": 8}
MOVED_BYTES = {"Copy": 24, "Scale": 24, "Add": 32, "Triad": 32, "Update": 16, "Sum": 8}
KERNEL_COLUMNS = ["function", "best_mb_s", "avg_time", "min_time", "max_time"]
COLUMNS = ["rank", "function", "mb_s", "host", "cpu", "allowed", "threads", "thread_cpus"]


def _summary_table(text_rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(text_rows, columns=KERNEL_COLUMNS)


def _per_rank(rates: list[tuple[int, dict]], place: pd.DataFrame, threads: int) -> pd.DataFrame:
    """Join each rank's best rates with where the rank and its threads ran."""
    ranks = place[place["thread"].isna()].set_index("rank")
    per_thread = place[place["thread"].notna()].sort_values(["rank", "thread"])
    rows = []
    for rank, by_function in rates:
        mine = per_thread[per_thread["rank"] == rank]
        for name in [f for f in ALL_FUNCTIONS if f in by_function]:
            rows.append({
                "rank": rank, "function": name, "mb_s": float(by_function[name]),
                "host": ranks["host"].get(rank), "cpu": ranks["cpu"].get(rank),
                "allowed": ranks["allowed"].get(rank),
                "threads": len(mine) or threads,
                "thread_cpus": [int(c) for c in mine["cpu"]],
            })
    return pd.DataFrame(rows, columns=COLUMNS)


def _numbers(fields: list[str], source: str, lineno: int, what: str) -> list[float]:
    try:
        return [float(f) for f in fields]
    except ValueError:
        raise fail(source, lineno, f"{what}: expected numbers, found {' '.join(fields)[:80]!r}",
                   "the report may be damaged; re-run") from None


def parse_stream_text(text: str, source: str = "stdout") -> pd.DataFrame:
    """Parse STREAM's stdout alone: the Function / Best Rate table and the per-rank table.

    Returns the per-rank table with COLUMNS (one row per rank and function; mb_s is that rank's
    best rate [MB/s, 10^6 B/s]; host, cpu, allowed, threads, thread_cpus from the host[] and
    thread[] lines). .attrs["kernels"] holds the aggregate table as records (function,
    best_mb_s, avg_time, min_time, max_time [s]), plus the report's config, validation,
    placement (records), arguments (see parse.report.report_attrs).
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
    table = _per_rank(rates, report.placement, int(report.config.get("threads") or 1))
    table.attrs.update(report_attrs(report))
    table.attrs["kernels"] = krows
    return table


def stream_tables(doc: dict, source: str = "result.json") -> tuple[pd.DataFrame, pd.DataFrame]:
    """A checked STREAM JSON report (from load_result) as two tables.

    Returns (per_rank, kernels): per_rank has COLUMNS, one row per (rank, function): mb_s is that
    rank's best rate [MB/s]; host, cpu (where the rank ran), allowed (its CPU list), threads
    (OpenMP thread count) and thread_cpus (CPU of each thread, in thread order).
    kernels is the aggregate table (function, best_mb_s, avg_time, min_time, max_time).
    """
    res = doc["results"]
    kernels = need(res, "kernels", "dict", "results", source)
    krows = []
    for name in FUNCTIONS + [f for f in EXTRA_FUNCTIONS if f in kernels]:
        entry = need(kernels, name, "dict", "results.kernels", source)
        where = f"results.kernels.{name}"
        krows.append({"function": name,
                      "best_mb_s": need(entry, "best_mb_s", "number", where, source),
                      "avg_time": need(entry, "avg_time", "number", where, source),
                      "min_time": need(entry, "min_time", "number", where, source),
                      "max_time": need(entry, "max_time", "number", where, source)})
    rates = []
    for k, entry in enumerate(need(res, "per_rank", "list", "results", source)):
        where = f"results.per_rank[{k}]"
        rank = need(entry, "rank", "int", where, source)
        rates.append((rank, {name: need(entry, name, "number", where, source)
                             for name in FUNCTIONS + [f for f in EXTRA_FUNCTIONS if f in entry]}))
    threads = doc["config"].get("threads", 1)
    rows = _per_rank(rates, placement_table(doc), threads if isinstance(threads, int) else 1)
    if rows.empty:
        raise fail(source, None, "results.per_rank is empty", "re-run the kernel")
    return rows, _summary_table(krows)
