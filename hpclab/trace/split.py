"""The four-way split of a run's time and the POP efficiencies (ITAC imbalance diagram).

Each rank's window runs from the end of its MPI_Init to the start of its MPI_Finalize (first and
last events if they are missing). T_real is the latest window end minus the earliest window
start; what a rank does not spend computing in that span is MPI time, so a rank that finishes
early counts its tail as waiting. With comp_r the compute time of rank r (the gaps between its
MPI calls) and T_ideal the same run replayed on the ideal network:

    T_comp = mean(comp)      T_mpi = T_real - T_comp
    T_transfer = T_real - T_ideal            (the interconnect)
    T_load = max(comp) - mean(comp)          (global load imbalance)
    T_depend = T_ideal - max(comp)           (dependencies, serialisation)
    T_wait = T_load + T_depend = T_ideal - mean(comp)

so T_comp + T_transfer + T_load + T_depend = T_real. POP efficiencies: load balance =
mean/max comp, serialisation = max comp / T_ideal, transfer = T_ideal / T_real, communication =
serialisation x transfer, parallel = load balance x communication.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from hpclab.trace.events import Trace


def rank_times(trace: Trace) -> pd.DataFrame:
    """Per rank: start_ns, end_ns (window), comp_ns (compute inside the window)."""
    ev = trace.events
    rank = ev["rank"].to_numpy()
    call = ev["call"].to_numpy()
    te = ev["t_enter"].to_numpy()
    tx = ev["t_exit"].to_numpy()
    n = len(ev)
    idx = np.arange(n)
    first = np.flatnonzero(np.r_[True, rank[1:] != rank[:-1]])
    last = np.r_[first[1:] - 1, n - 1]
    ranks = rank[first]
    # window edges as event rows: the Init (or first event) and the Finalize (or last event)
    lo = first.copy()
    hi = last.copy()
    init = pd.Series(idx[call == "MPI_Init"], index=rank[call == "MPI_Init"])
    fin = pd.Series(idx[call == "MPI_Finalize"], index=rank[call == "MPI_Finalize"])
    init = init[~init.index.duplicated()]
    fin = fin[~fin.index.duplicated(keep="last")]
    pos = pd.Series(np.arange(len(ranks)), index=ranks)
    lo[pos[init.index].to_numpy()] = init.to_numpy()
    hi[pos[fin.index].to_numpy()] = fin.to_numpy()
    start = np.where(call[lo] == "MPI_Init", tx[lo], te[lo])
    end = np.where(call[hi] == "MPI_Finalize", te[hi], tx[hi])
    # compute = gaps between consecutive events, both inside the window
    gap = np.zeros(n, dtype=np.int64)
    gap[1:] = te[1:] - tx[:-1]
    owner = np.repeat(np.arange(len(ranks)), last - first + 1)
    inside = (idx > lo[owner]) & (idx <= hi[owner])
    comp = np.bincount(owner[inside], weights=np.maximum(gap[inside], 0), minlength=len(ranks))
    return pd.DataFrame({"start_ns": start, "end_ns": end, "comp_ns": comp.astype(np.int64)},
                        index=pd.Index(ranks, name="rank"))


def run_time(trace: Trace) -> float:
    """T in ns: latest window end minus earliest window start."""
    rt = rank_times(trace)
    return float(rt["end_ns"].max() - rt["start_ns"].min())


@dataclass(frozen=True)
class Split:
    """The split of one run, all times in ns (floats); efficiencies are fractions."""

    T_real: float
    T_ideal: float
    T_comp: float
    comp_max: float
    T_mpi: float
    T_transfer: float
    T_load: float
    T_depend: float
    T_wait: float
    load_balance: float
    serialisation: float
    transfer: float
    communication: float
    parallel: float
    nranks: int

    def as_series(self) -> pd.Series:
        return pd.Series(asdict(self))

    def table(self) -> pd.DataFrame:
        """Times in seconds and as a share of T_real, then the efficiencies."""
        times = ["T_real", "T_ideal", "T_comp", "T_mpi", "T_transfer", "T_load", "T_depend", "T_wait"]
        rows = [(k, getattr(self, k) * 1e-9, getattr(self, k) / self.T_real if self.T_real else np.nan)
                for k in times]
        rows += [(k, np.nan, getattr(self, k)) for k in
                 ("load_balance", "serialisation", "transfer", "communication", "parallel")]
        return pd.DataFrame(rows, columns=["quantity", "seconds", "fraction"]).set_index("quantity")


def _ratio(a, b):
    return a / b if b else float("nan")


def split(trace: Trace, ideal: Trace | None = None) -> Split:
    """The split of `trace` (real or replayed); `ideal` is its replay on the ideal network
    (computed here if not given). Raises HpclabError if the ideal replay deadlocks."""
    if ideal is None:
        from hpclab.trace.replay import replay
        ideal = replay(trace)
    rt = rank_times(trace)
    T = float(rt["end_ns"].max() - rt["start_ns"].min())
    Ti = run_time(ideal)
    comp = rt["comp_ns"].to_numpy(np.float64)
    mean, mx = float(comp.mean()), float(comp.max())
    lb = _ratio(mean, mx)
    ser = _ratio(mx, Ti)
    tr = _ratio(Ti, T)
    return Split(T_real=T, T_ideal=Ti, T_comp=mean, comp_max=mx, T_mpi=T - mean,
                 T_transfer=T - Ti, T_load=mx - mean, T_depend=Ti - mx, T_wait=Ti - mean,
                 load_balance=lb, serialisation=ser, transfer=tr, communication=ser * tr,
                 parallel=lb * ser * tr, nranks=len(rt))


def splits_frame(splits: dict) -> pd.DataFrame:
    """Several runs' splits side by side: one column per label."""
    return pd.DataFrame({label: s.as_series() for label, s in splits.items()})


def imbalance_figure(splits: dict, unit: float = 1e-9, unit_name: str = "s"):
    """Stacked bars (compute / transfer / load imbalance / dependency) for several runs.

    splits: label -> Split. Returns a matplotlib Figure (not shown)."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(1.6 + 1.4 * len(splits), 4.2), layout="constrained")
    ax = fig.add_subplot()
    parts = [("T_comp", "compute", "#4c72b0"), ("T_transfer", "transfer (interconnect)", "#dd8452"),
             ("T_load", "load imbalance", "#c44e52"), ("T_depend", "dependency", "#8172b3")]
    labels = list(splits)
    bottom_pos = np.zeros(len(labels))
    bottom_neg = np.zeros(len(labels))
    for key, text, color in parts:
        v = np.array([getattr(splits[k], key) * unit for k in labels])
        base = np.where(v >= 0, bottom_pos, bottom_neg)
        ax.bar(labels, v, bottom=base, label=text, color=color, width=0.6)
        bottom_pos += np.where(v >= 0, v, 0)
        bottom_neg += np.where(v < 0, v, 0)
    ax.set_ylabel(f"time ({unit_name})")
    ax.set_title("Imbalance diagram")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return fig
