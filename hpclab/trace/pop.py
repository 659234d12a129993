"""The POP metrics of a scaling study: efficiencies per rank count, the smallest count as reference.

The POP Centre of Excellence's hierarchy (every factor a fraction, 1 = perfect, 0.8 the usual
line between fine and worth fixing):

    global efficiency        = parallel efficiency x computation scalability
    parallel efficiency      = load balance x communication efficiency
    communication efficiency = serialisation x transfer
    computation scalability  = instruction scalability x IPC scalability x frequency scalability

The parallel half comes from each run's five-part split (hpclab.trace.split: load balance =
mean/max compute, serialisation = max compute / T_ideal, transfer = T_ideal / T_real). The
computational half compares the useful computation (the sum over ranks of compute time) with the
reference's: computation scalability = sum comp(ref) / sum comp(P). Its factors need counters:
instruction scalability = instructions(ref) / instructions(P) (callgrind counts them exactly;
perf where the node has a PMU), IPC scalability = IPC(P) / IPC(ref) and frequency scalability =
(cycles / compute time)(P) over the reference's, both from cycles. A factor whose counts are
missing is NaN in the table and its reason is in `table.attrs["not available"]`.

Strong scaling is assumed (the same problem at every rank count), as in POP's reports.
"""

from __future__ import annotations

import math

import pandas as pd

from hpclab.core.errors import HpclabError
from hpclab.trace.split import Split

GOOD = 0.8  # POP's line between an efficiency that is fine and one worth fixing

# (row label, indent): the hierarchy as POP's reports print it
METRICS = (
    ("global efficiency", 0),
    ("parallel efficiency", 1),
    ("load balance", 2),
    ("communication efficiency", 2),
    ("serialisation", 3),
    ("transfer", 3),
    ("computation scalability", 1),
    ("instruction scalability", 2),
    ("IPC scalability", 2),
    ("frequency scalability", 2),
)


def pop_table(splits: dict[int, Split], instructions: dict[int, float] | None = None,
              cycles: dict[int, float] | None = None, counter_source: str = "",
              no_counters_reason: str = "", no_cycles_reason: str = "") -> pd.DataFrame:
    """The POP table of a scaling study.

    splits: rank count -> the five-part split of that run (compute in ns, CPU time where traced).
    instructions / cycles: rank count -> the run's total over all ranks (of the solver's compute;
    both from the same tool, named by counter_source, e.g. 'callgrind' or 'perf stat').
    no_counters_reason: why a factor is missing (e.g. "perf: cycles not supported on this VM");
    no_cycles_reason, when given: why the cycle-based factors are missing (instructions may be there).
    Returns metrics as rows (METRICS order) and rank counts as columns; attrs: 'reference' (the
    smallest count), 'sources' and 'not available' (metric -> reason)."""
    if not splits:
        raise HpclabError("the scaling study has no traced runs", "trace the same problem at two or more rank counts")
    counts = sorted(splits)
    ref = counts[0]
    useful = {p: splits[p].T_comp * splits[p].nranks for p in counts}
    if useful[ref] <= 0:
        raise HpclabError(f"the reference run ({ref} ranks) has no compute time", "is its trace empty?")
    cols = {}
    missing: dict[str, str] = {}
    for p in counts:
        s = splits[p]
        comp_scal = useful[ref] / useful[p] if useful[p] else math.nan
        ins = _ratio(instructions, ref, p)
        ipc = freq = math.nan
        if instructions and cycles and all(k in cycles and k in instructions for k in (ref, p)):
            ipc_ref = instructions[ref] / cycles[ref]
            ipc = (instructions[p] / cycles[p]) / ipc_ref
            freq = (cycles[p] / useful[p]) / (cycles[ref] / useful[ref])
        parallel = s.load_balance * s.serialisation * s.transfer
        cols[p] = {
            "global efficiency": parallel * comp_scal,
            "parallel efficiency": parallel,
            "load balance": s.load_balance,
            "communication efficiency": s.serialisation * s.transfer,
            "serialisation": s.serialisation,
            "transfer": s.transfer,
            "computation scalability": comp_scal,
            "instruction scalability": ins,
            "IPC scalability": ipc,
            "frequency scalability": freq,
        }
    if not instructions:
        missing["instruction scalability"] = no_counters_reason or "no instruction counts were given"
    if not cycles:
        reason = no_cycles_reason or no_counters_reason or "no cycle counts were given"
        missing["IPC scalability"] = reason
        missing["frequency scalability"] = reason
    table = pd.DataFrame(cols).reindex([m for m, _ in METRICS])
    table.columns.name = "ranks"
    table.attrs.update(reference=ref, sources={"parallel": "trace replay (hpclab.trace.split)",
                                               "counters": counter_source or "-"},
                       **{"not available": missing})
    return table


def _ratio(counts: dict[int, float] | None, ref: int, p: int) -> float:
    if not counts or ref not in counts or p not in counts or not counts[p]:
        return math.nan
    return counts[ref] / counts[p]


def labelled(table: pd.DataFrame) -> pd.DataFrame:
    """The table with POP's indentation in its row labels, for printing."""
    indent = dict(METRICS)
    out = table.copy()
    out.index = ["  " * indent[m] + m for m in table.index]
    return out


def leaves(table: pd.DataFrame, ranks: int | None = None) -> list[str]:
    """The factors POP reads at the bottom of its hierarchy at `ranks`: load balance, serialisation,
    transfer and the computation factors (the computation scalability standing in for its factors
    when they are not all known)."""
    p = ranks if ranks is not None else max(table.columns)
    factors = ["instruction scalability", "IPC scalability", "frequency scalability"]
    known = [f for f in factors if not math.isnan(table.loc[f, p])]
    return ["load balance", "serialisation", "transfer"] + (known if len(known) == len(factors)
                                                              else ["computation scalability"])


def worst(table: pd.DataFrame, ranks: int | None = None) -> tuple[str, float]:
    """The lowest leaf factor at `ranks` (default: the largest count): where POP looks first."""
    p = ranks if ranks is not None else max(table.columns)
    col = table.loc[leaves(table, p), p]
    return str(col.idxmin()), float(col.min())
