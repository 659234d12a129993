"""STREAM: its arguments, and its reports -> one row per (rank, function) with where it ran.

The text report ends with STREAM's own table (`Function Best Rate MB/s Avg time Min time Max
time`, then one line each for Copy, Scale, Add, Triad; a colon after the name, as the original
STREAM prints, is accepted) and a per-rank table (`rank Copy Scale Add Triad`, one line per rank,
then `sum`). The JSON report holds the same under results.kernels and results.per_rank; runs
are read from it (tests/kernel_text.py reads the text tables to check they agree). MB/s uses
MB = 10^6 bytes, as STREAM does; times are in seconds.

Since kernel version 1.0 (this tree) two more functions follow Triad: Update (c = s*c in place, no
write-allocate) and Sum (read-only), and two note lines after the table give the bytes per element
each rate counts and the bytes the core moves with write-allocate. Reports without them (older
runs) still parse: the four STREAM functions are required, the two others optional.
"""

from __future__ import annotations

from typing import Literal

import pandas as pd
from pydantic import Field

from hpclab.kernels.contract import fail, need, placement_table, records, results_of
from hpclab.kernels.registry import Kernel, KernelArgs, register


class StreamArgs(KernelArgs):
    """stream: size = elements per array per rank (well above the last-level cache);
    reps = timed repetitions. Threads come from omp.num_threads."""

    kernel: Literal["stream"] = "stream"
    size: int | None = Field(None, ge=1)
    reps: int | None = Field(None, ge=1)


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


def join_placement(rates: list[tuple[int, dict]], place: pd.DataFrame, threads: int) -> pd.DataFrame:
    """Each rank's best rates joined with where the rank and its threads ran.

    rates: [(rank, {function: MB/s})]; place: a placement table (contract.placement_table);
    threads: OpenMP threads per rank when the placement lists none. Returns a table with COLUMNS.
    """
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
    rows = join_placement(rates, placement_table(doc), threads if isinstance(threads, int) else 1)
    if rows.empty:
        raise fail(source, None, "results.per_rank is empty", "re-run the kernel")
    return rows, _summary_table(krows)


# ----------------------------------------------------------------------------------------------
# Accessors: the one way code above this floor reads a STREAM report's numbers
# ----------------------------------------------------------------------------------------------

def kernel_rates(doc: dict, source: str = "result.json") -> dict[str, dict]:
    """The whole job's entry of each function of a STREAM report: {function: {best_mb_s [MB/s],
    avg_time, min_time, max_time [s], and in newer reports counted_bytes_per_element,
    moved_bytes_per_element}}, as results.kernels holds them.
    Raises HpclabError when doc is no STREAM report or has no results.kernels object."""
    return need(results_of(doc, "stream", source), "kernels", "dict", "results", source)


def best_rate(doc: dict, function: str, source: str = "result.json") -> float:
    """The whole job's best rate of one function ("Triad", ...) in a STREAM report [MB/s, 10^6 B/s].
    Raises HpclabError when the report has no such function or no rate for it."""
    entry = need(kernel_rates(doc, source), function, "dict", "results.kernels", source)
    return float(need(entry, "best_mb_s", "number", f"results.kernels.{function}", source))


def rank_sum_rate(doc: dict, function: str, source: str = "result.json") -> float:
    """The sum over ranks of each rank's own best rate of `function` [MB/s]: not a job's rate
    (each rank may have been timed while another waited). NaN when the report has no per-rank
    rates (an empty or missing results.per_rank). Raises HpclabError when a rank lacks the rate."""
    ranks = results_of(doc, "stream", source).get("per_rank") or []
    if not ranks:
        return float("nan")
    return sum(float(need(entry, function, "number", f"results.per_rank[{k}]", source))
               for k, entry in enumerate(ranks))


def bytes_per_array(doc: dict, source: str = "result.json") -> int:
    """Bytes of one of the STREAM arrays of each rank (to compare with the caches).
    Raises HpclabError when the report does not give it."""
    return int(need(results_of(doc, "stream", source), "bytes_per_array", "number", "results", source))


def run_table(doc: dict, source: str) -> tuple[pd.DataFrame, dict]:
    """A checked JSON report as (per-rank table, {"kernels": aggregate rates as records})."""
    table, kernels = stream_tables(doc, source=source)
    return table, {"kernels": records(kernels)}


KERNEL = register(Kernel(name="stream", args=StreamArgs, table=run_table))
