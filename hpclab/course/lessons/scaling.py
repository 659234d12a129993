"""The scaling lesson (notebooks 04 and 06, lab-scaling): speedup and efficiency of the Poisson
solver, what limits it, and inside its compute.

Its runs: the Poisson runs of a strong-scaling study that fit this machine (notebook 04), and one
roof experiment (notebook 06): STREAM and the solver in and out of the caches, fused, and built
without software prefetch, all alternating in one experiment.run call (`roof_specs`), so the roof
is measured once, beside what it is compared with. Its words: tables of decisions
(`efficiency_table`, `roof_comparisons` through phrases.outcomes), takeaways and self-checks
built from them (`speedup_takeaway`, `look_first_quiz`, `limit_text`, `fusion_text`,
`fusion_quiz`, `valgrind_time_text`). Its claims: the solver is memory bound, and a profiler
points at its compute loops, with their fidelity rows (`roofline`, `hotspots`). Its lab's
expected answers: `reference`, from the runs a student packed, by role (LAB_ROLES).

The runs' computation is hpclab.analysis.scaling (speedup, efficiency, subdomains against the
caches) and hpclab.analysis.roofline, the profiles hpclab.tools.profilers.
"""

from __future__ import annotations

import pandas as pd

from hpclab.analysis import phrases, scaling
from hpclab.analysis.roofline import (PROGRAM_REPORT, SEED_STREAM_GB_S, against_roof, alone_on_the_node,
                                      bytes_per_update, iters_for, memory_roof, variant_comparison)
from hpclab.core.errors import HpclabError
from hpclab.course.fidelity import Claim, Row, from_verdict, make_row
from hpclab.course.lessons import Lesson, placement, register
from hpclab.course.quiz import accepted
from hpclab.kernels import poisson as poisson_report
from hpclab.spec import model as spec
from hpclab.tools import profilers

# --- the runs: a strong-scaling study, and the roofline's memory term -----------------------------

def specs(configs: list[dict], n: int, iters: int, repetitions: int = 3, experiment: str = "scaling") -> list:
    """Poisson specs, one per config dict with keys ntasks, grid ('PxQ' or None), exchange, label."""
    out = []
    for c in configs:
        args = {"n": n, "iters": iters, "exchange": c.get("exchange", "sendrecv")}
        if c.get("grid"):
            args["grid"] = c["grid"]
        if c.get("fuse"):
            args["fuse"] = True
        label = c.get("label") or f"{c['ntasks']} rank(s) {c.get('grid') or 'auto'} {args['exchange']}"
        out.append(spec.make_spec(kernel="poisson", ntasks=c["ntasks"], args=args, label=label,
                                  binding={"cpu_bind": "cores"} if c["ntasks"] <= c.get("cores", 10**9) else {},
                                  repetitions=repetitions, experiment=experiment))
    return out


# The process-grid families notebook 04 runs: one 1D cut and the 2D grids. The other 1D cut adds
# runs (and time) but no finding of this notebook's: notebook 05b measures the subdomain shapes of
# all three of the 2014 grids.
STUDY_FAMILIES = ("1 rank", "1D 1xP", "2D")


def configs_from_plan(plan, partition_cores: int | None = None, exchange: str = "sendrecv",
                      families: tuple[str, ...] | None = None) -> list[dict]:
    """configs_for the rank counts of hpclab.course.sizing.plan (scaling_ranks: 1, then powers of
    two up to the node's cores), kept to those the partition's nodes hold (partition_cores) and,
    when given, to the process-grid `families` (e.g. STUDY_FAMILIES)."""
    ranks = [r for r in plan.scaling_ranks if partition_cores is None or r <= partition_cores] or [1]
    configs = configs_for(max(ranks), exchange, ranks=ranks)
    return [c for c in configs if families is None or c["family"] in families]


def configs_for(cores: int, exchange: str = "sendrecv", ranks: list[int] | None = None) -> list[dict]:
    """The strong-scaling configurations that fit on `cores` cores without oversubscribing:
    1 rank, then every power of two up to `cores` (or the counts in `ranks`), each as both 1D
    grids (Px1, 1xP) and, from 4 ranks on, the squarest 2D grid."""
    out = [{"ntasks": 1, "grid": "1x1", "exchange": exchange, "family": "1 rank"}]
    counts = sorted(r for r in (ranks or []) if 1 < r <= cores)
    if ranks is None:
        q = 2
        while q <= cores:
            counts.append(q)
            q *= 2
    for p in counts:
        out.append({"ntasks": p, "grid": f"{p}x1", "exchange": exchange, "family": "1D Px1"})
        out.append({"ntasks": p, "grid": f"1x{p}", "exchange": exchange, "family": "1D 1xP"})
        if p >= 4:
            a = int(p ** 0.5)
            while p % a:
                a -= 1
            out.append({"ntasks": p, "grid": f"{p // a}x{a}", "exchange": exchange, "family": "2D"})
    for c in out:
        c["label"] = f"{c['ntasks']} rank(s), grid {c['grid']}"
    return out


# The label of the solver built without software prefetch (POISSON_PREFETCH=0) in the roof experiment.
NO_PREFETCH = "no prefetch"


# The roof experiment's rounds are adaptive (experiment.run(..., until=roof_decided)): at least
# ROOF_MIN_ROUNDS, at most ROOF_MAX_ROUNDS. With a fixed 4 + 4 runs the machine's noise (+-21 % on
# the memory grid, 2026-12-07) left "in cache / from memory" undecided in one quiet course run of
# three, and the roofline row changed its verdict between them.
ROOF_MIN_ROUNDS, ROOF_MAX_ROUNDS = 4, 10


def roof_decided(groups) -> bool:
    """The roof experiment's stop rule: True when the runs so far decide both comparisons of the
    roofline row (the memory grid against its roof, the grid in cache against it) at the stricter
    level of a look among several (hpclab.analysis.stats.looks), or when the runs hold no grid from
    memory (nothing to decide). groups: one list of completed runs per spec of roof_specs, in its
    order (experiment.run_until)."""
    from hpclab.analysis import roofline, stats

    stream, solver = groups[0], [r for g in groups[1:] for r in g]   # roof_specs lists STREAM first
    _, level = stats.looks(paired=False, min_rounds=ROOF_MIN_ROUNDS, max_rounds=ROOF_MAX_ROUNDS)
    try:
        judged = roofline.against_roof(roofline.poisson_rates(solver), [r.result() for r in stream],
                                       roofline.cache_sizes(stream[0].path), level=level)
    except HpclabError:
        return True
    return all(c is None or c.outcome != "undecided" for c in (judged["at_roof"], judged["drop"]))


def roof_specs(stream_size: int, sizes: list[int], updates: float, rounds: int, cores: int | None,
               no_prefetch=None, experiment: str = "06-roofline") -> list:
    """Notebook 06's roof experiment, for one experiment.run call (its runs alternate round by
    round, so a drift of the machine falls on every case alike), `rounds` runs each (4 + 4 are the
    fewest the statistics decide from): STREAM with arrays of `stream_size` doubles (>= 4x the
    last-level cache; 4 repetitions, the best of the 3 timed ones is the run's rate: a roof is an
    upper bound, and a passing disturbance only lowers a repetition), the separate solver on
    every grid of `sizes` (cache-resident ones, and the largest from memory), the fused solver and,
    with `no_prefetch` (the path of a build with POISSON_PREFETCH=0, hpclab.tools.variants.build),
    that build as a `kernel: program` run, both on the largest grid. Each `updates` lattice updates
    (at least 3 iterations), one rank that has the node to itself (alone_on_the_node)."""
    alone = alone_on_the_node(cores)
    big = max(sizes)

    def solver(n, label, fuse=False):
        return spec.make_spec(kernel="poisson", ntasks=1, label=label, repetitions=rounds, experiment=experiment,
                              args={"n": n, "iters": iters_for(n, updates), "extra_args": ["--fuse"] if fuse else []},
                              **alone)

    out = [spec.make_spec(kernel="stream", ntasks=1, args={"size": stream_size, "reps": 4}, label="triad",
                          repetitions=rounds, experiment=experiment, **alone),
           solver(big, "separate"), solver(big, "fused", fuse=True)]
    if no_prefetch is not None:
        out.append(spec.make_spec(kernel="program", ntasks=1, label=NO_PREFETCH, repetitions=rounds,
                                  experiment=experiment, **alone,
                                  command=[str(no_prefetch), "--n", str(big), "--iters", str(iters_for(big, updates)),
                                           "--json", PROGRAM_REPORT]))
    out += [solver(n, "separate") for n in sorted(sizes) if n != big]
    return out


# --- the self-checks and takeaways, answered by the learner's own runs -----------------------------

# The course's table of decisions and its note on disturbed runs are the placement lesson's;
# this lesson's pages use the same two.
from hpclab.analysis.phrases import noise_note, outcomes, said  # noqa: E402,F401  (the notebooks read them here)


def efficiency_table(rows) -> pd.DataFrame:
    """Each multi-rank configuration's efficiency against 1 rank, total and compute only, as a
    small table of decisions (hpclab.analysis.scaling.efficiency_against_one_rank through
    phrases.outcomes): the ratio is the efficiency, its 95 % CI says whether it differs from 1."""
    rows_ = scaling.efficiency_against_one_rank(rows)
    cmps = {}
    for _, r in rows_.iterrows():
        cmps[f"{r['label']}: per-rank rate / 1 rank's"] = r["total"]
        cmps[f"{r['label']}: compute only"] = r["compute"]
    return outcomes(cmps)


def speedup_takeaway(rows, label: str) -> str:
    """The takeaway of the speedup figure for configuration `label` (hpclab.analysis.scaling.run_rows
    rows), built from the decision on its efficiency against 1."""
    r = scaling.efficiency_against_one_rank(rows).set_index("label").loc[label]
    c, p = r["total"], int(r["ranks"])
    head = f"On {p} ranks ({label.split(', ')[-1]}) the efficiency is {r['efficiency']:.2f}: "
    if c.outcome == "different" and c.winner == c.a_name:
        return head + ("above ideal scaling, decided. A gain beyond ideal needs a cause; the subdomains table "
                       "shows where each rank's share of the grid lives.")
    if c.outcome == "different":
        return head + "below ideal scaling, decided: the ranks lost time against one rank; section 3 shows where."
    if c.outcome == "equivalent":
        return head + f"ideal within {c.margin * 100:g} %: the ranks neither lost nor gained time against one rank."
    return head + "these runs cannot tell it from ideal scaling (the table above gives the CI)."


def split_takeaway(table: pd.DataFrame, label: str) -> str:
    """The takeaway of the compute/MPI figure of one run (its timer table: rank, phase, kind,
    seconds): the MPI share of the ranks' summed time and its largest MPI phase."""
    mpi = table[table["kind"] == "mpi"]
    share = mpi["seconds"].sum() / table["seconds"].sum()
    top = mpi.groupby("phase")["seconds"].sum().idxmax() if not mpi.empty else "none"
    return (f"In the median run of {label}, MPI calls took {phrases.pct(share)} of the ranks' summed time ({top} the most); "
            "the rest is the sweeps, the residuum and the halo copies.")


LOOK_FIRST = ["communication and waiting (MPI time)", "the computation (compute time)",
              "neither: no loss of rank-seconds the statistics can decide"]


def look_first_quiz(rows, label: str) -> dict:
    """The self-check 'where would you look first?' built from the learner's runs of `label`
    (hpclab.analysis.scaling.run_rows): the answer follows from them. When the statistics do not
    decide p x T[p] above T[1], no loss is shown; otherwise the kind (compute or MPI) that took
    more extra rank-seconds than the single rank. Returns the keyword arguments of quiz.ask."""
    lost = scaling.time_lost(rows, label)
    p, total = lost["ranks"], lost["total"]
    if total.outcome != "different" or total.winner == total.a_name:
        answer = LOOK_FIRST[2]
    else:
        answer = LOOK_FIRST[0] if lost["mpi"] > lost["compute"] else LOOK_FIRST[1]
    why = (f"{total.sentence()} Beyond the single rank's medians, the {p} ranks together spent "
           f"{lost['compute']:+.3g} s in compute and {lost['mpi']:+.3g} s in MPI calls. A loss counts when the "
           "statistics decide p x T[p] above T[1]; then the kind with more extra seconds is where to look first.")
    return {"question": (f"Your runs of {label}: to shorten them, where would you look first?"),
            "options": LOOK_FIRST, "answer": answer, "why": why}


def roof_comparisons(rates: pd.DataFrame, stream_results: list[dict], caches: pd.DataFrame,
                     other_build: str | None = NO_PREFETCH) -> dict:
    """What notebook 06's roof experiment decides, each a phrases.Comparison (unpaired, M updates/s):
    the memory-resident solver against its roof and against the grid in cache (against_roof), the
    course build (software prefetch) against `other_build` on the memory-resident grid, when run,
    and fused against separate there. Returns {row name: Comparison}, for phrases.outcomes."""
    judged = against_roof(rates, stream_results, caches)
    n = judged["n"]
    out = {"from memory: the solver / its roof": judged["at_roof"]}
    if judged["drop"] is not None:
        out["in cache / from memory"] = judged["drop"]
    variants = set(rates.loc[rates["n"] == n, "variant"])
    if other_build in variants:
        out["software prefetch / none (from memory)"] = variant_comparison(
            rates, "separate", other_build, n, a_name="the prefetching build", b_name="the build without")
    if "fused" in variants:
        out["fused / separate (from memory)"] = variant_comparison(rates, "fused", "separate", n)
    return out


def limit_text(judged: dict, cmps: dict) -> str:
    """What limits the solver on this machine, in at most three short sentences built from the
    decisions of roof_comparisons (cmps) and against_roof (judged): where it sits against its
    roof, what leaving the caches costs, and what software prefetch buys."""
    at_roof, drop = judged["at_roof"], judged.get("drop")
    pf = cmps.get("software prefetch / none (from memory)")
    share = f"{phrases.pct(judged['share'])}"
    if at_roof.outcome == "equivalent":
        out = [f"From memory the solver runs at its roof ({share}): memory bandwidth caps it here, and only "
               "fewer bytes per update can raise its rate."]
    elif at_roof.outcome == "different" and at_roof.winner != at_roof.a_name:
        out = [f"From memory the solver reaches {share} of its roof, decided below it: the bandwidth is not what "
               "caps it here."]
    else:
        out = [f"From memory the solver reaches {share} of its roof; these runs cannot decide whether it is at it."]
    below = at_roof.outcome == "different" and at_roof.winner != at_roof.a_name
    if drop is not None and drop.outcome == "different" and drop.winner == drop.a_name:
        out.append(f"Yet from cache it runs {said(drop)}, so it waits for memory;")
        if pf is not None and pf.outcome == "different" and pf.winner == pf.a_name:
            out.append(f"prefetching, which moves no fewer bytes, makes it {said(pf)}: what limits one "
                       "core here is how early its reads are asked for (memory latency)"
                       + (", not the bandwidth." if below else "."))
        elif pf is not None:
            out.append("these runs do not decide what software prefetch buys.")
        else:
            out[-1] = out[-1].rstrip(";") + "."
    return " ".join(out)


def fusion_text(cmps: dict, judged: dict) -> str:
    """The takeaway of the fusion experiment, from the decision on fused against separate from
    memory and on the solver against its roof."""
    f = cmps.get("fused / separate (from memory)")
    if f is None:
        return "The fused solver did not run from memory here."
    share = f"{phrases.pct(judged['share'])}"
    if f.outcome == "equivalent":
        return (f"From memory fused and separate differ by less than {f.margin * 100:g} %: saving a quarter of "
                f"the bytes gained nothing measurable, since at {share} of its roof the bytes are not what holds "
                "this solver.")
    if f.outcome == "different" and f.winner == "fused":
        return (f"From memory fusing made the solver {said(f)} than separate: the bytes it saves are part "
                f"of its time, though at {share} of its roof not all of it.")
    if f.outcome == "different":
        return (f"From memory the fused solver is {said(f)}: its extra work per update costs more than "
                "the bytes it saves.")
    return "These runs cannot tell fused from separate from memory (the table gives the CI)."


def roof_report(rates: pd.DataFrame, stream_results: list[dict], caches: pd.DataFrame) -> dict:
    """Everything notebook 06 says about its roof experiment, from its runs: table (the decisions,
    phrases.outcomes of roof_comparisons), limit (limit_text), fusion (fusion_text), judged
    (against_roof, None without a memory-resident grid) and cmps. A run set without a grid from
    memory (the quick parameter set) still compares the builds and variants on its largest grid
    and says that the roof needs a grid from memory."""
    try:
        judged = against_roof(rates, stream_results, caches)
    except HpclabError:
        judged = None
    if judged is not None:
        cmps = roof_comparisons(rates, stream_results, caches)
        return {"table": outcomes(cmps), "limit": limit_text(judged, cmps),
                "fusion": fusion_text(cmps, judged), "judged": judged, "cmps": cmps}
    n = int(rates["n"].max())
    variants = set(rates.loc[rates["n"] == n, "variant"])
    cmps = {}
    if NO_PREFETCH in variants:
        cmps["software prefetch / none"] = variant_comparison(rates, "separate", NO_PREFETCH, n,
                                                              a_name="the prefetching build", b_name="the build without")
    if "fused" in variants:
        cmps["fused / separate"] = variant_comparison(rates, "fused", "separate", n)
    return {"table": outcomes(cmps), "judged": None, "cmps": cmps,
            "limit": f"No grid from memory among these runs (largest n = {n}): the roof applies to none of them.",
            "fusion": "Without a grid from memory these runs cannot show what fusing saves there."}


FUSION_OPTIONS = ["about the 33 % that 64/48 promises: at its roof, time follows the bytes",
                  "a gain, but less than 33 %: the bytes are only part of what holds it",
                  "nothing measurable: the bytes fusing saves are not what holds it",
                  "a loss: the fused loop's extra work costs more than the bytes it saves",
                  "these runs cannot tell"]


def fusion_quiz(cmps: dict, judged: dict) -> dict:
    """The self-check on fusion, answered by the learner's runs: what did 48 instead of 64 bytes
    per update gain from memory? The answer follows the decision on fused against separate (a
    gain whose CI reaches 64/48 counts as the full 33 %). Returns the keyword arguments of quiz.ask."""
    f = cmps.get("fused / separate (from memory)") or cmps.get("fused / separate")
    full = bytes_per_update() / bytes_per_update(fused=True)
    if f.outcome == "different" and f.winner == "fused":
        answer = FUSION_OPTIONS[0] if f.decision.ratio.hi >= full else FUSION_OPTIONS[1]
    elif f.outcome == "different":
        answer = FUSION_OPTIONS[3]
    elif f.outcome == "equivalent":
        answer = FUSION_OPTIONS[2]
    else:
        answer = FUSION_OPTIONS[4]
    where = (f"yours ran at {phrases.pct(judged['share'])} of its roof" if judged else "these runs had no grid from memory")
    why = (f"{f.sentence()} At its roof a solver's time is bytes / bandwidth, so 48 instead of 64 bytes gain up "
           f"to {phrases.pct(full - 1)}; {where}.")
    grid = f"from memory (n = {judged['n']})" if judged else "on your largest grid"
    return {"question": (f"Fusing cut the bytes per update from 64 to 48. {grid[0].upper() + grid[1:]}, what did "
                         "it gain in your runs, and why?"),
            "options": FUSION_OPTIONS, "answer": answer, "why": why}


def timer_views(cg, pf=None) -> pd.DataFrame:
    """The loop's shares three ways: callgrind's instructions, the solver's timers in the callgrind
    run, and (with a perf profile pf) perf's samples and the timers of the perf run."""
    views = {"callgrind: instructions": profilers.loop_shares(cg),
             "solver timers (callgrind run)": profilers.timer_shares(cg.result)}
    if pf is not None:
        views["perf: samples"] = profilers.loop_shares(pf)
        views["solver timers (perf run)"] = profilers.timer_shares(pf.result)
    return pd.DataFrame(views)


def valgrind_time_text(cg) -> str:
    """Why the solver's timers disagree with callgrind's counts in the callgrind run, with the
    number: how many times a sweep instruction's time a residuum instruction took under valgrind."""
    ins, sec = profilers.loop_shares(cg), profilers.timer_shares(cg.result)
    k = (sec["residuum"] / ins["residuum"]) / (sec["red/black sweeps"] / ins["red/black sweeps"])
    return (f"Under valgrind a residuum instruction took {k:.1f}x the time of a sweep instruction. The timers "
            "measured real seconds, but of valgrind executing its own instrumented translation of each "
            "instruction, whose cost differs from loop to loop: those seconds follow neither callgrind's counts "
            "nor the native times.")


# --- the claims this lesson tests, and their rows in the fidelity table -----------------------------

_ITAC = "ITAC training 2014 (seed 001)"

ROOFLINE = Claim(
    "roofline",
    "The Poisson solver is memory bound: its update rate is capped by the memory bandwidth divided "
    "by the bytes each update moves.",
    f"{_ITAC}: hotspot and bandwidth analysis of the solver's update loop (VTune), bandwidth close "
    "to the machine's.")
HOTSPOTS = Claim(
    "hotspots",
    "A profiler points at the few loops where the time goes: the solver's compute loops (residuum, "
    "red and black sweeps) lead the hotspot list, ahead of the MPI library.",
    f"{_ITAC}: rank 0's top five in VTune: residuum 57.9 ms, MPIDI_CH3I_Progress 54.9 ms, red 53.5 ms, "
    "__intel_ssse3_rep_memcpy 47.5 ms, black 46.8 ms.")


def roofline_fidelity(rates: pd.DataFrame, stream_results: list[dict], caches: pd.DataFrame) -> dict:
    """The fidelity row "roofline": the seed's claim (the solver is bound by STREAM bandwidth,
    about 80 GB/s on its node) against ours, from against_roof (separate residuum, decided by the
    course's statistics): the largest memory-resident grid's runs against bandwidth / 64 B, and
    against the largest in-cache grid; with the no-prefetch build among the rates, what software
    prefetch buys goes into `why`. Returns seed, here, share, reported_share (what dividing by
    STREAM's reported Triad, blind to write-allocate, would have said), reproduced, why, evidence
    and beyond_spread: what `roofline` makes its row from (fidelity.from_verdict)."""
    judged = against_roof(rates, stream_results, caches)
    roof = memory_roof(stream_results)
    reported = judged["solver"].median * 1e6 / (roof["reported_mb_s"] * 1e6 / bytes_per_update())
    cmps = roof_comparisons(rates, stream_results, caches)
    decided = "; ".join(f"{name}: {said(c)}" for name, c in cmps.items())
    why = judged["why"]
    pf = cmps.get("software prefetch / none (from memory)")
    if judged["verdict"] == "partly" and pf is not None and pf.outcome == "different" and pf.winner == pf.a_name:
        why += (f"; software prefetch, which moves no fewer bytes, made it {said(pf)}: one core's "
                "memory latency, not the bandwidth, limits it here (the seed's node saturated with 12 of 24 cores)")
    return {"seed": f"solver memory-bound; STREAM ~{SEED_STREAM_GB_S:.0f} GB/s on a 2-socket Ivy Bridge (quoted)",
            "here": (f"one rank, {judged['text']} Decided: {decided}. (STREAM's reported {roof['kernel']}, blind to "
                     f"the write-allocate read, would have said {phrases.pct(reported)}.)"),
            "share": judged["share"], "reported_share": float(reported),
            "reproduced": judged["verdict"], "why": why, "evidence": "measured",
            "beyond_spread": judged["beyond_spread"]}


def roofline(rates, stream_results, caches, runs=()) -> Row:
    """From notebook 06's roof runs (roofline_fidelity); a run set without a memory-resident grid
    (the quick parameter set) is 'not shown', saying so."""

    try:
        verdict = roofline_fidelity(rates, stream_results, caches)
    except HpclabError as e:
        return make_row(ROOFLINE.id, "-", "not shown", f"{e.what}", runs)
    return from_verdict(ROOFLINE.id, verdict, runs)


def hotspots(profile) -> Row:
    """From notebook 06's profile (hpclab.tools.profilers.Profile): do the solver's compute loops lead the
    hotspot list, ahead of the MPI library, as in the seed's VTune run? Start-up (loader, MPI_Init,
    grid set-up) is left out: the seed profiled a long run, where it weighs nothing, while the
    course profiles a short one.

    What the profile can test decides the verdict. A one-rank run exchanges no messages, so its MPI
    library share is bookkeeping, not communication: "ahead of the MPI library" is not tested, and
    the row is at most 'partly'. On a profile of one rank of a multi-rank run, callgrind's counts are
    exact and repeatable (a stated exact test: 'yes' when the compute loops lead); perf's samples
    are one sampled profile, not a spread of runs ('partly')."""
    phases = profile.phases().set_index("phase")["self"]
    loop = phases.reindex(["red/black sweeps", "residuum", "halo copy", "MPI library"]).fillna(0)
    if loop.sum() <= 0:
        return make_row(HOTSPOTS.id, "-", "not shown", "the profile has no samples in the solve loop",
                        [profile.path.name])
    shares = loop / loop.sum()
    startup = 1 - loop.sum() / phases.sum()
    compute = shares["red/black sweeps"] + shares["residuum"]
    top = shares.idxmax()
    ranks = len(poisson_report.per_rank(profile.result)) if profile.result else 1
    exact = profile.tool == "callgrind"
    here = (f"{profile.tool} ({profile.unit}{', exact counts' if exact else ', sampled'}), one rank of a "
            f"{ranks}-rank run, solve loop only: {top} leads with {phrases.pct(shares[top])}; red/black "
            f"sweeps and residuum together {phrases.pct(compute)}, MPI library {phrases.pct(shares['MPI library'])} "
            f"(start-up, left out: {phrases.pct(startup)} of the whole profile)"
            + ("; the MPI part (MPIDI_CH3I_Progress in the seed's top five): not shown, one rank sends nothing"
               if ranks == 1 else ""))
    lead = top in ("red/black sweeps", "residuum") and compute > shares["MPI library"]
    if lead and ranks == 1:
        verdict, beyond, why = "partly", False, (
            f"{'the exact counts' if exact else 'the samples'} put the solver's loops first, as in the seed; the "
            "claim's MPI part is not shown: the profile runs one rank, which exchanges no messages, so its MPI "
            "library share is set-up and bookkeeping, not the progress engine's waiting the seed's rank 0 spent")
    elif lead and exact:
        verdict, beyond, why = "yes", True, ("exact instruction counts (repeatable, no sampling noise) on one rank of "
                                             "a multi-rank run put the solver's loops ahead of the MPI library")
    elif lead:
        verdict, beyond, why = "partly", False, ("the solver's loops lead this sampled profile, but one sampled "
                                                 "profile is not a spread of runs")
    elif top in ("red/black sweeps", "residuum"):
        verdict, beyond, why = "partly", False, "a compute loop leads, but the MPI library takes more than the compute loops together"
    else:
        verdict, beyond, why = "no", False, f"{top} leads the solve loop in this profile, not the solver's compute loops"
    return make_row(HOTSPOTS.id, here, verdict, why, [profile.path.name], beyond_spread=beyond)


# --- the lab's expected answers -------------------------------------------------------------------

# The lab runs one and two ranks LAB_ROUNDS times each, alternating in one experiment (4 + 4 runs
# are the fewest the course's statistics decide from), and packs them by role and round.
LAB_ROUNDS = 4
LAB_ROLES = {f"np{p}": tuple(f"np{p}-{i}" for i in range(1, LAB_ROUNDS + 1)) for p in (1, 2)}
LOOK_FIRST_ANSWERS = ("compute", "MPI", "neither")


def _kind_seconds(table, kind: str) -> float:
    """Seconds of one run's timers of `kind` (compute or mpi), summed over its ranks."""
    return float(table.loc[table["kind"] == kind, "seconds"].sum())


def _timer_noise(table) -> float:
    """One run's timer noise: the red and the black half-sweep do the same work, so their
    difference, summed over ranks, is what the timers cannot tell apart."""
    sweeps = table[table["phase"].isin(["red", "black"])].pivot_table(
        index="rank", columns="phase", values="seconds", aggfunc="sum").reindex(columns=["red", "black"], fill_value=0.0)
    return float((sweeps["red"] - sweeps["black"]).abs().sum())


def reference(packed) -> dict:
    """The lab's expected answers from the runs a student packed (packed:
    hpclab.grading.labdata.Packed, verified: roles LAB_ROLES, Poisson on one and two ranks, each
    run LAB_ROUNDS times): speedup and efficiency from the median solve times, the two-rank runs'
    share of rank time in MPI and their largest MPI phase (all two-rank runs together), whether
    the two ranks lost rank-seconds against one (2 x T[2] against T[1], decided by the course's
    statistics), the median extra seconds in compute and in MPI with the timers' noise, and
    where to look first: 'neither' unless the loss is decided, else the kind with more extra
    seconds (both when they differ by less than the noise)."""
    import statistics

    tables = {kind: [packed.table(r) for r in roles] for kind, roles in LAB_ROLES.items()}
    t = {kind: [tb.attrs["summary"]["wall_time"] for tb in tbs] for kind, tbs in tables.items()}
    speedup = statistics.median(t["np1"]) / statistics.median(t["np2"])
    ranks = tables["np2"][0]["rank"].nunique()
    two = pd.concat(tables["np2"])
    mpi = two[two["kind"] == "mpi"]
    rank_total = sum(float(tb.groupby("rank")["rank_total"].first().sum()) for tb in tables["np2"])
    lost = phrases.compare([ranks * x for x in t["np2"]], t["np1"], a_name=f"{ranks} x T[{ranks}]", b_name="T[1]",
                           quantity="rank-seconds", unit="s", lower_is_better=True)
    extra = {name: statistics.median(_kind_seconds(tb, kind) for tb in tables["np2"])
             - statistics.median(_kind_seconds(tb, kind) for tb in tables["np1"])
             for name, kind in (("compute", "compute"), ("MPI", "mpi"))}
    noise = statistics.median(_timer_noise(tb) for tbs in tables.values() for tb in tbs)
    if lost.outcome == "different" and lost.winner == "T[1]":
        look = accepted(extra, {"compute": noise / 2, "MPI": noise / 2})
    else:
        look = ["neither"]
    return {"speedup": float(speedup), "efficiency": float(speedup / ranks),
            "mpi_fraction": float(mpi["seconds"].sum() / rank_total),
            "dominant_mpi_phase": str(mpi.groupby("phase")["seconds"].sum().idxmax()),
            "rank_seconds": {"np1": t["np1"], "np2": [ranks * x for x in t["np2"]]},
            "lost": lost.outcome if lost.outcome != "different" else f"{lost.winner} lower",
            "lost_sentence": lost.sentence(), "extra_seconds": extra, "timer_noise": noise, "look_first": look}


LESSON = register(Lesson("scaling", "Scaling: speedup, efficiency, and what limits the Poisson solver",
                         ("04-scaling.ipynb", "06-inside-the-compute.ipynb"), lab="lab-scaling",
                         claims=(ROOFLINE, HOTSPOTS), reference=reference))
