"""The critical path of a traced run: the chain of compute bursts and messages that sets its length.

Walk backwards from the rank that finishes last. At each MPI call, ask what let it return: if a
partner became ready inside the call (the matched send of a receive, the matched receive of a
send that waited for it, the last rank to reach a collective), the call waited for that partner,
and the path jumps to the partner at the moment it became ready; otherwise the call's time is
the rank's own communication and the path goes on back through the compute burst before it. Scalasca finds its
critical path the same way, by a backward replay of the trace.

The segments of the path add up to the time from the start of the rank where the walk ends to
the end of the run, so on a trace whose ranks start together it is T_real. What shortening a
rank's compute on the path would save is answered by replaying the trace with that rank's bursts
shortened (`savings`): a prediction on a network model, and labelled so; the path itself only
gives an upper bound (another chain may become the longest).

Works on any Trace: a measured one, a replayed one, or one read from an OTF2 archive.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hpclab.core.errors import HpclabError
from hpclab.trace.events import Trace
from hpclab.trace.matching import completions, match
from hpclab.trace.model import IDEAL, NetworkModel
from hpclab.trace.replay import replay
from hpclab.trace.split import rank_times

# compute: a burst between MPI calls; communication: an MPI call's time after the last partner it
# needed was ready (a message's transfer, a collective's own cost). The time a call spent waiting
# for a partner is not on the path: the path runs through the partner instead.
KINDS = ("compute", "communication")


@dataclass(frozen=True)
class CriticalPath:
    """segments: one row per piece of the path, latest first (rank, kind, call, region, t0, t1,
    ns); length_ns: their sum; T_real: the run's time (ns); end_rank: the rank that finished
    last."""

    segments: pd.DataFrame
    length_ns: float
    T_real: float
    end_rank: int

    def by_rank(self) -> pd.DataFrame:
        """ns on the path per rank and kind, and the rank's share of the path."""
        t = self.segments.pivot_table(index="rank", columns="kind", values="ns", aggfunc="sum", fill_value=0)
        t = t.reindex(columns=[k for k in KINDS if k in t.columns])
        t["share of path"] = t.sum(axis=1) / self.length_ns if self.length_ns else np.nan
        return t.sort_values("share of path", ascending=False)

    def by_region(self) -> pd.DataFrame:
        """ns of compute on the path per region (the innermost traced region, '' outside any)."""
        comp = self.segments[self.segments["kind"] == "compute"]
        t = comp.groupby("region")["ns"].sum().sort_values(ascending=False).to_frame()
        t["share of path"] = t["ns"] / self.length_ns if self.length_ns else np.nan
        return t

    def compute_by_rank(self) -> pd.Series:
        comp = self.segments[self.segments["kind"] == "compute"]
        return comp.groupby("rank")["ns"].sum().sort_values(ascending=False)


def _regions(ev: pd.DataFrame) -> np.ndarray:
    """The innermost open region at each event (the one its preceding burst runs in)."""
    out = np.empty(len(ev), dtype=object)
    call = ev["call"].astype(str).to_numpy()
    name = ev["name"].to_numpy()
    rank = ev["rank"].to_numpy()
    stack: list[str] = []
    prev = None
    for i in range(len(ev)):
        if rank[i] != prev:
            stack, prev = [], rank[i]
        out[i] = stack[-1] if stack else ""
        if call[i] == "region_begin":
            stack.append(str(name[i]))
        elif call[i] == "region_end" and stack:
            stack.pop()
    return out


def _partners(trace: Trace) -> dict[int, list[int]]:
    """Event row -> the rows whose readiness can end it (matched sends and receives, the other
    members of a collective instance, the partners of the requests a wait completes)."""
    m = match(trace)
    partners: dict[int, list[int]] = {}
    for s, r in zip(m.messages["send_idx"].tolist(), m.messages["recv_idx"].tolist()):
        partners.setdefault(r, []).append(s)
        partners.setdefault(s, []).append(r)
    for _, grp in m.coll.groupby("instance"):
        idx = grp["idx"].tolist()
        for i in idx:
            partners.setdefault(i, []).extend(j for j in idx if j != i)
    for wait, reqs in completions(trace).items():
        for q in reqs:
            partners.setdefault(wait, []).extend(partners.get(q, []))
    return partners


def critical_path(trace: Trace) -> CriticalPath:
    """The critical path of `trace` (see the module's docstring). Raises HpclabError on an empty trace."""
    ev = trace.events
    if not len(ev):
        raise HpclabError("the trace has no events", "trace a run first (hpclab trace RUN)")
    rt = rank_times(trace)
    rank = ev["rank"].to_numpy()
    te = ev["t_enter"].to_numpy()
    tx = ev["t_exit"].to_numpy()
    call = ev["call"].astype(str).to_numpy()
    region = _regions(ev)
    partners = _partners(trace)
    first = pd.Series(np.arange(len(ev))).groupby(rank).min().to_dict()
    # the window of each rank ends at its Finalize's entry (or its last event)
    end_rank = int(rt["end_ns"].idxmax())
    ends = np.flatnonzero((rank == end_rank) & (call == "MPI_Finalize"))
    i = int(ends[-1]) if len(ends) else int(np.flatnonzero(rank == end_rank)[-1])
    t = int(te[i]) if call[i] == "MPI_Finalize" else int(tx[i])
    at_entry = call[i] == "MPI_Finalize"  # start from the Finalize's entry: its own time is outside the window
    segs: list[tuple] = []
    for _ in range(2 * len(ev) + 2):  # each step moves to an earlier event or burst
        r = int(rank[i])
        if not at_entry:
            if call[i] == "MPI_Init":
                break
            cause, tp = None, None
            for p in partners.get(i, ()):
                # a partner that became ready inside the call (ties go to the partner: both chains
                # are then equally long, and the partner's is the one that ends the wait)
                if te[i] <= te[p] <= tx[i] and (tp is None or te[p] > tp):
                    cause, tp = p, int(te[p])
            if cause is not None:
                segs.append((r, "communication", call[i], region[i], tp, t))
                i, t, at_entry = cause, tp, True
                continue
            segs.append((r, "communication", call[i], region[i], int(te[i]), t))
            t, at_entry = int(te[i]), True
            continue
        # at the entry of event i: the burst before it, then the event before
        if i == first[r]:
            break
        prev = i - 1
        segs.append((r, "compute", call[i], region[i], int(tx[prev]), t))
        i, t, at_entry = prev, int(tx[prev]), False
    seg = pd.DataFrame(segs, columns=["rank", "kind", "call", "region", "t0", "t1"])
    seg["ns"] = (seg["t1"] - seg["t0"]).clip(lower=0)
    seg = seg[seg["ns"] > 0].reset_index(drop=True)
    T = float(rt["end_ns"].max() - rt["start_ns"].min())
    return CriticalPath(seg, float(seg["ns"].sum()), T, end_rank)


def shorten_bursts(trace: Trace, rank: int, fraction: float) -> Trace:
    """The trace with every compute burst of `rank` shortened by `fraction` (0..1), in wall and CPU
    time; other ranks unchanged. Meant to be replayed, which lays all ranks out again."""
    if not 0 <= fraction < 1:
        raise HpclabError(f"fraction {fraction} is not in [0, 1)", "give e.g. 0.1 for 10 % shorter bursts")
    ev = trace.events.copy()
    on = np.flatnonzero(ev["rank"].to_numpy() == rank)
    if not len(on):
        raise HpclabError(f"rank {rank} is not in the trace", f"ranks: 0..{trace.nranks - 1}")
    for enter, exit_ in (("t_enter", "t_exit"), ("cpu_enter", "cpu_exit")):
        if enter not in ev:
            continue
        a = ev[enter].to_numpy()[on].astype(np.int64)
        b = ev[exit_].to_numpy()[on].astype(np.int64)
        if (a < 0).any():
            continue
        gaps = np.r_[0, a[1:] - b[:-1]].clip(min=0)
        cut = np.cumsum(np.round(gaps * fraction).astype(np.int64))
        ev.loc[ev.index[on], enter] = a - cut
        ev.loc[ev.index[on], exit_] = b - cut
    return trace.with_events(ev)


def savings(trace: Trace, path: CriticalPath, model: NetworkModel = IDEAL, fraction: float = 0.1,
            top: int = 3) -> pd.DataFrame:
    """What shortening the compute of each of the `top` ranks with most compute on the path by
    `fraction` would save: the path's bound (fraction x that rank's compute on the path) and the
    replay's answer on `model` (a prediction). Times in ns; the replay of the unchanged trace on
    the same model is the baseline."""
    base = float(rank_times(replay(trace, model))["end_ns"].max())
    rows = []
    for r, ns in path.compute_by_rank().head(top).items():
        t_new = float(rank_times(replay(shorten_bursts(trace, int(r), fraction), model))["end_ns"].max())
        rows.append({"rank": int(r), "compute on path ns": float(ns), "bound ns": fraction * float(ns),
                     "replayed saving ns": base - t_new, "replayed saving of run": (base - t_new) / base if base else np.nan})
    out = pd.DataFrame(rows).set_index("rank") if rows else pd.DataFrame()
    out.attrs.update(model=model.name, fraction=fraction, baseline_ns=base)
    return out


def against_imbalance(trace: Trace, path: CriticalPath) -> dict:
    """The load imbalance's answer (the rank with the most compute) beside the path's (the rank with
    the most compute on the critical path): same rank or not, with both figures in ns."""
    rt = rank_times(trace)
    busiest = int(rt["comp_ns"].idxmax())
    on_path = path.compute_by_rank()
    leader = int(on_path.index[0]) if len(on_path) else -1
    return {"busiest_rank": busiest, "busiest_compute_ns": float(rt.loc[busiest, "comp_ns"]),
            "path_leader": leader, "path_leader_compute_ns": float(on_path.iloc[0]) if len(on_path) else 0.0,
            "same": busiest == leader}
