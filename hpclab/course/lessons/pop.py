"""The POP lesson (notebook 07, lab-pop): a traced strong-scaling study of the Poisson solver, its
POP table with instruction counts, and the critical path of its largest run.

Which runs: the same problem at the node plan's rank counts (hpclab.course.sizing.plan:
scaling_ranks, each rank on a core of its own, so the split holds no time switched out), each
traced and repeated; the same problem at each count under callgrind for the instructions
(hpclab.tools.counters: exact, so one run per count suffices). The table is hpclab.trace.pop's,
the figures hpclab.plots.pop's; every sentence about the numbers comes from
hpclab.analysis.phrases. Its lab's expected answers: `reference`, POP's factors of the runs a
student packed, by role. It tests no claim of the seeds.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from hpclab.analysis import phrases
from hpclab.analysis.imbalance import ideal_model
from hpclab.core.errors import HpclabError
from hpclab.course.lessons import Lesson, register
from hpclab.course.quiz import accepted
from hpclab.site import ompi
from hpclab.spec import model as spec
from hpclab.tools import counters
from hpclab.trace import critical_path as cp
from hpclab.trace import pop
from hpclab.trace.load import load_run
from hpclab.trace.replay import replay
from hpclab.trace.split import Split, split

EXPERIMENT = "07-pop"


def rank_counts(plan, partition_cores: int) -> list[int]:
    """The study's rank counts: the plan's scaling counts that fit on one node of the partition
    with a core each (at least [1, 2] when two cores are there)."""
    counts = [r for r in plan.scaling_ranks if r <= partition_cores]
    if not counts:
        raise HpclabError(f"no rank count of the plan ({plan.scaling_ranks}) fits the partition's {partition_cores} cores",
                          "check the site profile's cores_per_node")
    return counts


def study_specs(counts: list[int], n: int, iters: int, repetitions: int = 3, heavy: float | None = None) -> list:
    """Traced Poisson specs of one problem (n x n, iters sweeps) at each count, a 1D Px1 grid bound to
    cores; heavy: the first rank gets that many times the rows of the others (a load imbalance)."""
    out = []
    for p in counts:
        args = {"n": n, "iters": iters, "grid": f"{p}x1", "exchange": "sendrecv"}
        if heavy and p > 1:
            args["heavy"] = heavy
        out.append(spec.make_spec(kernel="poisson", ntasks=p, args=args, trace=True, repetitions=repetitions,
                                  binding={"cpu_bind": "cores"}, experiment=EXPERIMENT,
                                  label=f"{p} rank(s)" + (f", rank 0 x{heavy:g} rows" if heavy and p > 1 else "")))
    return out


def median_index(values: list[float]) -> int:
    """The index of the median of `values` (the lower middle one for an even count): the run a
    table shows, so that the number it shows is the median of the runs, not their minimum."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    return order[(len(order) - 1) // 2]


@dataclass
class Study:
    """The traced runs of a study: per rank count, every repetition's split, and the run whose
    parallel efficiency is the median of its count's runs (the one the table shows, so its
    parallel efficiency is the median parallel_spread reports)."""

    splits: dict[int, list[Split]]
    median_run: dict[int, object]
    model_name: str

    def table_splits(self) -> dict[int, Split]:
        return {p: ss[median_index([s.parallel for s in ss])] for p, ss in self.splits.items()}

    def parallel_spread(self) -> pd.DataFrame:
        """Per rank count: min, median and max of parallel efficiency over the repetitions."""
        rows = []
        for p, ss in sorted(self.splits.items()):
            sp = phrases.Spread.of([s.parallel for s in ss])
            rows.append({"ranks": p, "runs": sp.n, "min": sp.min, "median": sp.median, "max": sp.max})
        return pd.DataFrame(rows).set_index("ranks")


def analyse(runs) -> Study:
    """Load each run's trace, replay it on the ideal network with this machine's eager limit
    (rendezvous kept, as notebook 05 does) and split it."""
    try:
        eager = ompi.eager_limit()
    except HpclabError:
        eager = None
    ideal = ideal_model(eager)
    splits: dict[int, list[Split]] = {}
    runs_by: dict[int, list] = {}
    for r in runs:
        trace = load_run(r.path)
        s = split(trace, replay(trace, ideal))
        splits.setdefault(s.nranks, []).append(s)
        runs_by.setdefault(s.nranks, []).append(r)
    median = {p: runs_by[p][median_index([s.parallel for s in ss])] for p, ss in splits.items()}
    return Study(splits, median, ideal.name)


def instruction_counts(counts: list[int], n: int, iters: int) -> dict[int, counters.InstructionCounts]:
    """callgrind's counts of the same problem at each rank count (one run each: counts are exact)."""
    return {p: counters.count(n, iters, p, experiment=EXPERIMENT) for p in counts}


def table(study: Study, counted: dict[int, counters.InstructionCounts] | None = None) -> pd.DataFrame:
    """POP's table of the study (median run per count), with instruction scalability from `counted`."""
    instructions = {p: c.useful for p, c in (counted or {}).items()}
    return pop.pop_table(study.table_splits(), instructions=instructions or None,
                         counter_source="callgrind (solve loop's compute phases)" if instructions else "",
                         no_counters_reason="instructions were not counted for this table",
                         no_cycles_reason=counters.cycles_status())


def shown_digits(tbl: pd.DataFrame, ranks: int | None = None, most: int = 3) -> int:
    """Decimals to show the table's factors with (2, up to `most`): enough that the lowest leaf
    factor at `ranks` (default the largest count) differs from the next one as shown, so a
    learner can tell which is lowest from the numbers on the page; 2 when even `most` decimals
    do not separate them (look_first then offers them as one option)."""
    p = ranks if ranks is not None else max(tbl.columns)
    vals = sorted(float(tbl.loc[f, p]) for f in pop.leaves(tbl, p))
    for d in range(2, most + 1):
        if len(vals) < 2 or round(vals[0], d) != round(vals[1], d):
            return d
    return 2   # equal even with `most` decimals: shown with two, and one option in look_first


def look_first(tbl: pd.DataFrame, ranks: int | None = None) -> tuple[list[str], str, str]:
    """The quiz on where POP's method looks first, answerable from the numbers shown: (options,
    answer, the lowest value as shown). Options are the leaf factors at `ranks` (default the
    largest count); leaves tied with the lowest at shown_digits are one option ('load balance or
    transfer'), the answer."""
    p = ranks if ranks is not None else max(tbl.columns)
    d = shown_digits(tbl, p)
    shown = {f: round(float(tbl.loc[f, p]), d) for f in pop.leaves(tbl, p)}
    low = min(shown.values())
    tied = [f for f, v in shown.items() if v == low]
    answer = " or ".join(tied)
    options = [answer] + [f for f in shown if f not in tied]
    return options, answer, f"{low:.{d}f}"


def verdicts(tbl: pd.DataFrame, study: Study) -> str:
    """Markdown under the POP figure, from the numbers: its takeaway (the lowest leaf factor at the
    largest count, with shown_digits decimals, against POP's line), which run the table shows
    (the median parallel efficiency, with the runs' spread), and what a computation scalability
    above 1 with unchanged instructions means. The factors themselves are in the figure."""
    p = max(tbl.columns)
    d = shown_digits(tbl, p)
    lines = []
    if len(tbl.columns) > 1:
        _, name, value = look_first(tbl, p)
        side = ("below POP's line of 0.8: where its method looks first" if float(value) < pop.GOOD else
                "at or above POP's line of 0.8: no factor stands out")
        lines.append(f"At **{p} ranks** the lowest factor is **{name}** ({value}), {side}.")
    sp = study.parallel_spread()
    if p in sp.index and sp.loc[p, "runs"] > 1:
        lines.append(f"The table shows the run whose parallel efficiency is the median of {int(sp.loc[p, 'runs'])} "
                     f"({sp.loc[p, 'median']:.{d}f}; the runs span {sp.loc[p, 'min']:.2f}-{sp.loc[p, 'max']:.2f}).")
    comp, ins = tbl.loc["computation scalability", p], tbl.loc["instruction scalability", p]
    if comp > 1.02 and not pd.isna(ins) and abs(ins - 1) <= 0.02:
        lines.append(f"The computation scalability is above 1 ({comp:.2f}) while the instructions stayed the same "
                     f"({ins:.2f}): each instruction took fewer cycles or a faster clock on {p} ranks (a smaller "
                     "subdomain can stay in a faster cache); the factors that would tell which are not measured here.")
    return "\n\n".join(lines)


def study_plan(plan, counts: list[int]) -> str:
    """Notebook 07's plan on this machine, in one sentence (said once): cores, NUMA nodes and the
    study's rank counts, a core each."""
    numa = f"{plan.numa_nodes} NUMA node{'s' if plan.numa_nodes != 1 else ''}"
    ranks = " and ".join([", ".join(map(str, counts[:-1])), str(counts[-1])] if len(counts) > 1 else [str(counts[0])])
    return (f"This machine: {plan.cores} cores, {numa}. The study runs {ranks} rank{'s' if counts[-1] > 1 else ''}, "
            "each on a core of its own.")


def instruction_sentence(counted: dict[int, counters.InstructionCounts]) -> str:
    """How the solve loop's instructions grow with the rank count, from callgrind's counts."""
    counts = sorted(counted)
    ref = counted[counts[0]].useful
    parts = [f"{p} rank(s): {counted[p].useful / 1e6:.2f} M" for p in counts]
    big = counts[-1]
    extra = counted[big].useful / ref - 1
    head = f"Instructions of the solve loop (callgrind, all ranks together): {', '.join(parts)}; at {big} ranks "
    if extra > 0.005:
        return (head + f"{phrases.pct(extra)} more than on {counts[0]} rank(s). callgrind counts are exact, so "
                "this is not noise: it is work the decomposition adds (halo rows packed and unpacked, more "
                "loop start-ups for the same points).")
    if extra < -0.005:
        return head + (f"{phrases.pct(-extra)} fewer than on {counts[0]} rank(s). callgrind counts are exact, so "
                       "this is not noise: read the per-phase table to see which phase lost instructions.")
    return head + f"the same as on {counts[0]} rank(s) to within 0.5 % (callgrind counts are exact)."


def path_story(trace, fraction: float = 0.1, model=None) -> tuple[cp.CriticalPath, pd.DataFrame, str]:
    """The critical path of `trace`, what `fraction` less compute on its leading ranks would save
    (replayed on `model`, default the ideal network with this machine's eager limit: a
    prediction) and the figure's takeaway built from both (at most 40 words)."""
    if model is None:
        try:
            eager = ompi.eager_limit()
        except HpclabError:
            eager = None
        model = ideal_model(eager)
    ideal = model
    path = cp.critical_path(trace)
    sav = cp.savings(trace, path, ideal, fraction=fraction)
    vs = cp.against_imbalance(trace, path)
    by_rank = path.by_rank()
    lead = by_rank.index[0]
    text = [f"The critical path covers {phrases.pct(path.length_ns / path.T_real)} of T_real; rank {lead} holds "
            f"{phrases.pct(by_rank.loc[lead, 'share of path'])} of it"
            + (", and computes most." if vs["same"] else
               f", though rank {vs['busiest_rank']} computes most: the run waits for rank {lead}.")]
    if len(sav):
        r0 = sav.index[0]
        text.append(f"With {phrases.pct(fraction)} less compute on rank {r0}, a replay on '{model.name}' (a prediction) "
                    f"makes the run {phrases.pct(sav.loc[r0, 'replayed saving of run'])} shorter.")
    return path, sav, " ".join(text)


# --- the lab's expected answers -------------------------------------------------------------------

def reference(packed) -> dict:
    """The lab's expected answers from the runs a student packed (packed:
    hpclab.grading.labdata.Packed, verified: roles np1 and np2, traced Poisson on one and two
    ranks): POP's factors of the two-rank run (shares of one) and where to look first, the lowest
    leaf factor (every factor too close to call accepted)."""
    splits = {}
    for role in ("np1", "np2"):
        trace = load_run(packed.run_dir(role), cache=False)
        splits[trace.nranks] = split(trace)
    table = pop.pop_table(splits)
    two = max(table.columns)
    col = table[two]
    factors = {name: float(col[name]) for name in ("load balance", "serialisation", "transfer",
                                                    "computation scalability")}
    # interpretation: the lowest leaf factor; factors are shares of run time, and the split cannot
    # place the time a rank was switched out while computing, so factors closer to the lowest than
    # that share of T_real (the larger of the two runs') are accepted too
    noise = max(float(s.T_off_cpu) / s.T_real if s.T_real and s.T_off_cpu > 0 else 0.0 for s in splits.values())
    return {"load_balance": float(col["load balance"]), "serialisation": float(col["serialisation"]),
            "transfer": float(col["transfer"]), "parallel_efficiency": float(col["parallel efficiency"]),
            "computation_scalability": float(col["computation scalability"]),
            "global_efficiency": float(col["global efficiency"]), "factors": factors, "noise": noise,
            "look_first": accepted(factors, {k: noise / 2 for k in factors}, best=min)}


LESSON = register(Lesson("pop", "The POP method: efficiency factors and the critical path of a scaling study",
                         ("07-pop-method.ipynb",), lab="lab-pop", reference=reference))
