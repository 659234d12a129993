"""The placement lesson (notebook 03, lab-placement): where ranks and threads run, and what memory
bandwidth that costs.

Its runs: named cases, each a label and the spec fields that produce it, and the STREAM specs
that measure them: launcher bindings (srun --cpu-bind, mpirun --map-by/--bind-to), the hybrid
MPI+OpenMP pitfall of the 2018 placement study with its three fixes, and local against remote
NUMA memory. Its words: the comparisons the runs decide (`pitfall_comparisons`, in a table:
`outcomes`) and the takeaway built from them (`pitfall_text`), the verdicts on the study's claims
(`pitfall_fidelity`, `numa_fidelity`) with their fidelity rows (`hybrid_pitfall`, `numa`), and what
a bigger node shows where this one cannot (`bigger_node`, quoted). Its lab's expected answers:
`reference`, from the runs a student packed, by role (PLACED, COMPARED, ROLES). The runs'
computation is hpclab.analysis.placement, their figure hpclab.plots.figures.job_bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from hpclab.analysis import phrases
from hpclab.analysis.phrases import noise_note, outcomes, said  # noqa: F401  (the notebook reads them here)
from hpclab.analysis.placement import comparison, job_rates, lost_fraction, pitfall_split, summary
from hpclab.core.errors import HpclabError
from hpclab.course import sizing
from hpclab.course.fidelity import Claim, Row, from_verdict, make_row
from hpclab.course.lessons import Lesson, register
from hpclab.kernels import stream
from hpclab.spec import model as spec

# --- the runs: named cases and their STREAM specs ---------------------------------------------------

# The labels of the hybrid MPI+OpenMP pitfall's cases (PITFALL_CASES and YIELD_CASES): the
# pitfall, its first fix, and both again with MPI yielding when idle.
PITFALL = "pitfall: ranks unbound, OpenMP binds"
FIX = "fix 1: bind the ranks (--cpu-bind=cores)"
PITFALL_YIELD = "pitfall, MPI yields when idle"
FIX_YIELD = "fix 1, MPI yields when idle"


@dataclass(frozen=True)
class Case:
    label: str
    fields: dict
    why: str
    ntasks: int = 2
    extra: dict = field(default_factory=dict)

_BOUND_THREADS = {"num_threads": 1, "proc_bind": "true", "places": "cores"}

_ONE_THREAD = {"num_threads": 1}

def binding_cases(ranks: int = 2) -> list[Case]:
    """The launcher-binding cases for `ranks` ranks of one thread each (the last case leaves
    OMP_NUM_THREADS unset). The deliberate mistake pins every rank to CPU 0."""
    zeros = ",".join("0" * ranks)
    return [
        Case("srun --cpu-bind=cores", {"binding": {"cpu_bind": "cores"}, "omp": _ONE_THREAD}, "each rank on its own core",
             ntasks=ranks),
        Case("srun --cpu-bind=none", {"binding": {"cpu_bind": "none"}, "omp": _ONE_THREAD},
             "ranks may run anywhere in the allocation; the Linux scheduler decides", ntasks=ranks),
        Case(f"srun --cpu-bind=map_cpu:{zeros}", {"binding": {"cpu_bind": f"map_cpu:{zeros}"}, "omp": _ONE_THREAD},
             "a deliberate mistake: every rank pinned to CPU 0", ntasks=ranks),
        Case("mpirun --map-by core --bind-to core", {"launcher": "mpirun", "omp": _ONE_THREAD,
                                                     "binding": {"map_by": "core", "bind_to": "core"}},
             "Open MPI's own launcher inside the allocation, one core per rank", ntasks=ranks),
        Case("mpirun --bind-to none", {"launcher": "mpirun", "omp": _ONE_THREAD,
                                       "binding": {"map_by": "core", "bind_to": "none"}},
             "Open MPI maps ranks but does not bind them", ntasks=ranks),
        Case("srun --cpu-bind=none, OMP_NUM_THREADS unset", {"binding": {"cpu_bind": "none"}},
             "each rank starts one OpenMP thread per CPU it may use: more threads than cores", ntasks=ranks),
    ]


def pitfall_cases(ranks: int = 2) -> list[Case]:
    """The hybrid pitfall and its three fixes for `ranks` ranks of one bound OpenMP thread each
    (fix 2: one rank with `ranks` threads)."""
    return [
        Case(PITFALL, {"binding": {"cpu_bind": "none"}, "omp": _BOUND_THREADS},
             "each rank's OpenMP runtime sees the same CPU mask and binds its thread to the first core", ntasks=ranks),
        Case(FIX, {"binding": {"cpu_bind": "cores"}, "omp": _BOUND_THREADS},
             "disjoint masks per rank: each runtime binds inside its own core", ntasks=ranks),
        Case(f"fix 2: one rank, {ranks} threads", {"binding": {"cpu_bind": "cores"}, "cpus_per_task": ranks,
                                                  "omp": {**_BOUND_THREADS, "num_threads": ranks}},
             "a single OpenMP runtime places all threads itself", ntasks=1),
        Case("fix 3: OpenMP does not bind (OMP_PROC_BIND=false)", {"binding": {"cpu_bind": "none"},
                                                                   "omp": {"num_threads": 1, "proc_bind": "false"}},
             "threads float; the Linux scheduler spreads them", ntasks=ranks),
    ]


# The pitfall's loss has two parts. Ranks on one core take turns: one core does the work of
# several. And each rank that finishes first waits in MPI_Barrier, which Open MPI busy-polls: the
# waiting rank keeps the core until the scheduler preempts it, while a rank that still has work
# cannot run. mpi_yield_when_idle=1 makes the polling rank call sched_yield, so the comparison of
# the four cases separates the two parts. Open MPI turns yielding on by itself only when its own
# launcher knows a node is oversubscribed (more ranks than slots); here the ranks do not exceed
# the cores, it is the OpenMP binding that stacks them, so no launcher can tell.
_YIELD = {"mpi_yield_when_idle": "1"}


def yield_cases(ranks: int = 2) -> list[Case]:
    """The pitfall and fix 1 again, with Open MPI yielding the core while it waits."""
    return [
        Case(PITFALL_YIELD, {"binding": {"cpu_bind": "none"}, "omp": _BOUND_THREADS, "mca": _YIELD},
             "the same shared core, but a rank waiting in MPI gives the core to the other one", ntasks=ranks),
        Case(FIX_YIELD, {"binding": {"cpu_bind": "cores"}, "omp": _BOUND_THREADS, "mca": _YIELD},
             "disjoint cores; yielding should change nothing here", ntasks=ranks),
    ]


# The two-rank lists (the lab's and the tests'; the notebook takes its rank count from the plan).
BINDING_CASES = binding_cases(2)
PITFALL_CASES = pitfall_cases(2)
YIELD_CASES = yield_cases(2)


def specs(cases: list[Case], size: int | None = None, reps: int = 20, repetitions: int = 3,
          experiment: str = "placement", node_size: int | None = None) -> list:
    """STREAM specs for the cases (each repeated `repetitions` times as separate jobs).

    size: doubles per array of each rank; or node_size: doubles per array of the whole job, split
    over each case's ranks (so a one-rank case and a two-rank case stream the same arrays in all,
    which is what a size rule about the node's last-level cache needs)."""
    if (size is None) == (node_size is None):
        raise HpclabError("give either size (per rank) or node_size (per job)", "e.g. node_size=plan.stream_elements")
    out = []
    for c in cases:
        n = size if size is not None else max(1000, -(-node_size // c.ntasks // 1000) * 1000)
        out.append(spec.make_spec(kernel="stream", ntasks=c.ntasks, args={"size": n, "reps": reps},
                                  label=c.label, repetitions=repetitions, experiment=experiment,
                                  **c.fields, **c.extra))
    return out


def binding_takeaway(rates: pd.DataFrame) -> str:
    """The takeaway of the figure of where each binding's ranks ran (job_rates() rows of the
    binding cases, the first run of each), built from their placement reports."""
    first = rates.drop_duplicates("label")
    shared = [str(label) for label, s in zip(first["label"], first["shared_cpu"]) if s]
    if not shared:
        return "One panel per binding, each rank's CPUs in its colour: every binding gave each thread a CPU of its own."
    return ("One panel per binding, each rank's CPUs in its colour. Two threads shared a CPU under: "
            + "; ".join(shared) + ". The others gave each thread a CPU of its own.")


def pitfall_specs(ranks: int, node_size: int, reps: int, rounds: int, experiment: str = "placement") -> list:
    """The in-cache pitfall experiment, for one experiment.run call: the pitfall, fix 1 and the
    pitfall with yielding, `rounds` runs each (their comparisons are decided: at least 4 rounds
    for 4 + 4 unpaired runs), then fixes 2 and 3 once (where they put the threads). Each case
    streams arrays of `node_size` doubles for the whole job, `reps` timed repetitions."""
    cases = pitfall_cases(ranks)
    decided = [cases[0], cases[1], yield_cases(ranks)[0]]
    return (specs(decided, node_size=node_size, reps=reps, repetitions=rounds, experiment=experiment)
            + specs(cases[2:], node_size=node_size, reps=reps, repetitions=1, experiment=experiment))


REGIMES = {"memory": "memory-resident: the node's arrays are at least 4x its last-level cache, so every "
                     "repetition streams from memory (STREAM's rule)",
           "cache": "in cache: the node's arrays fill at most a quarter of its last-level cache, so the "
                    "cores, not the memory, set the pace; each repetition is short"}


def regimes(plan: sizing.LessonPlan, ranks: int) -> "pd.DataFrame":
    """The two STREAM regimes of the lesson on this node, named for what they measure: doubles
    per array for the job (node_size) and per rank, one rank's three arrays in MB, the job's arrays
    as a multiple of the last-level cache, and what the regime is."""
    rows = []
    for name, memory in (("memory", True), ("cache", False)):
        node = plan.stream_elements if memory else plan.cache_elements
        per_rank = plan.stream_per_rank(ranks, memory)
        llc = plan.llc_bytes
        rows.append({"regime": name, "node_size": node, "per_rank": per_rank,
                     "rank_arrays_mb": plan.stream_bytes(ranks, memory) / 1e6,
                     "arrays_vs_llc": (3 * 8 * per_rank * ranks / llc) if llc else float("nan"),
                     "what": REGIMES[name] if memory is False or plan.stream_memory_resident
                     else "partly cached: memory cannot hold arrays of 4x the last-level cache"})
    return pd.DataFrame(rows).set_index("regime")


def numa_cases(node) -> list[Case]:
    """Local against remote memory on a node with several NUMA domains: one rank bound to the
    cores of a NUMA node, its memory bound to that node (local) or to another one (remote).
    node: a LessonPlan (hpclab.course.sizing.plan) or an hwloc Topology. Returns no cases on a
    single-NUMA node, where there is nothing to compare."""
    plan = node if isinstance(node, sizing.LessonPlan) else sizing.plan(node)
    if not plan.numa_measurable:
        return []
    local, remote = plan.numa_local, plan.numa_remote
    return [
        Case(f"memory on NUMA {local} (local)", {"binding": {"cpu_bind": "none"}, "omp": _ONE_THREAD,
                                                 "numactl": {"cpunodebind": str(local), "membind": str(local)}},
             "threads and memory on the same NUMA node", ntasks=1),
        Case(f"memory on NUMA {remote} (remote)", {"binding": {"cpu_bind": "none"}, "omp": _ONE_THREAD,
                                                   "numactl": {"cpunodebind": str(local), "membind": str(remote)}},
             "threads on one NUMA node, memory on another", ntasks=1),
    ]


# --- what the runs show, decided by the statistics and built from their numbers -------------------

def pitfall_comparisons(rates: pd.DataFrame) -> dict:
    """The pitfall's three comparisons on in-cache runs (job_rates() rows of PITFALL, FIX and
    PITFALL_YIELD): all in (fix 1 / the pitfall), the shared core alone (fix 1 / the pitfall
    with yielding: one core doing both ranks' work) and busy-polling (the pitfall with yielding /
    the pitfall: the core spent spinning in the barrier). Unpaired, each a phrases.Comparison."""
    return {"all in: fix 1 / the pitfall": comparison(rates, FIX, PITFALL, a_name="fix 1", b_name="the pitfall"),
            "the shared core: fix 1 / the pitfall with yielding":
                comparison(rates, FIX, PITFALL_YIELD, a_name="fix 1", b_name="the pitfall with yielding"),
            "busy-polling: the pitfall with / without yielding":
                comparison(rates, PITFALL_YIELD, PITFALL, a_name="the pitfall with yielding", b_name="the pitfall")}


def pitfall_text(rates: pd.DataFrame) -> str:
    """The takeaway of the pitfall's in-cache runs (job_rates() rows of PITFALL, FIX and
    PITFALL_YIELD), one sentence built from their medians: the loss as factors that multiply,
    when the statistics decided all three comparisons, else what they could not decide."""
    cmps = pitfall_comparisons(rates)
    open_ = [name.split(":")[0] for name, c in cmps.items() if c.outcome != "different"]
    if open_:
        return (f"These runs do not decide {' and '.join(open_)} (table above), so the loss is not split "
                "into factors here.")
    sp = _split(summary(rates))
    parts = {"the shared core": sp["sharing_factor"], "busy-polling in the barrier": sp["polling_factor"]}
    return f"{phrases.factors(sp['total_factor'], parts, what='between fix 1 and the pitfall')}."


def pitfall_figure_takeaway(rates: pd.DataFrame) -> str:
    """The one-sentence takeaway of the in-cache pitfall figure (job_bandwidth of these runs),
    built from the statistics' outcome on fix 1 against the pitfall."""
    cmp = comparison(rates, FIX, PITFALL, a_name="fix 1", b_name="the pitfall")
    if cmp.outcome == "different" and cmp.winner == "fix 1":
        head = (f"Fix 1's whole-job rate is {said(cmp)} than the pitfall's: one core did both ranks' work "
                "and spun in every barrier.")
    else:
        head = f"These runs do not show the pitfall's loss (fix 1 against the pitfall: {said(cmp)})."
    return head + " Hatched bars add each rank's best repetition, a rate no job reached."


def _split(summary_table: pd.DataFrame) -> dict:
    """hpclab.analysis.placement.pitfall_split of this lesson's cases (fix 1 with yielding when
    it was run, else fix 1 itself stands for a core of one's own)."""
    fy = FIX_YIELD if FIX_YIELD in summary_table.index else None
    return pitfall_split(summary_table, PITFALL, FIX, PITFALL_YIELD, fy)


# --- the claims this lesson tests, and their rows in the fidelity table ----------------------------

_PLACEMENT = "placement study 2018 (seed 002)"

HYBRID_PITFALL = Claim(
    "hybrid-pitfall",
    "Several ranks per node whose OpenMP threads are all bound to the same cores lose most of their "
    "performance; binding each rank to its own cores fixes it.",
    f"{_PLACEMENT}: on KNL with Intel OpenMP and the default srun binding, every rank's threads land "
    "on the same hardware threads (a massive load imbalance).")
NUMA = Claim(
    "numa",
    "Memory on a remote NUMA node is slower than local memory.",
    f"{_PLACEMENT}: on Broadwell with two NUMA domains, local memory about 60 % faster than remote.")

# What a bigger node shows where this one cannot (quoted, as the course cites it): the pitfall from
# memory, measured with this course's kernels and Open MPI 5.0.11 (mpirun, 3 runs each).
BIGGER_NODE = "a 16-core Xeon node, 2026-11-27, this course's kernels"
BIGGER_NODE_TRIAD = [  # (case, Triad GB/s lowest, highest of 3 runs)
    ("pitfall: 2 ranks x 8 threads, one core each", 27.3, 30.5),
    ("fix: mpirun --map-by slot:PE=8", 91.8, 98.1),
    ("16 ranks, one per core", 118.0, 124.0)]


def bigger_node() -> pd.DataFrame:
    """The pitfall from memory on a bigger node (quoted, BIGGER_NODE): case, Triad GB/s of its
    slowest and fastest run, and the source."""
    return pd.DataFrame([{"case": c, "Triad GB/s, lowest": lo, "highest": hi, "source": BIGGER_NODE}
                         for c, lo, hi in BIGGER_NODE_TRIAD]).set_index("case")


def pitfall_fidelity(rates: pd.DataFrame) -> dict:
    """The fidelity row "hybrid-pitfall": the seed's claim (several ranks whose OpenMP threads are
    bound to the same hardware threads lose most of their performance; --cpu-bind=cores fixes it)
    against ours.

    rates: job_rates() of PITFALL and FIX runs (and PITFALL_YIELD, whose factors then go into
    `why`) on in-cache arrays, where two ranks really take turns on one core and the loss stands
    far beyond this machine's noise. 'yes' when the statistics decide fix 1 higher and at least
    half of its bandwidth is lost ('most'); a smaller decided loss is 'partly'; no difference
    larger than the margin, or a faster pitfall, is 'no'; runs that cannot decide give 'not shown'
    (with the CI). From memory, the study's regime, the pitfall is not timed here: `here` says so
    and cites BIGGER_NODE. Returns here, reproduced, why, evidence, beyond_spread, lost and the
    medians."""
    cmp = comparison(rates, FIX, PITFALL, a_name="fix 1", b_name="the pitfall")
    lost = 1 - cmp.b.median / cmp.a.median
    pit = rates[rates["label"] == PITFALL]
    shared = f"in {int(pit['shared_cpu'].sum())} of {len(pit)} pitfall runs both ranks' threads reported one CPU"
    lo, hi = BIGGER_NODE_TRIAD[0][1:], BIGGER_NODE_TRIAD[1][1:]
    outcome = (f"fix 1's whole-job bandwidth is {said(cmp)} than the pitfall's" if cmp.outcome == "different"
               else f"fix 1 against the pitfall: {said(cmp)}")
    here = (f"in cache, 2 ranks: {outcome} ({cmp.a.n} + {cmp.b.n} runs); from memory not timed here "
            f"({BIGGER_NODE}: {hi[0]:g}-{hi[1]:g} against {lo[0]:g}-{lo[1]:g} GB/s)")
    if cmp.outcome == "different" and cmp.winner == "fix 1" and lost >= 0.5:
        verdict = "yes"
        why = f"the pitfall lost {phrases.pct(lost)} of fix 1's bandwidth, decided by the statistics; {shared}"
        if PITFALL_YIELD in set(rates["label"]):
            sp = _split(summary(rates))
            why += (f": one core did both ranks' work ({sp['sharing_factor']:.1f}x) and spun in the barrier "
                    f"({sp['polling_factor']:.1f}x)")
    elif cmp.outcome == "different" and cmp.winner == "fix 1":
        verdict, why = "partly", (f"the pitfall lost {phrases.pct(lost)} of fix 1's bandwidth, decided, but less "
                                  f"than the 'most' of the claim; {shared}")
    elif cmp.outcome in ("different", "equivalent"):
        verdict, why = "no", f"{cmp.sentence()} ({shared})"
    else:
        verdict, why = "not shown", f"{cmp.sentence()} ({shared})"
    return {"here": here, "reproduced": verdict, "why": why, "evidence": "measured",
            "beyond_spread": cmp.beyond_spread, "lost": float(lost),
            "fix_mb_s": cmp.a.median, "pitfall_mb_s": cmp.b.median}


def numa_fidelity(rates: pd.DataFrame, local: str, remote: str) -> dict:
    """The fidelity row "numa" from one-rank STREAM runs with memory bound to the local and to a
    remote NUMA node (job_rates() rows of the two cases `local` and `remote`, labels of
    numa_cases). 'yes' when the statistics decide local memory faster; 'no' when they decide no
    difference or remote faster; 'not shown' when the runs cannot decide."""
    cmp = comparison(rates, local, remote, a_name="local memory", b_name="remote memory")
    gain = cmp.a.median / cmp.b.median - 1
    if cmp.outcome == "different" and cmp.winner == "local memory":
        verdict, why = "yes", (f"local memory gave {phrases.pct(gain)} more bandwidth than remote, decided by the "
                               "statistics (the seed: about 60 %); remote reads cross the link between the NUMA nodes")
    elif cmp.outcome in ("different", "equivalent"):
        verdict, why = "no", f"the statistics decide against a faster local memory on this node: {said(cmp)}"
    else:
        verdict, why = "not shown", "these runs cannot decide between local and remote memory"
    return {"here": cmp.sentence(), "reproduced": verdict, "why": why, "evidence": "measured",
            "beyond_spread": cmp.beyond_spread, "local_gain": float(gain)}


def hybrid_pitfall(rates, runs=()) -> Row:
    """From notebook 03's in-cache pitfall runs (job_rates() of PITFALL, FIX and, optionally,
    PITFALL_YIELD, at least 4 runs each): the verdict is pitfall_fidelity's."""
    try:
        verdict = pitfall_fidelity(rates)
    except (KeyError, HpclabError) as e:
        return make_row(HYBRID_PITFALL.id, "-", "not shown", f"the pitfall runs are incomplete ({e})", runs)
    return from_verdict(HYBRID_PITFALL.id, verdict, runs)


def numa(node, rates=None, runs=()) -> Row:
    """From notebook 03: local against remote memory. node: the node's LessonPlan
    (hpclab.course.sizing.plan) or its hwloc Topology; rates: job_rates() of the runs of
    numa_cases (None when not run). With one NUMA node there is no remote memory: 'not shown',
    saying why and what the node measures instead; with several, the verdict comes from the
    measured runs (numa_fidelity)."""
    plan = node if isinstance(node, sizing.LessonPlan) else sizing.plan(node)
    if not plan.numa_measurable:
        return make_row(NUMA.id, f"{plan.numa_nodes} NUMA node (hwloc): every byte of memory is local, "
                        "so the notebook's STREAM runs measure local memory only", "not shown",
                        "with a single NUMA node there is no remote memory to bind to (numactl --membind has "
                        "one choice)")
    if rates is None or len(rates) == 0:
        return make_row(NUMA.id, f"{plan.numa_nodes} NUMA nodes (hwloc)", "not shown",
                        "the local vs remote runs were not made", runs)
    local, remote = (c.label for c in numa_cases(plan))
    try:
        verdict = numa_fidelity(rates, local, remote)
    except (KeyError, HpclabError) as e:
        return make_row(NUMA.id, "-", "not shown", f"the local/remote runs are incomplete ({e})", runs)
    return from_verdict(NUMA.id, verdict, runs)


# --- the lab's expected answers -------------------------------------------------------------------

# Rounds of each comparison in the lab: unpaired, 4 + 4 runs are the fewest that can reach the
# course's 95 % (hpclab.analysis.stats.min_runs).
LAB_ROUNDS = 4
# part 1: the two placements of (a) and (b), one run each (their placement reports are graded)
PLACED = ("distinct", "unbound")
# part 1 (c): the student's srun binding against --cpu-bind=none, one variable changed, LAB_ROUNDS
# rounds of one experiment.run call; part 2: the pitfall against fix 1, likewise
COMPARED = {"bound": tuple(f"bound-{i}" for i in range(1, LAB_ROUNDS + 1)),
            "unbound": tuple(f"unbound-{i}" for i in range(1, LAB_ROUNDS + 1))}
ROLES = {"pitfall": tuple(f"pitfall-{i}" for i in range(1, LAB_ROUNDS + 1)),
         "fix": tuple(f"fix-{i}" for i in range(1, LAB_ROUNDS + 1))}
# the answers (c) accepts: a winner when the statistics decide a difference, else their outcome
BINDING_ANSWERS = ("bound", "unbound", "equivalent", "undecided")


def binding_answer(cmp: phrases.Comparison) -> str:
    """(c)'s answer from the comparison of the bound runs (a) with the unbound ones (b): the
    winner when decided different, else 'equivalent' or 'undecided' (BINDING_ANSWERS)."""
    return cmp.winner if cmp.outcome == "different" else cmp.outcome


def reference(packed) -> dict:
    """The lab's expected answers from the runs a student packed (packed:
    hpclab.grading.labdata.Packed, verified): per placement of part 1 its binding, launcher and
    each rank's allowed CPUs; with (c)'s runs, their whole-job Triad rates, the one binding field
    they differ in and the statistics' answer (`faster_placement`); with the pitfall's runs, each
    case's median whole-job bandwidth (MB/s), whether ranks shared a CPU, and the fraction lost."""
    # each section of the lab packs its own runs: answers whose runs are not packed are left
    # out (their tests fail), the others are graded
    out: dict = {"binding": {}, "launcher": {}, "allowed": {}}
    for role in PLACED:
        if role not in packed.roles:
            continue
        run = packed.runs([role])[0]
        asked = run.folder.spec()
        out["binding"][role] = _binding(asked)
        out["launcher"][role] = asked.get("launcher") or "srun"
        # rank -> allowed CPUs, as the kernel reported them (JSON keys are strings)
        out["allowed"][role] = {str(p["rank"]): sorted(p["allowed"]) for p in run.result()["placement"]}
    compared = {k: [r for r in roles if r in packed.roles] for k, roles in COMPARED.items()}
    if all(compared.values()):
        # interpretation: did binding pay off? Every packed run's whole-job Triad rate of each side,
        # decided by the course's statistics (unpaired: a winner only when the CI of the ratio
        # excludes 1; 'equivalent' inside the 5 % margin; else 'undecided')
        rates, asked = {}, {}
        for option, roles in compared.items():
            runs = packed.runs(roles)
            rates[option] = [stream.best_rate(run.result(), "Triad") for run in runs]
            asked[option] = {(r.folder.spec().get("launcher") or "srun", str(_binding(r.folder.spec())))
                             for r in runs}
        cmp = phrases.compare(rates["bound"], rates["unbound"], a_name="bound", b_name="unbound",
                              quantity="whole-job Triad bandwidth", unit="MB/s", lower_is_better=False)
        out["triad_mb_s"] = rates
        out["compared_launchers"] = sorted({launcher for side in asked.values() for launcher, _ in side})
        out["faster_placement"] = [binding_answer(cmp)]
        out["faster_sentence"] = cmp.sentence()
    pitfall_roles = [r for case in ROLES.values() for r in case]
    if not set(pitfall_roles) <= set(packed.roles):
        return out
    runs = packed.runs(pitfall_roles)
    table = summary(job_rates(runs))
    bad, good = PITFALL, FIX
    out["job_mb_s"] = {"pitfall": float(table.loc[bad, "job_mb_s_median"]),
                       "fix": float(table.loc[good, "job_mb_s_median"])}
    out["shared_cpu"] = {"pitfall": bool(table.loc[bad, "shared_cpu"]),
                         "fix": bool(table.loc[good, "shared_cpu"])}
    out["lost"] = float(lost_fraction(table, bad, good))
    return out


def _binding(spec_doc: dict) -> dict:
    """The binding fields a spec (spec.json) set, without the ones nobody asked for."""
    return {k: v for k, v in (spec_doc.get("binding") or {}).items() if v is not None and k != "report_bindings"}


LESSON = register(Lesson("placement", "Placement: where ranks and threads run, and what memory bandwidth that costs",
                         ("03-placement.ipynb",), lab="lab-placement", claims=(HYBRID_PITFALL, NUMA),
                         reference=reference))
