"""Placement results: where ranks and threads landed, and what memory bandwidth that cost.

`job_rates()` and `summary()` reduce STREAM runs to one row per case (a run's spec label): the
whole job's bandwidth (min/median/max over repetitions), the CPUs each rank ran on, and whether
ranks ended up sharing a CPU; `comparison()` decides between two cases with the course's
statistics (hpclab.analysis.stats through phrases.compare), `compare_cases()`, `lost_fraction()`
and `pitfall_split()` put numbers on the difference. The cases themselves, and the sentences and
verdicts on what their runs show, are the placement lesson's (hpclab.course.lessons).
"""

from __future__ import annotations

import pandas as pd

from hpclab.analysis import phrases
from hpclab.core.errors import HpclabError
from hpclab.kernels import stream


def pitfall_split(summary_table: pd.DataFrame, pitfall: str, fix: str, pitfall_yield: str,
                  fix_yield: str | None = None) -> dict:
    """Which part of the pitfall's loss is the shared core and which the busy-polling barrier?

    summary_table: summary() of runs of the cases (medians), labelled `pitfall`, `fix`, the
    pitfall again with MPI yielding when idle (`pitfall_yield`) and, optionally, the fix with
    yielding (`fix_yield`). The two effects multiply (the barrier slows down what the shared core
    leaves), so they are factors, never shares of a sum:
    total_factor = fix / pitfall; sharing_factor = fix (with yielding when fix_yield is given) /
    pitfall with yielding (one core doing two ranks' work, measured with mpi_yield_when_idle=1);
    polling_factor = pitfall with yielding / pitfall (the core spent spinning in MPI_Barrier);
    yield_factor = fix / fix with yielding (what yielding changes where no core is shared; 1 when
    it changes nothing, and without fix_yield).
    total_factor = yield_factor x sharing_factor x polling_factor exactly. Also lost (1 - pitfall /
    fix) and lost_sharing (1 - pitfall with yielding / the sharing factor's fix), fractions."""
    med = summary_table["job_mb_s_median"]
    fixed = med[fix_yield] if fix_yield is not None else med[fix]
    return {"lost": float(1 - med[pitfall] / med[fix]),
            "lost_sharing": float(1 - med[pitfall_yield] / fixed),
            "total_factor": float(med[fix] / med[pitfall]),
            "sharing_factor": float(fixed / med[pitfall_yield]),
            "polling_factor": float(med[pitfall_yield] / med[pitfall]),
            "yield_factor": float(med[fix] / fixed)}


def comparison(rates: pd.DataFrame, a: str, b: str, *, a_name: str | None = None, b_name: str | None = None,
               function: str = "Triad", paired: bool = False) -> phrases.Comparison:
    """The whole-job bandwidths of the runs of case a against those of case b (job_rates() rows),
    as a phrases.Comparison (higher is better), decided by the course's statistics: "different"
    only when the 95 % CI of the ratio excludes 1 (at least 4 runs a side unpaired).
    paired=True pairs the runs by their round (column `round`: runs of one experiment.run call
    alternate round by round); a round missing on either side is dropped."""
    values = {}
    for label in (a, b):
        r = rates[rates["label"] == label]
        if r.empty:
            raise HpclabError(f"no runs of case {label!r}", f"cases present: {sorted(set(rates['label']))}")
        values[label] = r.set_index("round")["job_mb_s"] if paired else r["job_mb_s"]
    if paired:
        both = pd.concat([values[a].rename("a"), values[b].rename("b")], axis=1, join="inner").sort_index()
        values = {a: both["a"].tolist(), b: both["b"].tolist()}
    else:
        values = {k: v.tolist() for k, v in values.items()}
    return phrases.compare(values[a], values[b], a_name=a_name or a, b_name=b_name or b,
                           quantity=f"whole-job {function} bandwidth", unit="MB/s", lower_is_better=False,
                           paired=paired)


def threads_per_cpu(result: dict) -> dict[int, int]:
    """{cpu: number of threads (of every rank) that the report saw on it}, from a kernel report's
    placement (result.json). Counts each thread, not each rank: two threads of one rank on one
    CPU count twice. A rank without thread lines counts as one thread on its own CPU."""
    count: dict[int, int] = {}
    for p in result["placement"]:
        for t in p.get("threads") or [{"cpu": p["cpu"]}]:
            count[t["cpu"]] = count.get(t["cpu"], 0) + 1
    return dict(sorted(count.items()))


def shared_cpu(result: dict) -> bool:
    """Did two threads (of one rank or of two) report the same CPU? From result.json's placement.
    Each thread reports the CPU it ran on when the report was taken; for unbound threads that is
    a snapshot, so True means "shared at that moment"."""
    return any(n > 1 for n in threads_per_cpu(result).values())


def job_rates(runs, function: str = "Triad") -> pd.DataFrame:
    """One row per run: label, run_id, round (the run's repetition: runs of one round of an
    experiment.run call ran one after the other), the whole job's best rate (job_mb_s, MB/s, all ranks
    together, timed until the slowest rank finished), rank_sum_mb_s (the sum of each rank's own
    best rate: not a job's rate, since each rank may have been timed while another waited), where each rank's threads ran (cpus_used: rank -> sorted
    CPUs; allowed: rank -> its mask), threads_per_cpu (cpu -> threads seen there) and shared_cpu
    (two threads, of one rank or two, on one CPU: shared_cpu())."""
    rows = []
    for run in runs:
        result = run.result()
        rate = stream.best_rate(result, function)
        cpus = {p["rank"]: sorted({t["cpu"] for t in p.get("threads", [])} or {p["cpu"]}) for p in result["placement"]}
        allowed = {p["rank"]: p["allowed"] for p in result["placement"]}
        rank_sum = stream.rank_sum_rate(result, function)
        rows.append({"label": run.spec.label, "run_id": run.run_id, "round": getattr(run, "repetition", None),
                     "job_mb_s": rate, "rank_sum_mb_s": rank_sum,
                     "cpus_used": cpus, "allowed": allowed, "threads_per_cpu": threads_per_cpu(result),
                     "shared_cpu": shared_cpu(result)})
    return pd.DataFrame(rows)


def summary(rates: pd.DataFrame) -> pd.DataFrame:
    """Per case: runs, whole-job bandwidth min/median/max (MB/s), and whether any run had ranks
    or threads sharing a CPU."""
    agg = rates.groupby("label", sort=False).agg(
        runs=("run_id", "count"), job_mb_s_min=("job_mb_s", "min"), job_mb_s_median=("job_mb_s", "median"),
        job_mb_s_max=("job_mb_s", "max"), shared_cpu=("shared_cpu", "any"),
        cpus_used=("cpus_used", lambda s: s.iloc[0]))
    return agg


def compare_cases(rates: pd.DataFrame, a: str, b: str) -> dict:
    """Does case a really beat case b, or is the difference inside the run-to-run spread?

    rates: job_rates() rows of both cases. Returns runs_a, runs_b, median_a, median_b [MB/s],
    ratio (median_a / median_b), overlap (True when a's min..max range overlaps b's: repetitions
    on a shared machine do not separate them), shared_runs_a/b (runs in which two threads
    reported one CPU: a placement the case allows but does not ask for) and verdict (text)."""
    out = {}
    for key, label in (("a", a), ("b", b)):
        r = rates[rates["label"] == label]
        if r.empty:
            raise HpclabError(f"no runs of case {label!r}", f"cases present: {sorted(set(rates['label']))}")
        out[f"runs_{key}"] = len(r)
        out[f"median_{key}"] = float(r["job_mb_s"].median())
        out[f"range_{key}"] = (float(r["job_mb_s"].min()), float(r["job_mb_s"].max()))
        out[f"shared_runs_{key}"] = int(r["shared_cpu"].sum())
    out["ratio"] = out["median_a"] / out["median_b"]
    (lo_a, hi_a), (lo_b, hi_b) = out["range_a"], out["range_b"]
    out["overlap"] = lo_a <= hi_b and lo_b <= hi_a
    out["verdict"] = comparison(rates, a, b).sentence()
    return out


def lost_fraction(summary_table: pd.DataFrame, bad: str, good: str) -> float:
    """Fraction of the good case's median bandwidth that the bad case loses (0.25 = 25 % lost)."""
    return 1.0 - summary_table.loc[bad, "job_mb_s_median"] / summary_table.loc[good, "job_mb_s_median"]
