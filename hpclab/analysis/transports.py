"""Transport selection results: which Open MPI path carried a message, and what it delivered.

The named selections the course compares, and their pingpong specs, are in
hpclab.course.lesson_transports. Here `summary()` reduces the measured runs to latency and
bandwidth per selection (min/median/max over repetitions, each repetition fitted on its own),
`readable()` writes it for people, `report()` lists the transport that Open MPI itself said it
used in each run, and `bucket_free_size()` the message size from which a shaped link's token
bucket no longer flatters the rate.
"""

from __future__ import annotations

import pandas as pd

from hpclab.analysis.fits import hockney_fit
from hpclab.cluster import links


def summary(table: pd.DataFrame, by: str = "label", size_range: tuple[float, float] | None = (8192, None)) -> pd.DataFrame:
    """Latency and bandwidth per selection: each run fitted on its own (Hockney t = L + m/BW),
    then min/median/max over the runs of a selection.

    table: pingpong rows with columns run_id, bytes, t_usec and `by`. size_range:
    bytes fitted for BW (None as upper bound = the largest size). Latency is the measured t at the
    smallest size (0 bytes), not the fit's intercept: a line fitted to large messages extrapolates
    to 0 bytes through a different protocol (rendezvous, single copy) and says little about an
    empty message. `largest` is the bandwidth the largest message reached (bytes / t, MB/s), the sustained
    rate that a shaped link must hold whatever its token bucket lets through at first.
    Returns one row per selection: runs, latency_us_*, bandwidth_mb_s_*, largest_mb_s_*
    (* = min, median, max over runs) and largest_bytes.
    """
    rows = []
    for (label, run_id), run in table.groupby([by, "run_id"], sort=False):
        run = run.sort_values("bytes")
        lo, hi = size_range if size_range else (run["bytes"].min(), run["bytes"].max())
        hi = run["bytes"].max() if hi is None else hi
        fit = hockney_fit(run["bytes"], run["t_usec"], size_range=(lo, hi))
        top = run.iloc[-1]
        rows.append({by: label, "run_id": run_id, "latency_us": float(run["t_usec"].iloc[0]),
                     "bandwidth_mb_s": fit.bandwidth_mb_s, "largest_mb_s": float(top["bytes"] / top["t_usec"]),
                     "largest_bytes": int(top["bytes"])})
    per_run = pd.DataFrame(rows)
    stats = {f"{q}_{f}": (q, f) for q in ("latency_us", "bandwidth_mb_s", "largest_mb_s")
             for f in ("min", "median", "max")}
    return per_run.groupby(by, sort=False).agg(runs=("run_id", "count"), **stats,
                                                largest_bytes=("largest_bytes", "min"))


def bucket_free_size(link: str, factor: int = 8) -> int:
    """The smallest power-of-two message size (bytes) at least `factor` times the token bucket of
    the link profile `link` (hpclab.cluster.links; 8192 for an unshaped link).

    A ping-pong leaves each direction idle while the reply travels, so the bucket is full again
    when the next message starts and its first `burst_bytes` leave unshaped: a message of m bytes
    shows up to m / (m - bucket) times the rate. From this size on that error is below 1/factor."""
    prof = links.get_profile(link)
    need = factor * prof.burst_bytes() if prof.shaped else 8192
    size = 1
    while size < need:
        size *= 2
    return size


def report(table: pd.DataFrame, by: str = "label") -> pd.DataFrame:
    """What Open MPI reported using, per selection: PML, BTLs, MTL and where the answer came from."""
    cols = [c for c in ["pml", "btl", "mtl", "transport", "transport_source"] if c in table]
    first = table.groupby([by, "run_id"], sort=False)[cols].first().reset_index()
    return first.groupby(by, sort=False)[cols].agg(lambda s: ", ".join(sorted({str(v) for v in s})))


def readable(summary_table: pd.DataFrame) -> pd.DataFrame:
    """The summary as 'median (min - max)' strings, one column for latency and one for bandwidth."""
    def fmt(row, key, digits):
        return (f"{row[key + '_median']:.{digits}f} ({row[key + '_min']:.{digits}f} - "
                f"{row[key + '_max']:.{digits}f})")

    out = pd.DataFrame(index=summary_table.index)
    out["runs"] = summary_table["runs"]
    out["t(0 B) [us], median (min - max)"] = [fmt(r, "latency_us", 2) for _, r in summary_table.iterrows()]
    out["fitted BW [MB/s], median (min - max)"] = [fmt(r, "bandwidth_mb_s", 0) for _, r in summary_table.iterrows()]
    if "largest_mb_s_median" in summary_table:
        out["BW of the largest message [MB/s], median (min - max)"] = [
            fmt(r, "largest_mb_s", 0) for _, r in summary_table.iterrows()]
    return out
