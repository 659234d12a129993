"""Transport selection results: which Open MPI path carried a message, and what it delivered.

The named selections the course compares, and their pingpong specs, are in
hpclab.course.lesson_transports. Here `summary()` reduces the measured runs to latency and
bandwidth per selection (min/median/max over repetitions, each repetition fitted on its own),
`readable()` writes it for people, `report()` lists the transport that Open MPI itself said it
used in each run, and `bucket_free_size()` the message size from which a shaped link's token
bucket no longer flatters the rate. `per_run()` keeps one row per repetition, `compare()` sets two
selections side by side on those repetitions (hpclab.analysis.phrases: a difference is named only
when it is beyond the run-to-run spread), and the `*_text()` functions word what a lesson's runs
showed, from the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from hpclab.analysis import phrases
from hpclab.analysis.fits import hockney_fit
from hpclab.cluster import links
from hpclab.core.errors import HpclabError


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
    runs = per_run(table, by, size_range)
    stats = {f"{q}_{f}": (q, f) for q in ("latency_us", "bandwidth_mb_s", "largest_mb_s")
             for f in ("min", "median", "max")}
    return runs.groupby(by, sort=False).agg(runs=("run_id", "count"), **stats,
                                             largest_bytes=("largest_bytes", "min"))


def per_run(table: pd.DataFrame, by: str = "label", size_range: tuple[float, float] | None = (8192, None)) -> pd.DataFrame:
    """One row per repetition (run) of each selection: `by`, run_id, latency_us (measured t at the
    smallest size), bandwidth_mb_s (Hockney fit over size_range), largest_mb_s (bytes / t of the
    largest message), largest_bytes and fit_problem. The rows `summary()` reduces, and what
    `compare()` compares. A run whose times do not fit a line (on a loaded machine a larger message
    can come back faster than a smaller one) keeps its measured numbers with bandwidth_mb_s NaN and
    the fit's complaint in fit_problem, instead of ending the whole table."""
    rows = []
    for (label, run_id), run in table.groupby([by, "run_id"], sort=False):
        run = run.sort_values("bytes")
        lo, hi = size_range if size_range else (run["bytes"].min(), run["bytes"].max())
        hi = run["bytes"].max() if hi is None else hi
        try:
            bandwidth, problem = hockney_fit(run["bytes"], run["t_usec"], size_range=(lo, hi)).bandwidth_mb_s, ""
        except HpclabError as exc:
            bandwidth, problem = float("nan"), exc.what
        top = run.iloc[-1]
        rows.append({by: label, "run_id": run_id, "latency_us": float(run["t_usec"].iloc[0]),
                     "bandwidth_mb_s": bandwidth, "largest_mb_s": float(top["bytes"] / top["t_usec"]),
                     "largest_bytes": int(top["bytes"]), "fit_problem": problem})
    return pd.DataFrame(rows, columns=[by, "run_id", "latency_us", "bandwidth_mb_s", "largest_mb_s", "largest_bytes",
                                       "fit_problem"])


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


# --- two selections side by side, on their repetitions -----------------------------------------

@dataclass(frozen=True)
class PathComparison:
    """Two selections compared on their repetitions: `latency` is t at 0 bytes (lower is better),
    `bandwidth` is bytes / t of the largest message (higher is better), both a vs b
    (hpclab.analysis.phrases.Comparison); `transport` names what Open MPI reported for each."""

    a: str
    b: str
    latency: phrases.Comparison
    bandwidth: phrases.Comparison
    transport: dict[str, str]
    largest_bytes: int

    @property
    def b_loses(self) -> bool:
        """Is b worse than a beyond the run-to-run spread, in latency or in bandwidth?"""
        winners = (self.latency.winner, self.bandwidth.winner)
        return self.latency.a_name in winners and self.latency.b_name not in winners


def compare(table: pd.DataFrame, a: str, b: str, by: str = "label") -> PathComparison:
    """Selections a and b of a pingpong table compared on their repetitions (see PathComparison;
    the comparisons name the sides in quotes, 'a' and 'b', since labels may hold commas).
    Raises HpclabError when either has no run in the table."""
    runs = per_run(table, by, size_range=None)
    missing = [x for x in (a, b) if x not in set(runs[by])]
    if missing:
        raise HpclabError(f"no pingpong run labelled {', '.join(map(repr, missing))} in the table",
                          f"labels present: {', '.join(map(str, runs[by].unique()))}")
    ra, rb = runs[runs[by] == a], runs[runs[by] == b]
    largest = int(min(ra["largest_bytes"].min(), rb["largest_bytes"].min()))
    if ra["largest_bytes"].nunique() > 1 or rb["largest_bytes"].nunique() > 1 or \
            ra["largest_bytes"].iloc[0] != rb["largest_bytes"].iloc[0]:
        raise HpclabError(f"{a!r} and {b!r} were not measured up to the same largest message",
                          "compare runs made with the same max_bytes")
    lat = phrases.compare(ra["latency_us"], rb["latency_us"], a_name=f"'{a}'", b_name=f"'{b}'",
                          quantity="t(0 B)", unit="us", lower_is_better=True)
    bw = phrases.compare(ra["largest_mb_s"], rb["largest_mb_s"], a_name=f"'{a}'", b_name=f"'{b}'",
                         quantity=f"bandwidth of the {_size(largest)} message", unit="MB/s",
                         lower_is_better=False)
    used = report(table, by)
    return PathComparison(a, b, lat, bw, {x: str(used.loc[x, "transport"]) for x in (a, b)}, largest)


def _size(nbytes: int) -> str:
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


def fallback_text(table: pd.DataFrame, fast: str, without: str, by: str = "label") -> str:
    """What excluding a component did in these runs, in words built from the numbers: which
    transport each selection reported, then the latency and bandwidth comparisons with their
    spreads (a loss is named only beyond the spread)."""
    c = compare(table, fast, without, by)
    if c.transport[fast] == c.transport[without]:
        head = (f"'{without}' reported the same transport as '{fast}' ({c.transport[fast]}): the exclusion "
                "changed nothing here.")
    else:
        head = (f"'{without}' reported {c.transport[without]} where '{fast}' reported {c.transport[fast]}, "
                "and every run completed: no error, no warning.")
    return " ".join([head, c.latency.swapped().sentence(), c.bandwidth.swapped().sentence()])


def latency_ratio_text(table: pd.DataFrame, a: str, b: str, by: str = "label") -> str:
    """The latency (t at 0 bytes) of two selections as a ratio of their medians, with its order of
    magnitude (phrases.ratio), and whether the difference is beyond the spread of the runs."""
    c = compare(table, a, b, by)
    hi, lo = (c.latency.a, c.latency.b) if c.latency.a.median >= c.latency.b.median else (c.latency.b, c.latency.a)
    slow, quick = (a, b) if hi is c.latency.a else (b, a)
    return (f"An empty message, '{slow}' against '{quick}': the ratio of the median times is "
            f"{phrases.ratio(hi.median, lo.median)}. {c.latency.sentence()}")


def nodes_text(table: pd.DataFrame, intra: str, inter: str, by: str = "label") -> str:
    """Inside a node vs between nodes, from notebook 02's virtual-node runs: the latency ratio with
    its order of magnitude, and both comparisons with their spreads."""
    c = compare(table, inter, intra, by)
    return (f"An empty message between nodes against inside a node: the ratio of the median times is "
            f"{phrases.ratio(c.latency.a.median, c.latency.b.median)}. {c.latency.sentence()} "
            f"{c.bandwidth.sentence()}")
