"""Transport selection results: which Open MPI path carried a message, and what it delivered.

The named selections the course compares, and their pingpong specs, are the transports
lesson's (hpclab.course.lessons). Here `summary()` reduces the measured runs to latency and
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
    largest message), largest_bytes, fit_problem and repetition (the run's round, None if unknown). The rows `summary()` reduces, and what
    `compare()` compares. A run whose times do not fit a line (on a loaded machine a larger message
    can come back faster than a smaller one) keeps its measured numbers with bandwidth_mb_s NaN and
    the fit's complaint in fit_problem, instead of ending the whole table."""
    rows = []
    has_rep = "repetition" in table
    for (label, run_id), run in table.groupby([by, "run_id"], sort=False):
        run = run.sort_values("bytes")
        lo, hi = size_range if size_range else (run["bytes"].min(), run["bytes"].max())
        hi = run["bytes"].max() if hi is None else hi
        try:
            bandwidth, problem = hockney_fit(run["bytes"], run["t_usec"], size_range=(lo, hi)).bandwidth_mb_s, ""
        except HpclabError as exc:
            bandwidth, problem = float("nan"), exc.what
        top = run.iloc[-1]
        rep = run["repetition"].iloc[0] if has_rep else None
        rows.append({by: label, "run_id": run_id, "latency_us": float(run["t_usec"].iloc[0]),
                     "bandwidth_mb_s": bandwidth, "largest_mb_s": float(top["bytes"] / top["t_usec"]),
                     "largest_bytes": int(top["bytes"]), "fit_problem": problem,
                     "repetition": None if rep is None or pd.isna(rep) else int(rep)})
    return pd.DataFrame(rows, columns=[by, "run_id", "latency_us", "bandwidth_mb_s", "largest_mb_s", "largest_bytes",
                                       "fit_problem", "repetition"])


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
    """What Open MPI reported using, per selection: PML, BTLs, MTL, where the answer came from,
    and the network interface the bytes went through (counted, hpclab.runs.parse.network)."""
    cols = [c for c in ["pml", "btl", "mtl", "transport", "transport_source", "interface"] if c in table]
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


def compare(table: pd.DataFrame, a: str, b: str, by: str = "label", paired: bool = False) -> PathComparison:
    """Selections a and b of a pingpong table compared on their repetitions (see PathComparison;
    the comparisons name the sides in quotes, 'a' and 'b', since labels may hold commas).
    paired=True: the two were submitted in one experiment, round by round (hpclab.jobs.experiment),
    so their runs pair by repetition; rounds where either side has no run are left out.
    Raises HpclabError when either has no run in the table, or when paired runs carry no repetition."""
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
    if paired:
        if ra["repetition"].isna().any() or rb["repetition"].isna().any():
            raise HpclabError(f"{a!r} and {b!r}: paired runs need their repetition (round)",
                              "compare them unpaired, or load the runs with their status")
        both = ra.merge(rb, on="repetition", suffixes=("_a", "_b")).sort_values("repetition")
        cols = {q: (both[f"{q}_a"], both[f"{q}_b"]) for q in ("latency_us", "largest_mb_s")}
    else:
        cols = {q: (ra[q], rb[q]) for q in ("latency_us", "largest_mb_s")}
    lat = phrases.compare(*cols["latency_us"], a_name=f"'{a}'", b_name=f"'{b}'",
                          quantity="t(0 B)", unit="us", lower_is_better=True, paired=paired)
    bw = phrases.compare(*cols["largest_mb_s"], a_name=f"'{a}'", b_name=f"'{b}'",
                         quantity=f"bandwidth of the {_size(largest)} message", unit="MB/s",
                         lower_is_better=False, paired=paired)
    used = report(table, by)
    return PathComparison(a, b, lat, bw, {x: str(used.loc[x, "transport"]) for x in (a, b)}, largest)


def decided(c: phrases.Comparison) -> str:
    """A comparison's outcome in a few words, for a table: '17x slower', '12 % faster', 'no
    difference > 5 %', 'cannot tell' or 'too few runs'."""
    if c.decision is None or not c.decision.reachable:
        return "too few runs"
    if c.outcome == "different":
        return c.difference()
    if c.outcome == "equivalent":
        return f"no difference > {c.margin * 100:g} %"
    return "cannot tell"


def decision_row(what: str, c: phrases.Comparison) -> dict:
    """One row of a table of decisions: what is compared, the outcome (decided()), the ratio a/b
    with its 95 % CI, the medians and the runs (paired or not)."""
    d = c.decision
    ci = f"{d.ratio.lo:.3g}-{d.ratio.hi:.3g}" if d is not None else "-"
    unit = f" {c.unit}" if c.unit else ""
    return {"comparison": what, "quantity": c.quantity, "outcome": decided(c),
            "ratio a/b": round(d.ratio.estimate if d is not None else c.ratio, 3), "95 % CI": ci,
            "medians (a vs b)": f"{phrases._num(c.a.median)} vs {phrases._num(c.b.median)}{unit}",
            "runs": f"{c.a.n} paired" if c.paired else f"{c.a.n} + {c.b.n}"}


def decisions_frame(rows: list[tuple[str, phrases.Comparison]]) -> pd.DataFrame:
    """(what, comparison) pairs as a table of decision_row()s."""
    return pd.DataFrame([decision_row(w, c) for w, c in rows])


def cache_peak(table: pd.DataFrame, label: str, by: str = "label") -> dict:
    """Where a selection's bandwidth peaks: the median over its runs of bytes / t per size, its
    largest value (peak_bytes, peak_mb_s) and the largest message's (largest_bytes, largest_mb_s)."""
    t = table[(table[by] == label) & (table["bytes"] > 0)]
    if t.empty:
        raise HpclabError(f"no pingpong run labelled {label!r}", "check the label")
    rate = (t["bytes"] / t["t_usec"]).groupby(t["bytes"]).median()
    return {"peak_bytes": int(rate.idxmax()), "peak_mb_s": float(rate.max()),
            "largest_bytes": int(rate.index.max()), "largest_mb_s": float(rate.iloc[-1])}


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
