"""What Python costs per message: the mpi4py ping-pongs of notebook 90 against the C kernel's.

Tables in, tables and sentences out (hpclab/analysis floor): the rows engines measured with
hpclab.course.lesson_interactive.pingpong_mpi4py, the C runs' tables, their difference per size,
and the answers to the notebook's questions, worded from those numbers.
"""

from __future__ import annotations

from hpclab.core.errors import HpclabError


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
    (bytes, repetitions, t_usec, mbytes_per_sec) and transport = label."""
    import pandas as pd

    if not rows:
        raise HpclabError("no pingpong rows", "take the result of rank 0 (engine 0)")
    table = pd.DataFrame(rows)[["bytes", "repetitions", "t_usec", "mbytes_per_sec"]]
    table["transport"] = label
    return table


def overhead(c_table, py_tables: dict):
    """Python's cost per message, measured: for every size both sides measured, the C time,
    each Python variant's time (us) and the difference (us) and ratio to C.

    c_table: the C pingpong's table (bytes, t_usec, and t_usec_min / t_usec_max when it combines
    several runs, as median_by_size gives); py_tables: {name: pingpong_table(...)}.
    Returns a DataFrame with one row per size. With the C runs' spread, `{name}_vs_C` says whether
    the Python time lies above every C run ("slower"), inside their spread ("within C's spread":
    the extra is not resolved) or below every C run ("faster": a negative extra, which means the
    two measurements differ in something besides Python, never that Python is cheaper)."""
    import numpy as np
    import pandas as pd

    spread = [c for c in ("t_usec_min", "t_usec_max") if c in c_table]
    out = c_table[["bytes", "t_usec", *spread]].rename(
        columns={"t_usec": "C_us", "t_usec_min": "C_min_us", "t_usec_max": "C_max_us"})
    for name, tab in py_tables.items():
        part = tab[["bytes", "t_usec"]].rename(columns={"t_usec": f"{name}_us"})
        out = out.merge(part, on="bytes", how="inner")
        out[f"{name}_extra_us"] = out[f"{name}_us"] - out["C_us"]
        out[f"{name}_x_C"] = out[f"{name}_us"] / out["C_us"]
        if len(spread) == 2:
            t = out[f"{name}_us"]
            out[f"{name}_vs_C"] = np.select([t > out["C_max_us"], t < out["C_min_us"]],
                                            ["slower", "faster"], "within C's spread")
    if out.empty:
        raise HpclabError("the C and Python pingpongs share no message size",
                          "run both with the same sizes (powers of two from 1 byte)")
    return out.sort_values("bytes").reset_index(drop=True)


def overhead_answers(table, buffer: str = "mpi4py buffer", pickle: str = "mpi4py pickle") -> list[str]:
    """The three questions notebook 90 asks of overhead(), answered from the measured table:
    is the small-message cost constant per message, from which size pickling costs clearly more
    than the buffer path, and from which size the buffer path costs at most 10 % more than C.
    Only sizes where Python was slower than every C run count ('slower'); returns sentences."""
    def resolved(name):
        col = f"{name}_vs_C"
        return table[table[col] == "slower"] if col in table else table

    out = []
    small = resolved(buffer)[lambda t: (t["bytes"] > 0) & (t["bytes"] <= 1024)]
    if len(small) >= 2:
        lo, hi = small.iloc[0], small.iloc[-1]
        grows = hi[f"{buffer}_extra_us"] > 1.5 * max(lo[f"{buffer}_extra_us"], 1e-9)
        out.append(f"Small messages: the buffer path adds {lo[f'{buffer}_extra_us']:.2f} us at {int(lo['bytes'])} B "
                   f"and {hi[f'{buffer}_extra_us']:.2f} us at {int(hi['bytes'])} B: "
                   + ("it grows with size." if grows else "about constant per message, like a latency."))
    else:
        out.append("Small messages: too few sizes where Python was clearly slower than C to tell.")
    both = table[(table["bytes"] > 0) & (table.get(f"{pickle}_vs_C", "slower") == "slower")]
    worse = both[both[f"{pickle}_extra_us"] > 1.5 * both[f"{buffer}_extra_us"].clip(lower=1e-9)]
    if len(worse):
        first, last = worse.iloc[0], both.iloc[-1]
        out.append(f"Pickling costs clearly more than the buffer path (over 1.5x its extra time) from "
                   f"{int(first['bytes'])} B on, and its extra grows from {first[f'{pickle}_extra_us']:.1f} us to "
                   f"{last[f'{pickle}_extra_us']:.1f} us at {int(last['bytes'])} B: each side copies the object "
                   "into and out of a byte string, work proportional to the message.")
    else:
        out.append("Pickling never cost clearly more than the buffer path at the measured sizes.")
    cheap = table[(table["bytes"] > 0) & (table[f"{buffer}_x_C"] <= 1.10)]
    if len(cheap):
        out.append(f"The buffer path stays within 10 % of C from {int(cheap['bytes'].iloc[0])} B on: for messages "
                   "that size and larger a Python inner loop costs little; below it, every message pays Python's "
                   "per-call cost.")
    else:
        out.append("The buffer path was more than 10 % slower than C at every size measured: keep inner loops in C here.")
    return out
