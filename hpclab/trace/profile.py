"""Where the time goes: per function and per rank, self time, total time and calls.

Functions are the MPI calls, the user regions (region_begin/region_end, which nest) and
"Application" (time outside every region and MPI call, as ITAC names it). A region's total time
is inclusive; its self time excludes the MPI calls and regions inside it (its children). MPI
calls have no children, so their self and total times agree. Times are in ns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hpclab.trace.events import Trace

APPLICATION = "Application"


@dataclass
class Regions:
    """Region instances of a trace. instances: rank, name, begin, end (event rows), depth,
    parent (instance id or -1), t0, t1 (ns). inner: per event row, the innermost enclosing
    instance id (-1 = none); the begin/end markers belong to the enclosing region."""

    instances: pd.DataFrame
    inner: np.ndarray

    def callsite(self, ev: pd.DataFrame) -> np.ndarray:
        """Per event row: the innermost enclosing region name ('' at top level)."""
        names = np.array(self.instances["name"].tolist() + [""], dtype=object)
        return names[self.inner]  # -1 picks the trailing ''


def regions(trace: Trace) -> Regions:
    """Find region instances (unclosed ones are closed at the rank's last event)."""
    ev = trace.events
    n = len(ev)
    rows = []
    sel = np.flatnonzero(ev["call"].isin(("region_begin", "region_end")).to_numpy())
    rank = ev["rank"].to_numpy()
    call = ev["call"].to_numpy()
    name = ev["name"].to_numpy()
    last_of_rank = {}
    if n:
        ends = np.flatnonzero(np.r_[rank[1:] != rank[:-1], True])
        last_of_rank = dict(zip(rank[ends].tolist(), ends.tolist()))
    stack: list[int] = []
    cur = None
    for i in sel.tolist():
        r = rank[i]
        if r != cur:
            for iid in stack:  # close what the previous rank left open
                rows[iid][3] = last_of_rank[cur]
            stack, cur = [], r
        if call[i] == "region_begin":
            rows.append([r, name[i], i, -1, len(stack), stack[-1] if stack else -1])
            stack.append(len(rows) - 1)
        elif stack and rows[stack[-1]][1] == name[i]:
            rows[stack.pop()][3] = i
    for iid in stack:
        rows[iid][3] = last_of_rank[cur]
    inst = pd.DataFrame(rows, columns=["rank", "name", "begin", "end", "depth", "parent"])
    inner = np.full(n, -1, dtype=np.int64)
    te = ev["t_enter"].to_numpy()
    tx = ev["t_exit"].to_numpy()
    inst["t0"] = te[inst["begin"].to_numpy(np.int64)] if len(inst) else []
    inst["t1"] = tx[inst["end"].to_numpy(np.int64)] if len(inst) else []
    for iid in np.argsort(inst["depth"].to_numpy(), kind="stable").tolist():
        b, e = int(inst.at[iid, "begin"]), int(inst.at[iid, "end"])
        inner[b + 1:e] = iid
    return Regions(inst, inner)


def profile(trace: Trace) -> pd.DataFrame:
    """Per rank and function: columns rank, function, kind ('mpi', 'region', 'application'),
    calls, total_ns, self_ns. A rank's rows' self times add up to its span (first entry to last
    exit)."""
    ev = trace.events
    reg = regions(trace)
    dur = (ev["t_exit"] - ev["t_enter"]).to_numpy()
    mpi = ev["call"].str.startswith("MPI_").to_numpy()
    parent = reg.inner
    parts = []
    m = pd.DataFrame({"rank": ev["rank"].to_numpy()[mpi], "function": ev["call"].to_numpy()[mpi],
                      "dur": dur[mpi]})
    g = m.groupby(["rank", "function"], sort=True)["dur"]
    mp = pd.DataFrame({"calls": g.size(), "total_ns": g.sum()}).reset_index()
    mp["self_ns"] = mp["total_ns"]
    mp["kind"] = "mpi"
    parts.append(mp)

    inst = reg.instances
    top_regions = pd.Series(0, index=pd.Index([], dtype=np.int64), dtype=np.int64)
    if len(inst):
        total = (inst["t1"] - inst["t0"]).to_numpy()
        child = np.zeros(len(inst), dtype=np.int64)
        inside = mpi & (parent >= 0)
        np.add.at(child, parent[inside], dur[inside])
        sub = inst["parent"].to_numpy() >= 0
        np.add.at(child, inst["parent"].to_numpy()[sub], total[sub])
        rf = pd.DataFrame({"rank": inst["rank"], "function": inst["name"], "total_ns": total,
                           "self_ns": total - child})
        g = rf.groupby(["rank", "function"], sort=True)
        rp = pd.DataFrame({"calls": g.size(), "total_ns": g["total_ns"].sum(),
                           "self_ns": g["self_ns"].sum()}).reset_index()
        rp["kind"] = "region"
        parts.append(rp)
        top_regions = rf[~sub].groupby("rank")["total_ns"].sum()

    span = ev.groupby("rank").agg(t0=("t_enter", "min"), t1=("t_exit", "max"))
    top_mpi = m[parent[mpi] < 0].groupby("rank")["dur"].sum()
    app = (span["t1"] - span["t0"]).sub(top_mpi, fill_value=0).sub(top_regions, fill_value=0)
    ap = pd.DataFrame({"rank": app.index, "function": APPLICATION, "calls": 1,
                       "total_ns": app.to_numpy(np.int64), "self_ns": app.to_numpy(np.int64),
                       "kind": "application"})
    parts.append(ap)
    out = pd.concat(parts, ignore_index=True)
    out = out[["rank", "function", "kind", "calls", "total_ns", "self_ns"]]
    return out.sort_values(["rank", "self_ns"], ascending=[True, False], kind="stable").reset_index(drop=True)


def flat_profile(trace: Trace | None = None, prof: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per function over all ranks: kind, calls, total_ns, self_ns (sums), self_pct (of all self
    time), self_min_ns / self_mean_ns / self_max_ns over ranks. Sorted by self time."""
    prof = profile(trace) if prof is None else prof
    g = prof.groupby("function", sort=False)
    out = pd.DataFrame({"kind": g["kind"].first(), "calls": g["calls"].sum(),
                        "total_ns": g["total_ns"].sum(), "self_ns": g["self_ns"].sum()})
    nranks = prof["rank"].nunique()
    per_rank = prof.pivot_table(index="rank", columns="function", values="self_ns",
                                aggfunc="sum", fill_value=0)
    out["self_pct"] = 100.0 * out["self_ns"] / max(out["self_ns"].sum(), 1)
    out["self_min_ns"] = per_rank.min()
    out["self_mean_ns"] = per_rank.sum() / nranks
    out["self_max_ns"] = per_rank.max()
    return out.sort_values("self_ns", ascending=False)


def load_balance(trace: Trace | None = None, prof: pd.DataFrame | None = None) -> pd.DataFrame:
    """Rank x function table of self times (ns): one row per rank, 'MPI' and 'compute' totals
    first (compute = application + region self time), then every function."""
    prof = profile(trace) if prof is None else prof
    wide = prof.pivot_table(index="rank", columns="function", values="self_ns",
                            aggfunc="sum", fill_value=0)
    kinds = prof.groupby("function")["kind"].first()
    mpi_cols = [c for c in wide.columns if kinds[c] == "mpi"]
    wide.insert(0, "compute", wide.drop(columns=mpi_cols).sum(axis=1))
    wide.insert(0, "MPI", wide[mpi_cols].sum(axis=1))
    wide.columns.name = None
    return wide
