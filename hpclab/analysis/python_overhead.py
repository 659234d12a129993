"""What Python costs per message: the mpi4py ping-pongs of notebook 90 against the C kernel's.

Tables in, tables and sentences out (hpclab/analysis floor): the rows engines measured with
the interactive lesson's pingpong_mpi4py (hpclab.course.lessons), the C runs' tables, their
difference per size, each size's comparison decided by hpclab.analysis.stats (the Python side's
timed loops against the C side's jobs, unpaired), and the answers to the notebook's questions,
worded from those decisions.
"""

from __future__ import annotations

from hpclab.analysis import phrases
from hpclab.core.errors import HpclabError

# A size's outcome, from stats.decide: a decided difference says which way; "same" is no
# difference larger than the margin (5 %); "undecided" is this machine's noise.
OUTCOMES = ("slower", "faster", "same", "undecided")


def decide(a: list[float], b: list[float]) -> str:
    """How the times `a` compare with `b` (us, unpaired, stats.decide through phrases.compare):
    'slower', 'faster', 'same' (within 5 %) or 'undecided'."""
    cmp = phrases.compare(a, b, quantity="time", unit="us")
    if cmp.outcome == "different":
        return "slower" if cmp.decision.ratio.estimate > 1 else "faster"
    return "same" if cmp.outcome == "equivalent" else "undecided"


def runs_by_size(tables: list) -> dict[int, list[float]]:
    """Several pingpong tables (the C kernel's repetitions, one job each) as {bytes: [t_usec of
    each run]}: one value per run, what decide() compares."""
    out: dict[int, list[float]] = {}
    for t in tables:
        for b, v in zip(t["bytes"], t["t_usec"]):
            out.setdefault(int(b), []).append(float(v))
    return out


def median_by_size(tables: list, label: str):
    """Several pingpong tables (e.g. the C kernel's repetitions, one run each) as one table with
    the median t_usec and mbytes_per_sec per message size, the fastest and slowest run's t_usec
    (t_usec_min, t_usec_max: the spread overhead() compares against); transport = label."""
    import pandas as pd

    if not tables:
        raise HpclabError("no pingpong tables to combine", "pass [run.table() for run in runs]")
    both = pd.concat(tables, ignore_index=True)
    out = both.groupby("bytes", as_index=False).agg(
        repetitions=("repetitions", "first"), t_usec=("t_usec", "median"),
        mbytes_per_sec=("mbytes_per_sec", "median"), runs=("t_usec", "size"),
        t_usec_min=("t_usec", "min"), t_usec_max=("t_usec", "max"))
    out["transport"] = label
    return out


def pingpong_table(rows: list[dict], label: str):
    """Rows from pingpong_mpi4py as a DataFrame with the columns of the C pingpong's table
    (bytes, repetitions, t_usec, mbytes_per_sec), transport = label, and t_usec_trials (the timed
    loops of each size, when the rows have them)."""
    import pandas as pd

    if not rows:
        raise HpclabError("no pingpong rows", "take the result of rank 0 (engine 0)")
    cols = ["bytes", "repetitions", "t_usec", "mbytes_per_sec"] + (["t_usec_trials"] if "t_usec_trials" in rows[0] else [])
    table = pd.DataFrame(rows)[cols]
    table["transport"] = label
    return table


def overhead(c_table, py_tables: dict, c_runs: dict | None = None):
    """Python's cost per message, measured: for every size both sides measured, the C time, each
    Python variant's time (us) and the difference (us) and ratio to C.

    c_table: the C pingpong's table (bytes, t_usec, and t_usec_min / t_usec_max when it combines
    several runs, as median_by_size gives); py_tables: {name: pingpong_table(...)}; c_runs:
    runs_by_size of the C runs. With c_runs and the Python tables' t_usec_trials, `{name}_vs_C`
    is each size's decision (decide: Python's loops against C's jobs), and every Python variant
    after the first gets `{name}_vs_{first}` the same way. A 'faster' Python means the two
    measurements differ in something besides Python, never that Python is cheaper.
    Returns a DataFrame with one row per size."""
    spread = [c for c in ("t_usec_min", "t_usec_max") if c in c_table]
    out = c_table[["bytes", "t_usec", *spread]].rename(
        columns={"t_usec": "C_us", "t_usec_min": "C_min_us", "t_usec_max": "C_max_us"})
    trials = {}
    for name, tab in py_tables.items():
        part = tab[["bytes", "t_usec"]].rename(columns={"t_usec": f"{name}_us"})
        out = out.merge(part, on="bytes", how="inner")
        out[f"{name}_extra_us"] = out[f"{name}_us"] - out["C_us"]
        out[f"{name}_x_C"] = out[f"{name}_us"] / out["C_us"]
        if "t_usec_trials" in tab:
            trials[name] = {int(b): list(t) for b, t in zip(tab["bytes"], tab["t_usec_trials"])}
    if out.empty:
        raise HpclabError("the C and Python pingpongs share no message size",
                          "run both with the same sizes (powers of two from 1 byte)")
    sizes = [int(b) for b in out["bytes"]]
    if c_runs:
        for name, by in trials.items():
            out[f"{name}_vs_C"] = [decide(by[b], c_runs[b]) for b in sizes]
    names = list(trials)
    for name in names[1:]:
        out[f"{name}_vs_{names[0]}"] = [decide(trials[name][b], trials[names[0]][b]) for b in sizes]
    return out.sort_values("bytes").reset_index(drop=True)


def _from_on(table, col: str, keep) -> int | None:
    """The smallest size (bytes > 0) from which every larger size's `col` satisfies keep(outcome)."""
    rows = table[table["bytes"] > 0].sort_values("bytes")
    first = None
    for b, v in zip(rows["bytes"], rows[col]):
        first = (first if first is not None else int(b)) if keep(v) else None
    return first


def overhead_answers(table, buffer: str = "mpi4py buffer", pickle: str = "mpi4py pickle") -> list[str]:
    """The three questions notebook 90 asks of overhead(), answered from its decisions: is the
    small-message cost constant per message (sizes up to 1 KiB where the buffer path is decided
    slower than C), at which sizes pickling is decided slower than the buffer path (and how its
    extra grows), and from which size on the buffer path is no longer decided slower than C.
    Returns sentences."""
    out = []
    vs_c, vs_buf = f"{buffer}_vs_C", f"{pickle}_vs_{buffer}"
    small = table[(table["bytes"] > 0) & (table["bytes"] <= 1024)]
    small = small[small[vs_c] == "slower"] if vs_c in small else small
    if len(small) >= 2:
        lo, hi = small.iloc[0], small.iloc[-1]
        grows = hi[f"{buffer}_extra_us"] > 1.5 * max(lo[f"{buffer}_extra_us"], 1e-9)
        out.append(f"Small messages: the buffer path adds {lo[f'{buffer}_extra_us']:.2f} us at {int(lo['bytes'])} B "
                   f"and {hi[f'{buffer}_extra_us']:.2f} us at {int(hi['bytes'])} B: "
                   + ("it grows with size." if grows else "about constant per message, like a latency."))
    else:
        out.append("Small messages: too few sizes where Python was decided slower than C to tell.")
    pos = table[table["bytes"] > 0]
    worse = pos[pos[vs_buf] == "slower"] if vs_buf in pos else pos.iloc[0:0]
    if len(worse):
        first, last = worse.iloc[0], worse.iloc[-1]
        grows = (f", its extra growing from {first[f'{pickle}_extra_us']:.1f} us at {int(first['bytes'])} B to "
                 f"{last[f'{pickle}_extra_us']:.1f} us at {int(last['bytes'])} B" if len(worse) > 1 else "")
        out.append(f"Pickling is decided slower than the buffer path at {len(worse)} of {len(pos)} sizes{grows}: "
                   "each side copies the object into and out of a byte string.")
    else:
        out.append("Pickling is decided slower than the buffer path at no size measured.")
    if vs_c not in table:
        return out + ["Without the C runs' spread, no size's comparison with C is decided."]
    cheap = _from_on(table, vs_c, lambda v: v != "slower")
    if cheap is None:
        out.append("The buffer path is decided slower than C at the largest sizes too: keep inner loops in C here.")
        return out
    tail = table[table["bytes"] >= cheap][vs_c].value_counts()
    counts = ", ".join(f"{int(tail[k])} {k}" for k in ("same", "undecided", "faster") if k in tail)
    out.append(f"From {cheap} B on the buffer path is no longer decided slower than C ({counts}): for such "
               "messages a Python loop costs little; below, every message pays Python's per-call cost.")
    return out


def latency_takeaway(table, buffer: str = "mpi4py buffer", pickle: str = "mpi4py pickle") -> str:
    """The takeaway of the latency and bandwidth figure (at most 40 words), from overhead()'s
    table: one-way times at the smallest and the largest non-zero size, C against each Python
    style, and whether the buffer path's ratio to C fades (below 1.2x) at the largest size."""
    pos = table[table["bytes"] > 0].sort_values("bytes")
    lo, hi = pos.iloc[0], pos.iloc[-1]
    num = lambda v: f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    fmt = lambda r: f"{num(r['C_us'])}, {num(r[f'{buffer}_us'])} and {num(r[f'{pickle}_us'])} us"
    fades = hi[f"{buffer}_x_C"] < 1.2
    return (f"One way, C, buffers and pickling take {fmt(lo)} at {int(lo['bytes'])} B; {fmt(hi)} at "
            f"{int(hi['bytes'])} B: Python's cost is per message, "
            + ("and fades as messages grow." if fades else "and stays as messages grow."))


def overhead_takeaway(table, buffer: str = "mpi4py buffer", pickle: str = "mpi4py pickle") -> str:
    """The takeaway of the overhead figure (at most 40 words): at how many sizes each Python style
    is decided slower than C (the filled points), and what the hollow ones are."""
    pos = table[table["bytes"] > 0]
    n = lambda name: int((pos[f"{name}_vs_C"] == "slower").sum()) if f"{name}_vs_C" in pos else 0
    return (f"Filled points: decided slower than C ({n(buffer)} of {len(pos)} sizes with buffers, {n(pickle)} "
            "pickled). Hollow: the same within 5 %, undecided, or faster, which means different memory traffic, "
            "not a saving.")

