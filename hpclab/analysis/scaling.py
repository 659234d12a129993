"""Scaling of the Poisson solver: speedup and efficiency, the compute/MPI split, the memory roofline.

Definitions follow the 2014 ITAC training (seed 001): with T[p] the run time on p ranks,
speedup S = T[1]/T[p] and efficiency E = S/p; T[p] = T_comp[p] + T_mpi[p], where T_comp and
T_mpi are averages over the ranks, and the compute efficiency uses T_comp alone.
The lesson's specs and configurations are the scaling lesson's (hpclab.course.lessons).
"""

from __future__ import annotations

import pandas as pd

from hpclab.core.errors import HpclabError
from hpclab.analysis import phrases, roofline
from hpclab.analysis.fits import scaling_table
from hpclab.kernels import poisson as poisson_report

BYTE_COUNT_EXPLAINED = """\
Bytes one lattice update (one point, one iteration) moves between memory and the core, when the
grid is far larger than the caches and neighbouring rows stay in cache:
  red sweep   : u read + u written back (16 B) + f read (8 B)  = 24 B
  black sweep : the same (both colours share every cache line) = 24 B
  residuum    : u read + f read                                 = 16 B
No write-allocate extra: u's cache lines are read before they are written.
--fuse folds the residuum into the black sweep and saves its 16 B.
Reads : writes = 48 : 16 B (3:1), fused 32 : 16 B (2:1). The roof's bandwidth comes from the
STREAM kernel with the same mix, counting what it really moves: Triad reads b and c and, before
storing a, a's cache line (write-allocate): 24 B read + 8 B written = 32 B per element, not the
24 B its reported rate counts (fused: Copy, 16 + 8 B)."""

BYTES_PER_UPDATE = {"separate": 64, "fused": 48}


def run_rows(runs) -> pd.DataFrame:
    """One row per Poisson run: label, run_id, ranks, grid, exchange, seconds (wall time),
    comp_mean/comp_max and mpi_mean/mpi_max (seconds over ranks), lups (lattice updates/s)."""
    rows = []
    for run in runs:
        doc = run.result()
        res, ranks = poisson_report.measures(doc), poisson_report.per_rank(doc)
        comp = [sum(r["compute"].values()) for r in ranks]
        mpi = [sum(r["mpi"].values()) for r in ranks]
        rows.append({
            "label": run.spec.label, "run_id": run.run_id, "ranks": len(ranks),
            "grid": "x".join(map(str, res["grid"])), "exchange": res["exchange"], "n": res["n"],
            "iterations": res["iterations"], "seconds": res["wall_time"],
            "comp_mean": sum(comp) / len(comp), "comp_max": max(comp),
            "mpi_mean": sum(mpi) / len(mpi), "mpi_max": max(mpi),
            "lups": res["lattice_updates_per_sec"],
        })
    return pd.DataFrame(rows)


def _medians(rows: pd.DataFrame, column: str) -> pd.DataFrame:
    """One row per rank count: the median of `column` over its runs (as `column`) and the run count."""
    g = rows.groupby("ranks")[column]
    return pd.DataFrame({column: g.median(), "runs": g.size()}).reset_index()


def efficiency(rows: pd.DataFrame) -> pd.DataFrame:
    """Total and compute speedup/efficiency per rank count, from the median run time of each count
    (the course compares medians: the fastest run is the least disturbed one, but one run).

    rows: from run_rows (one process-grid family at a time). Returns ranks, runs, seconds (median),
    speedup, efficiency (total), comp_seconds, comp_speedup, comp_efficiency."""
    if rows.empty:
        raise HpclabError("no Poisson runs to compare", "run the scaling specs first")
    med = _medians(rows, "seconds")
    total = scaling_table(med, ranks="ranks", time="seconds").assign(runs=med["runs"].to_numpy())
    comp = scaling_table(_medians(rows, "comp_mean").rename(columns={"comp_mean": "comp"}), ranks="ranks", time="comp")
    out = total[["ranks", "runs", "seconds", "speedup", "efficiency"]].copy()
    out["comp_seconds"] = comp["seconds"].to_numpy()
    out["comp_speedup"] = comp["speedup"].to_numpy()
    out["comp_efficiency"] = comp["efficiency"].to_numpy()
    return out


def roofline_lups(bandwidth_mb_s: float, fused: bool = False) -> float:
    """The memory roofline of the solver: lattice updates per second if memory bandwidth were the
    only limit. bandwidth_mb_s: bytes really moved per second [MB/s, MB = 10^6 B], i.e.
    roofline.memory_roof()["moved_mb_s"] (write-allocate counted), not STREAM's reported Triad."""
    if bandwidth_mb_s <= 0:
        raise HpclabError(f"the memory bandwidth must be positive, got {bandwidth_mb_s}", "check the STREAM run")
    return bandwidth_mb_s * 1e6 / BYTES_PER_UPDATE["fused" if fused else "separate"]


def subdomains(rows: pd.DataFrame, caches: pd.DataFrame) -> pd.DataFrame:
    """Why compute efficiency can exceed 1: each rank's share of the grid against the caches.

    rows: run_rows() output; caches: roofline.cache_sizes()/node_caches(). Returns one row per
    label with ranks, grid, rank_bytes (u and f of the largest subdomain, halo included),
    node_bytes (all ranks of the node), where each rank's subdomain lives (roofline.residency
    of rank_bytes: L2, L3, partly cached, memory) and the share of the node's working set that
    the caches could hold (all caches of the node together / node_bytes, capped at 1), and
    comp_efficiency: T_comp of the fastest 1-rank run / (ranks x T_comp of the label's fastest
    run), NaN without 1-rank rows. A run whose subdomains are closer to the caches than the single
    rank's gets part of its bytes from cache, and its compute time falls by more than the rank
    count."""
    total_cache = int((caches["bytes"] * caches["count"]).sum())
    one = rows.loc[rows["ranks"] == 1, "comp_mean"]
    t1 = float(one.min()) if len(one) else float("nan")
    out = []
    for label, grp in rows.groupby("label", sort=False):
        r = grp.iloc[0]
        p, q = (int(x) for x in r["grid"].split("x"))
        nx, ny = -(-int(r["n"]) // p), -(-int(r["n"]) // q)
        rank_bytes = 2 * (nx + 2) * (ny + 2) * roofline.WORD
        node_bytes = rank_bytes * int(r["ranks"])
        out.append({"label": label, "ranks": int(r["ranks"]), "grid": r["grid"],
                    "rank_bytes": rank_bytes, "node_bytes": node_bytes,
                    "rank_residency": roofline.residency(rank_bytes, caches),
                    "cacheable_share": min(1.0, total_cache / node_bytes),
                    "comp_efficiency": t1 / (int(r["ranks"]) * float(grp["comp_mean"].min()))})
    return pd.DataFrame(out)


def efficiency_by_family(rows: pd.DataFrame, configs: list[dict]) -> pd.DataFrame:
    """efficiency() for each process-grid family of `configs` against the single-rank runs.

    Returns the concatenated tables with a 'family' column, and the run ids behind them in
    attrs["provenance"] (for the figure's footnote); empty when there is no multi-rank family
    (a one-core partition)."""
    one = rows[rows["ranks"] == 1]
    tables = []
    for family in sorted({c["family"] for c in configs if c["ntasks"] > 1}):
        grids = [c["grid"] for c in configs if c["family"] == family]
        members = rows[rows["grid"].isin(grids)]
        if members.empty or one.empty:
            continue
        tables.append(efficiency(pd.concat([one, members])).assign(family=family))
    out = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(
        columns=["ranks", "runs", "seconds", "speedup", "efficiency", "comp_seconds", "comp_speedup",
                 "comp_efficiency", "family"])
    if "run_id" in rows:
        out.attrs["provenance"] = [{"run_id": r} for r in pd.unique(rows["run_id"])]
    return out


def _per_rank_rates(grp: pd.DataFrame) -> tuple[list[float], list[float]]:
    """Per-rank update rates of a group of runs [M updates/s]: total (lups / ranks) and compute
    (each rank's updates over its mean compute seconds)."""
    updates = grp["n"].astype(float) ** 2 * grp["iterations"].astype(float) / grp["ranks"]
    return (list(grp["lups"] / grp["ranks"] / 1e6), list(updates / grp["comp_mean"] / 1e6))


def efficiency_against_one_rank(rows: pd.DataFrame) -> pd.DataFrame:
    """Does each multi-rank configuration's efficiency differ from 1, by the course's statistics?
    Efficiency is a ratio of per-rank rates: the p-rank runs' update rate per rank over the
    single-rank runs' rate. So the p-rank runs' per-rank rates (total: lups / p; compute: updates
    per rank / mean compute seconds) are compared with the 1-rank runs' rates
    (hpclab.analysis.phrases.compare, unpaired, higher is better): the ratio's estimate is the
    efficiency, its 95 % CI says whether it differs from 1.

    rows: run_rows(). Returns one row per multi-rank label: label, ranks, efficiency and
    comp_efficiency (the decisions' ratio estimates, or the medians' ratio without a decision),
    total and compute (phrases.Comparison)."""
    one = rows[rows["ranks"] == 1]
    if one.empty:
        raise HpclabError("no single-rank runs to compare with", "run the 1-rank configuration too")
    one_total, one_comp = _per_rank_rates(one)
    out = []
    for label, grp in rows[rows["ranks"] > 1].groupby("label", sort=False):
        p = int(grp["ranks"].iloc[0])
        total_rates, comp_rates = _per_rank_rates(grp)
        kw = dict(b_name="1 rank", unit="M/s", lower_is_better=False)
        total = phrases.compare(total_rates, one_total, a_name=f"{p} ranks", quantity="updates per second per rank", **kw)
        comp = phrases.compare(comp_rates, one_comp, a_name=f"{p} ranks",
                               quantity="updates per compute second per rank", **kw)
        est = [c.decision.ratio.estimate if c.decision is not None else c.ratio for c in (total, comp)]
        out.append({"label": label, "ranks": p, "efficiency": est[0], "comp_efficiency": est[1],
                    "total": total, "compute": comp})
    return pd.DataFrame(out)


def median_run(rows: pd.DataFrame, label: str) -> str:
    """The run id of the median run of configuration `label` by wall time (the lower of the two
    middle runs for an even count): the run to show as typical, not the fastest one."""
    grp = rows[rows["label"] == label].sort_values("seconds")
    if grp.empty:
        raise HpclabError(f"no runs for {label!r}", "pass run_rows() of the scaling runs")
    return str(grp["run_id"].iloc[(len(grp) - 1) // 2])


def time_lost(rows: pd.DataFrame, label: str) -> dict:
    """Where a multi-rank configuration's extra rank-seconds went, against the single-rank runs:
    medians of p x T_comp[p] - T_comp[1] and p x T_mpi[p] - T_mpi[1] (seconds), and whether its
    rank-seconds p x T[p] differ from T[1] by the course's statistics (phrases.compare, unpaired,
    lower is better).
    Returns ranks, compute, mpi (extra seconds), total (the Comparison)."""
    one, grp = rows[rows["ranks"] == 1], rows[rows["label"] == label]
    if one.empty or grp.empty:
        raise HpclabError(f"no runs for {label!r} or for 1 rank", "pass run_rows() of the scaling runs")
    p = int(grp["ranks"].iloc[0])
    total = phrases.compare(list(p * grp["seconds"]), list(one["seconds"]), a_name=f"{p} x T[{p}]",
                            b_name="T[1]", quantity="rank-seconds", unit="s", lower_is_better=True)
    return {"ranks": p, "total": total,
            "compute": float((p * grp["comp_mean"]).median() - one["comp_mean"].median()),
            "mpi": float((p * grp["mpi_mean"]).median() - one["mpi_mean"].median())}
