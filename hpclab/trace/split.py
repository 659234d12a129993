"""The split of a run's time into five parts, and the POP efficiencies (ITAC imbalance diagram).

Each rank's window runs from the end of its MPI_Init to the start of its MPI_Finalize (first and
last events if they are missing). T_real is the latest window end minus the earliest window
start. comp_r is the compute time of rank r: the CPU time of its bursts (the gaps between its
MPI calls) where the trace recorded CPU times, as Dimemas takes them, else their wall time.
T_ideal is the run replayed on the ideal network on those bursts, T_model the same replay on
the network model of the machine (the fitted one: latency, bandwidth, eager limit, shared
links). Then

    T_comp = mean(comp)                         compute
    T_load = max(comp) - mean(comp)             load imbalance
    T_depend = T_ideal - max(comp)              dependency (serialisation)
    T_transfer = T_model - T_ideal              transfer: what the network model adds
    T_rest = T_real - T_model                   the rest: time the ranks did not run, or that
                                                the model does not explain (core sharing, OS
                                                noise, a model that does not fit)

and the five add up to T_real exactly. The replays answer "how long would this run take on
dedicated cores"; on a run with more ranks than cores the rest is the time the ranks were
switched out, and it is reported, never folded into transfer. Without a model (split(trace)),
T_model = T_real, T_rest = 0 and T_transfer = T_real - T_ideal holds everything else: the
four-way split of earlier versions. Also: T_mpi = T_real - T_comp, T_wait = T_load + T_depend.
POP efficiencies: load balance = mean/max comp, serialisation = max comp / T_ideal, transfer =
T_ideal / T_real, communication = serialisation x transfer, parallel = load balance x
communication.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from hpclab.trace.events import Trace, bursts
from hpclab.trace.replay import replay


def rank_times(trace: Trace) -> pd.DataFrame:
    """Per rank: start_ns, end_ns (window), comp_ns (compute inside the window: CPU time of the
    bursts where recorded, else wall time), comp_wall_ns (their wall time), off_cpu_ns
    (comp_wall_ns - comp_ns: time switched out while computing) and not_running_ns (the window's
    wall time minus the CPU time the rank got in it, MPI calls included; 0 without CPU times)."""
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
    gap, _ = bursts(ev, "wall")
    cpu, _ = bursts(ev, "cpu")
    owner = np.repeat(np.arange(len(ranks)), last - first + 1)
    inside = (idx > lo[owner]) & (idx <= hi[owner])
    comp_wall = np.bincount(owner[inside], weights=gap[inside], minlength=len(ranks)).astype(np.int64)
    comp = np.bincount(owner[inside], weights=cpu[inside], minlength=len(ranks)).astype(np.int64)
    # CPU time over the window: from the CPU time at its start to that at its end
    not_running = np.zeros(len(ranks), dtype=np.int64)
    if "cpu_enter" in ev.columns:
        ce, cx = ev["cpu_enter"].to_numpy(), ev["cpu_exit"].to_numpy()
        c0 = np.where(call[lo] == "MPI_Init", cx[lo], ce[lo])
        c1 = np.where(call[hi] == "MPI_Finalize", ce[hi], cx[hi])
        known = (c0 >= 0) & (c1 >= 0)
        not_running = np.where(known, np.maximum((end - start) - (c1 - c0), 0), 0)
    return pd.DataFrame({"start_ns": start, "end_ns": end, "comp_ns": comp,
                         "comp_wall_ns": comp_wall, "off_cpu_ns": comp_wall - comp,
                         "not_running_ns": not_running},
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
    # added with CPU bursts and the network model (defaults: the four-way split of old)
    T_model: float = float("nan")  # the replay on the machine's network model (T_real without one)
    T_rest: float = 0.0            # T_real - T_model: not running, or not explained by the model
    model: str = ""                # name of that model ("" : none given)
    cpu_bursts: bool = False       # compute is CPU time (the trace recorded it), not wall time
    T_comp_wall: float = float("nan")  # mean wall time of the compute bursts
    T_off_cpu: float = 0.0         # mean time switched out during compute bursts (wall - CPU)

    def as_series(self) -> pd.Series:
        return pd.Series(asdict(self))

    def parts(self) -> dict[str, float]:
        """The five parts that add up to T_real, in ns, in stacking order (PARTS names them)."""
        return {key: getattr(self, key) for key, _ in PARTS}

    def table(self) -> pd.DataFrame:
        """Times in seconds and as a share of T_real, then the efficiencies."""
        times = ["T_real", "T_ideal", "T_model", "T_comp", "T_mpi", "T_load", "T_depend",
                 "T_transfer", "T_rest", "T_wait"]
        rows = [(k, getattr(self, k) * 1e-9, getattr(self, k) / self.T_real if self.T_real else np.nan)
                for k in times]
        rows += [(k, np.nan, getattr(self, k)) for k in
                 ("load_balance", "serialisation", "transfer", "communication", "parallel")]
        return pd.DataFrame(rows, columns=["quantity", "seconds", "fraction"]).set_index("quantity")


def _ratio(a, b):
    return a / b if b else float("nan")


# The five parts in stacking order: Split attribute, label.
PARTS = (("T_comp", "compute"), ("T_load", "load imbalance"), ("T_depend", "dependency"),
         ("T_transfer", "transfer (network model)"),
         ("T_rest", "rest: not running / not modelled (core sharing, OS noise)"))


def split(trace: Trace, ideal: Trace | None = None, model=None, modelled: Trace | None = None) -> Split:
    """The five-part split of `trace` (real or replayed), times in ns.

    ideal: its replay on the ideal network (on CPU bursts; computed here if not given; pass
    one replayed with the machine's eager limit to keep rendezvous waits in the dependency).
    model: the network model of the machine (hpclab.trace.model.NetworkModel, e.g. fitted to a
    pingpong run); modelled: the replay on it, computed here from `model` if not given. With
    neither, T_rest = 0 and T_transfer is T_real - T_ideal (the four-way split). Raises
    HpclabError if a replay deadlocks."""
    if ideal is None:
        ideal = replay(trace)
    if modelled is None and model is not None:
        modelled = replay(trace, model)
    rt = rank_times(trace)
    T = float(rt["end_ns"].max() - rt["start_ns"].min())
    Ti = run_time(ideal)
    Tm = run_time(modelled) if modelled is not None else T
    comp = rt["comp_ns"].to_numpy(np.float64)
    mean, mx = float(comp.mean()), float(comp.max())
    lb = _ratio(mean, mx)
    ser = _ratio(mx, Ti)
    tr = _ratio(Ti, T)
    name = ""
    if modelled is not None:
        name = str(modelled.meta.get("model", getattr(model, "name", "model")))
    ev = trace.events
    cpu = bool("cpu_enter" in ev.columns and len(ev) and (ev["cpu_enter"].to_numpy() >= 0).any())
    return Split(T_real=T, T_ideal=Ti, T_comp=mean, comp_max=mx, T_mpi=T - mean,
                 T_transfer=Tm - Ti, T_load=mx - mean, T_depend=Ti - mx, T_wait=Ti - mean,
                 load_balance=lb, serialisation=ser, transfer=tr, communication=ser * tr,
                 parallel=lb * ser * tr, nranks=len(rt), T_model=Tm, T_rest=T - Tm, model=name,
                 cpu_bursts=cpu, T_comp_wall=float(rt["comp_wall_ns"].mean()),
                 T_off_cpu=float(rt["off_cpu_ns"].mean()))


def splits_frame(splits: dict) -> pd.DataFrame:
    """Several runs' splits side by side: one column per label (numbers only: the model's name
    and the cpu_bursts flag are left out)."""
    out = pd.DataFrame({label: s.as_series() for label, s in splits.items()})
    return out.drop(index=["model", "cpu_bursts"]).astype(float)
