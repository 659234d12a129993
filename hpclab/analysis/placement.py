"""Placement results: where ranks and threads landed, and what memory bandwidth that cost.

The named cases (a label and the spec fields that produce it) of the bindings notebook and lab
are in hpclab.course.lesson_placement. Here `job_rates()` and `summary()` reduce STREAM runs to
one row per case: the whole job's bandwidth (min/median/max over repetitions), the CPUs each rank
ran on, and whether ranks ended up sharing a CPU; `compare_cases()`, `lost_fraction()` and
`pitfall_split()` compare cases.
"""

from __future__ import annotations

import pandas as pd

from hpclab.core.errors import HpclabError

# The labels of the hybrid MPI+OpenMP pitfall's cases (hpclab.course.lesson_placement.PITFALL_CASES
# and YIELD_CASES): the pitfall, its first fix, and both again with MPI yielding when idle.
PITFALL = "pitfall: ranks unbound, OpenMP binds"
FIX = "fix 1: bind the ranks (--cpu-bind=cores)"
PITFALL_YIELD = "pitfall, MPI yields when idle"
FIX_YIELD = "fix 1, MPI yields when idle"


def pitfall_split(summary_table: pd.DataFrame, pitfall: str = PITFALL, fix: str = FIX,
                  pitfall_yield: str = PITFALL_YIELD, fix_yield: str = FIX_YIELD) -> dict:
    """Which part of the pitfall's loss is the shared core and which the busy-polling barrier?

    summary_table: summary() of runs of the four cases (medians). Returns fractions of the
    fix's median whole-job bandwidth: lost (pitfall vs fix), lost_sharing (pitfall with
    yielding vs fix with yielding: one core doing two ranks' work), lost_polling (the rest,
    lost - lost_sharing: the core spent spinning in MPI_Barrier), and polling_factor (how many
    times slower the pitfall is than the same placement with yielding)."""
    med = summary_table["job_mb_s_median"]
    lost = 1 - med[pitfall] / med[fix]
    sharing = 1 - med[pitfall_yield] / med[fix_yield]
    return {"lost": float(lost), "lost_sharing": float(sharing), "lost_polling": float(lost - sharing),
            "polling_factor": float(med[pitfall_yield] / med[pitfall])}


def pitfall_fidelity(summary_table: pd.DataFrame) -> dict:
    """The fidelity row "hybrid-pitfall": the seed's claim (default binding + several ranks +
    binding OpenMP put every rank's threads on the same hardware threads, a massive load
    imbalance; --cpu-bind=cores fixes it) against ours, from summary() of PITFALL_CASES[:2] and
    YIELD_CASES runs. Returns seed, here, reproduced, why (the arguments of
    hpclab.course.fidelity.make_row("hybrid-pitfall", ...)), and pitfall_split()'s numbers."""
    sp = pitfall_split(summary_table)
    return {"seed": "ranks' OpenMP threads bound to the same hardware threads: 'massive load imbalance'; "
                    "fix: --cpu-bind=cores (Placement 2018, quoted, no figure)",
            "here": (f"pitfall loses {sp['lost']:.0%} of the fix's bandwidth; with mpi_yield_when_idle=1 "
                     f"it loses {sp['lost_sharing']:.0%} (the shared core), the other "
                     f"{sp['lost_polling']:.0%} is busy-polling in MPI_Barrier"),
            "reproduced": "yes" if sp["lost"] > 0.3 else "partly",
            "why": (f"same mechanism (one mask, one binding decision, every rank on one core); the loss "
                    f"multiplies the shared core ({1 / (1 - sp['lost_sharing']):.1f}x slower, measured with "
                    f"mpi_yield_when_idle=1) and Open MPI busy-polling in the barrier while the other rank "
                    f"waits for the core ({sp['polling_factor']:.0f}x more)"),
            **sp}


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
    """One row per run: label, run_id, the whole job's best rate (MB/s, all ranks together, timed
    until the slowest rank finished), where each rank's threads ran (cpus_used: rank -> sorted
    CPUs; allowed: rank -> its mask), threads_per_cpu (cpu -> threads seen there) and shared_cpu
    (two threads, of one rank or two, on one CPU: shared_cpu())."""
    rows = []
    for run in runs:
        result = run.result()
        rate = result["results"]["kernels"][function]["best_mb_s"]
        cpus = {p["rank"]: sorted({t["cpu"] for t in p.get("threads", [])} or {p["cpu"]}) for p in result["placement"]}
        allowed = {p["rank"]: p["allowed"] for p in result["placement"]}
        rows.append({"label": run.spec.label, "run_id": run.run_id, "job_mb_s": rate,
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
    if out["overlap"]:
        out["verdict"] = (f"no winner: the medians differ by {abs(out['ratio'] - 1):.1%}, inside the spread of the runs")
    else:
        out["verdict"] = f"{a if out['ratio'] > 1 else b} is faster in every run"
    fewest = min(out["runs_a"], out["runs_b"])
    if fewest < 5:
        out["verdict"] += f" (but only {fewest} run(s) of one case: too few to call on a shared machine)"
    return out


def lost_fraction(summary_table: pd.DataFrame, bad: str, good: str) -> float:
    """Fraction of the good case's median bandwidth that the bad case loses (0.25 = 25 % lost)."""
    return 1.0 - summary_table.loc[bad, "job_mb_s_median"] / summary_table.loc[good, "job_mb_s_median"]
