"""Placement results: where ranks and threads landed, and what memory bandwidth that cost.

The named cases (a label and the spec fields that produce it) of the bindings notebook and lab
are in hpclab.course.lesson_placement. Here `job_rates()` and `summary()` reduce STREAM runs to
one row per case: the whole job's bandwidth (min/median/max over repetitions), the CPUs each rank
ran on, and whether ranks ended up sharing a CPU; `comparison()`, `compare_cases()`,
`lost_fraction()` and `pitfall_split()` compare cases, and `pitfall_text()`, `binding_text()`,
`pitfall_fidelity()` and `numa_fidelity()` word what the runs show with hpclab.analysis.phrases.
"""

from __future__ import annotations

import pandas as pd

from hpclab.analysis import phrases
from hpclab.core.errors import HpclabError
from hpclab.kernels import stream

# The labels of the hybrid MPI+OpenMP pitfall's cases (hpclab.course.lesson_placement.PITFALL_CASES
# and YIELD_CASES): the pitfall, its first fix, and both again with MPI yielding when idle.
PITFALL = "pitfall: ranks unbound, OpenMP binds"
FIX = "fix 1: bind the ranks (--cpu-bind=cores)"
PITFALL_YIELD = "pitfall, MPI yields when idle"
FIX_YIELD = "fix 1, MPI yields when idle"


def pitfall_split(summary_table: pd.DataFrame, pitfall: str = PITFALL, fix: str = FIX,
                  pitfall_yield: str = PITFALL_YIELD, fix_yield: str = FIX_YIELD) -> dict:
    """Which part of the pitfall's loss is the shared core and which the busy-polling barrier?

    summary_table: summary() of runs of the four cases (medians). The two effects multiply (the
    barrier slows down what the shared core leaves), so they are factors, never shares of a sum:
    total_factor = fix / pitfall; sharing_factor = fix with yielding / pitfall with yielding (one
    core doing two ranks' work, measured with mpi_yield_when_idle=1); polling_factor = pitfall
    with yielding / pitfall (the core spent spinning in MPI_Barrier); yield_factor = fix / fix
    with yielding (what yielding changes where no core is shared; 1 when it changes nothing).
    total_factor = yield_factor x sharing_factor x polling_factor exactly. Also lost (1 - pitfall /
    fix) and lost_sharing (1 - pitfall with yielding / fix with yielding), fractions."""
    med = summary_table["job_mb_s_median"]
    return {"lost": float(1 - med[pitfall] / med[fix]),
            "lost_sharing": float(1 - med[pitfall_yield] / med[fix_yield]),
            "total_factor": float(med[fix] / med[pitfall]),
            "sharing_factor": float(med[fix_yield] / med[pitfall_yield]),
            "polling_factor": float(med[pitfall_yield] / med[pitfall]),
            "yield_factor": float(med[fix] / med[fix_yield])}


def comparison(rates: pd.DataFrame, a: str, b: str, *, a_name: str | None = None, b_name: str | None = None,
               function: str = "Triad") -> phrases.Comparison:
    """The whole-job bandwidths of the runs of case a against those of case b (job_rates() rows),
    as a phrases.Comparison (higher is better): its sentence says 'beyond the spread' only with
    >= 3 runs per side whose ranges do not overlap."""
    values = {}
    for label in (a, b):
        r = rates[rates["label"] == label]
        if r.empty:
            raise HpclabError(f"no runs of case {label!r}", f"cases present: {sorted(set(rates['label']))}")
        values[label] = r["job_mb_s"].tolist()
    return phrases.compare(values[a], values[b], a_name=a_name or a, b_name=b_name or b,
                           quantity=f"whole-job {function} bandwidth", unit="MB/s", lower_is_better=False)


def pitfall_text(rates: pd.DataFrame) -> str:
    """What the four pitfall cases' runs (job_rates() rows of PITFALL, FIX, PITFALL_YIELD and
    FIX_YIELD) show, in sentences built from their numbers: each comparison with its spread, then
    the loss as factors that multiply."""
    total = comparison(rates, FIX, PITFALL, a_name="fix 1", b_name="the pitfall")
    sharing = comparison(rates, FIX_YIELD, PITFALL_YIELD, a_name="fix 1 with yielding",
                         b_name="the pitfall with yielding")
    polling = comparison(rates, PITFALL_YIELD, PITFALL, a_name="the pitfall with yielding", b_name="the pitfall")
    sp = pitfall_split(summary(rates))
    parts = {"the shared core": sp["sharing_factor"], "busy-polling in the barrier": sp["polling_factor"]}
    if abs(sp["yield_factor"] - 1) > 0.02:
        parts["yielding itself, on disjoint cores"] = sp["yield_factor"]
    lines = [f"- All in: {total.sentence()}",
             f"- The shared core alone (both sides yield): {sharing.sentence()}",
             f"- Busy-polling (same placement, with and without yielding): {polling.sentence()}",
             f"- As factors of the medians: {phrases.factors(sp['total_factor'], parts, what='between fix 1 and the pitfall')}."]
    return "\n".join(lines)


def pitfall_fidelity(rates: pd.DataFrame, cache_rates: pd.DataFrame | None = None, array_mb: float | None = None) -> dict:
    """The fidelity row "hybrid-pitfall": the seed's claim (several ranks whose OpenMP threads are
    bound to the same hardware threads lose most of their performance; --cpu-bind=cores fixes it)
    against ours.

    rates: job_rates() of PITFALL and FIX runs on memory-resident arrays (what the seed measured:
    STREAM's memory bandwidth); cache_rates: optionally job_rates() of the four pitfall cases on
    in-cache arrays (pitfall_split's factors are then named in `here`); array_mb: MB of the three
    arrays of one rank, for the text. 'yes' needs fix 1 beyond the spread of the pitfall (>= 3 runs
    per side, ranges apart) and at least half of the bandwidth lost ('most'); a smaller measured
    loss is 'partly'; no measured difference, or a faster pitfall, is 'no'. Returns here,
    reproduced, why, evidence, beyond_spread, lost and the Comparison's numbers."""
    cmp = comparison(rates, FIX, PITFALL, a_name="fix 1", b_name="the pitfall")
    lost = 1 - cmp.b.median / cmp.a.median
    pit = rates[rates["label"] == PITFALL]
    shared = f"{int(pit['shared_cpu'].sum())} of {len(pit)} pitfall runs reported both ranks' threads on one CPU"
    size = f"{array_mb:,.0f} MB of arrays per rank, " if array_mb else ""
    here = f"memory-resident STREAM ({size}>= 4x the last-level cache): {cmp.sentence()}"
    if not cmp.enough_runs:
        verdict, why = "not shown", f"fewer than {phrases.MIN_RUNS} runs per side: {shared}"
    elif cmp.winner == "fix 1" and lost >= 0.5:
        verdict, why = "yes", (f"the pitfall lost {phrases.pct(lost)} of fix 1's bandwidth, beyond the spread; {shared}: "
                               "one mask, one binding decision per runtime, every rank on one core")
    elif cmp.winner == "fix 1":
        verdict, why = "partly", (f"the pitfall lost {phrases.pct(lost)} of fix 1's bandwidth, beyond the spread but "
                                  f"less than the 'most' of the claim; {shared}; on memory-resident arrays the shared "
                                  "core keeps the share of the memory bandwidth one core can draw")
    elif cmp.winner is None:
        verdict, why = "no", (f"no difference beyond the spread of these runs on memory-resident arrays ({shared}); "
                              f"fix 1 spans {phrases.Spread.text(cmp.a, 'MB/s')}, the pitfall "
                              f"{phrases.Spread.text(cmp.b, 'MB/s')}")
    else:
        verdict, why = "no", (f"the pitfall's bandwidth was higher than fix 1's, beyond the spread, on memory-resident "
                              f"arrays ({shared})")
    if cache_rates is not None:
        try:
            sp = pitfall_split(summary(cache_rates))
            here += (" In cache (arrays inside the last-level cache, a barrier after each short repetition): "
                     + phrases.factors(sp["total_factor"], {"the shared core": sp["sharing_factor"],
                                                            "busy-polling in the barrier": sp["polling_factor"]},
                                       what="between fix 1 and the pitfall") + ".")
        except KeyError:
            pass
    return {"here": here, "reproduced": verdict, "why": why, "evidence": "measured",
            "beyond_spread": cmp.beyond_spread, "lost": float(lost),
            "fix_mb_s": cmp.a.median, "pitfall_mb_s": cmp.b.median}


def numa_fidelity(rates: pd.DataFrame, local: str, remote: str) -> dict:
    """The fidelity row "numa" from one-rank STREAM runs with memory bound to the local and to a
    remote NUMA node (job_rates() rows of the two cases `local` and `remote`, labels of
    hpclab.course.lesson_placement.numa_cases). 'yes' when local memory gives a higher bandwidth
    beyond the spread (>= 3 runs per side); 'no' when not; 'not shown' with fewer runs."""
    cmp = comparison(rates, local, remote, a_name="local memory", b_name="remote memory")
    gain = cmp.a.median / cmp.b.median - 1
    if not cmp.enough_runs:
        verdict, why = "not shown", f"fewer than {phrases.MIN_RUNS} runs per side"
    elif cmp.winner == "local memory":
        verdict, why = "yes", (f"local memory gave {phrases.pct(gain)} more bandwidth than remote, beyond the spread "
                               "(the seed: about 60 %); remote reads cross the link between the NUMA nodes")
    else:
        verdict, why = "no", "no difference beyond the spread between local and remote memory on this node"
    return {"here": cmp.sentence(), "reproduced": verdict, "why": why, "evidence": "measured",
            "beyond_spread": cmp.beyond_spread, "local_gain": float(gain)}


def binding_text(rates: pd.DataFrame, a: str, b: str) -> str:
    """Does binding case a beat case b on these runs? The Comparison's sentence, plus how many of
    a's runs reported two ranks or threads on one CPU (job_rates() rows of both cases)."""
    cmp = comparison(rates, a, b)
    ra = rates[rates["label"] == a]
    return f"{cmp.sentence()} In {int(ra['shared_cpu'].sum())} of {len(ra)} runs of {a}, two threads reported one CPU."


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
    """One row per run: label, run_id, the whole job's best rate (job_mb_s, MB/s, all ranks
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
        rows.append({"label": run.spec.label, "run_id": run.run_id, "job_mb_s": rate, "rank_sum_mb_s": rank_sum,
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
