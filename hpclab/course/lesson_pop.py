"""The POP lesson (notebook 07): a traced strong-scaling study of the Poisson solver, its POP table
with instruction counts, and the critical path of its largest run.

Which runs: the same problem at the node plan's rank counts (hpclab.course.sizing.plan:
scaling_ranks, each rank on a core of its own, so the split holds no time switched out), each
traced and repeated; the same problem at each count under callgrind for the instructions
(hpclab.tools.counters: exact, so one run per count suffices). The table is hpclab.trace.pop's,
the figures hpclab.plots.pop's; every sentence about the numbers comes from
hpclab.analysis.phrases.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from hpclab.analysis import phrases
from hpclab.analysis.imbalance import ideal_model
from hpclab.core.errors import HpclabError
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


@dataclass
class Study:
    """The traced runs of a study: per rank count, every repetition's split, and the run whose T_real
    is the median (the one the table uses)."""

    splits: dict[int, list[Split]]
    median_run: dict[int, object]
    model_name: str

    def table_splits(self) -> dict[int, Split]:
        out = {}
        for p, ss in self.splits.items():
            order = sorted(ss, key=lambda s: s.T_real)
            out[p] = order[len(order) // 2]
        return out

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
        runs_by.setdefault(s.nranks, []).append((s.T_real, r))
    median = {p: sorted(v, key=lambda x: x[0])[len(v) // 2][1] for p, v in runs_by.items()}
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


def verdicts(tbl: pd.DataFrame, study: Study) -> str:
    """Markdown: each factor at the largest count against POP's line, the lowest factor, and how
    far the repetitions spread, all from the numbers."""
    p = max(tbl.columns)
    lines = [f"At **{p} ranks** (reference {tbl.attrs['reference']}), against POP's line of {pop.GOOD}:"]
    for metric, indent in pop.METRICS:
        v = tbl.loc[metric, p]
        if pd.isna(v):
            continue
        side = "at or above the line: fine" if v >= pop.GOOD else "below the line: worth fixing"
        lines.append(f"{'  ' * indent}- {metric} **{v:.2f}** ({side})")
    if len(tbl.columns) > 1:
        name, value = pop.worst(tbl, p)
        lines.append(f"\nThe lowest factor is **{name}** ({value:.2f}): where POP's method says to look first.")
    comp, ins = tbl.loc["computation scalability", p], tbl.loc["instruction scalability", p]
    if comp > 1.02 and not pd.isna(ins) and abs(ins - 1) <= 0.02:
        lines.append(f"\nThe computation scalability is above 1 ({comp:.2f}) while the instructions stayed the same "
                     f"({ins:.2f}): the same instructions took less compute time on {p} ranks, so each ran in fewer "
                     "cycles or at a higher clock (a smaller subdomain per rank can stay in a faster cache); the IPC "
                     "and frequency factors that would tell which are not measured here.")
    sp = study.parallel_spread()
    if p in sp.index and sp.loc[p, "runs"] > 1:
        lines.append(f"\nParallel efficiency at {p} ranks over {int(sp.loc[p, 'runs'])} repetitions: "
                     f"{sp.loc[p, 'min']:.2f}-{sp.loc[p, 'max']:.2f} (the table shows the run with the median T_real).")
    missing = tbl.attrs.get("not available", {})
    for metric, reason in missing.items():
        lines.append(f"\n*{metric}* is not shown: {reason}.")
    return "\n".join(lines)


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
    prediction) and a markdown summary built from both."""
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
    text = [f"The critical path is {phrases.pct(path.length_ns / path.T_real)} of T_real; rank {lead} holds "
            f"{phrases.pct(by_rank.loc[lead, 'share of path'])} of it."]
    if vs["same"]:
        text.append(f"Its leading rank is also the rank with the most compute (rank {vs['busiest_rank']}): "
                    "here the load imbalance and the critical path give the same answer.")
    else:
        text.append(f"The rank with the most compute is rank {vs['busiest_rank']}, but the path's leading rank is "
                    f"rank {vs['path_leader']}: the run waits for that rank's compute, so that is the one to shorten.")
    if len(sav):
        r0 = sav.index[0]
        text.append(f"A replay on the network model '{model.name}' (a prediction) says that {phrases.pct(fraction)} less compute on "
                    f"rank {r0} would save {phrases.pct(sav.loc[r0, 'replayed saving of run'])} of the run "
                    f"(replayed on the ranks' CPU time: {sav.loc[r0, 'replayed saving ns'] / 1e6:.3f} ms; the path's "
                    f"bound, {phrases.pct(fraction)} of that rank's compute on the measured timeline: "
                    f"{sav.loc[r0, 'bound ns'] / 1e6:.3f} ms, which counts time the rank was switched out too).")
    return path, sav, " ".join(text)
