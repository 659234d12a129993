"""The Hockney model of a point-to-point message: t(m) = L + m / BW.

L is the latency (time of an empty message) and BW the asymptotic bandwidth. With t in
microseconds, m in bytes and BW in MB/s (10^6 bytes per second), m / BW is already in
microseconds, so the model is linear in (L, 1/BW) and a least-squares fit is exact.
The fit is done on a size range the student chooses: one straight line cannot describe both
eager and rendezvous protocols, so the course fits above the eager limit; even there the line
cannot follow the caches (a ping-pong reuses its buffers, which stay in a core's L2 until they
outgrow it), and the residual panel shows where it stops fitting.

A latency is a time and cannot be negative, but an unconstrained line can cross zero below the
axis: over large messages only, the intercept is an extrapolation far outside the data, and on a
token-bucket-shaped link the first bucket of every message travels faster than the rate, which
shifts the line down by (bucket / rate). By default the fit is therefore constrained to L >= 0
(the exact least-squares solution under that bound); `clamped` says when the bound was active
and `unconstrained_latency_us` keeps the free intercept, so a figure can say why L is 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hpclab.core.errors import HpclabError


@dataclass(frozen=True)
class HockneyFit:
    """Result of a Hockney fit.

    latency_us: L in microseconds; bandwidth_mb_s: BW in MB/s (10^6 bytes/s);
    bytes, t_usec: the points used (arrays); residuals_us: measured - model, microseconds;
    size_range: (smallest, largest) message size in bytes used; relative: whether the
    squared relative errors were minimised; clamped: True when the free intercept was negative
    and L was held at 0 (then unconstrained_latency_us holds the free intercept, else it equals
    latency_us).
    """

    latency_us: float
    bandwidth_mb_s: float
    bytes: np.ndarray
    t_usec: np.ndarray
    residuals_us: np.ndarray
    size_range: tuple[int, int]
    relative: bool
    clamped: bool = False
    unconstrained_latency_us: float | None = None

    def predict(self, nbytes) -> np.ndarray:
        """Model time in microseconds for message sizes nbytes (bytes, scalar or array)."""
        return self.latency_us + np.asarray(nbytes, dtype=float) / self.bandwidth_mb_s

    @property
    def relative_residuals(self) -> np.ndarray:
        """(measured - model) / measured, dimensionless."""
        return self.residuals_us / self.t_usec

    @property
    def half_bandwidth_bytes(self) -> float:
        """n_1/2: the message size (bytes) that reaches half of BW, equal to L * BW."""
        return self.latency_us * self.bandwidth_mb_s


def hockney_fit(nbytes, t_usec, size_range: tuple[float, float] | None = None,
                relative: bool = True, nonnegative: bool = True) -> HockneyFit:
    """Fit t = L + m / BW by least squares.

    nbytes: message sizes in bytes; t_usec: one-way times in microseconds (same length).
    size_range: (min_bytes, max_bytes), inclusive; only points inside are fitted (default all).
    relative: minimise squared relative errors (default). Sizes span many decades, and an
    absolute fit lets the largest messages decide everything, leaving L meaningless.
    nonnegative: constrain L >= 0 (default). If the free intercept is negative, the constrained
    minimum lies on the bound, so L = 0 and 1/BW is the one-parameter least-squares slope.
    Returns a HockneyFit. Raises HpclabError when fewer than two distinct sizes fall in the
    range, when times are not positive, or when the fitted bandwidth is not positive.
    """
    m = np.asarray(nbytes, dtype=float)
    t = np.asarray(t_usec, dtype=float)
    if m.shape != t.shape or m.ndim != 1:
        raise HpclabError(f"sizes and times differ in shape ({m.shape} vs {t.shape})",
                          "pass two 1-D sequences of equal length")
    if not (np.isfinite(m).all() and np.isfinite(t).all()):
        raise HpclabError("sizes or times contain NaN or infinity", "drop incomplete rows first")
    lo, hi = size_range if size_range is not None else (m.min(initial=0), m.max(initial=0))
    if lo > hi:
        raise HpclabError(f"size range ({lo}, {hi}) is empty", "give (smallest, largest) bytes")
    keep = (m >= lo) & (m <= hi)
    m, t = m[keep], t[keep]
    if len(np.unique(m)) < 2:
        raise HpclabError(
            f"only {len(np.unique(m))} distinct message size(s) between {lo:g} and {hi:g} bytes",
            "widen the size range: a line needs at least two sizes",
        )
    if (t <= 0).any():
        raise HpclabError("a message time is zero or negative", "check the pingpong table")
    design = np.column_stack([np.ones_like(m), m])
    weights = 1.0 / t if relative else np.ones_like(t)
    coef, *_ = np.linalg.lstsq(design * weights[:, None], t * weights, rcond=None)
    latency, inv_bw = float(coef[0]), float(coef[1])
    free_latency = latency
    clamped = nonnegative and latency < 0
    if clamped:  # the bound is active: minimise sum(w^2 (t - m/BW)^2) over 1/BW alone
        wm, wt = weights * m, weights * t
        latency, inv_bw = 0.0, float(wm @ wt / (wm @ wm))
    if inv_bw <= 0:
        raise HpclabError(
            f"time does not grow with message size between {lo:g} and {hi:g} bytes "
            "(fitted bandwidth would be infinite or negative)",
            "fit a range that includes large messages (e.g. 64 KiB and up)",
        )
    resid = t - (latency + m * inv_bw)
    return HockneyFit(latency_us=latency, bandwidth_mb_s=1.0 / inv_bw, bytes=m, t_usec=t,
                      residuals_us=resid, size_range=(int(lo), int(hi)), relative=relative,
                      clamped=clamped, unconstrained_latency_us=free_latency)


def scaling_table(table, ranks: str = "ranks", time: str = "seconds"):
    """Speedup, efficiency and Karp-Flatt serial fraction from (ranks, time) measurements.

    table: a DataFrame with a rank count column `ranks` and a time column `time` (seconds);
    several runs per count are reduced to the fastest (the least disturbed one).
    Returns a DataFrame sorted by ranks: ranks, seconds, runs, speedup = T(p0)/T(p),
    ideal_speedup = p/p0, efficiency = speedup/ideal (fraction), karp_flatt = experimentally
    determined serial fraction (1/S - 1/q) / (1 - 1/q) with q = p/p0 (NaN at the baseline).
    The smallest rank count p0 is the baseline.
    """
    if ranks not in table or time not in table:
        raise HpclabError(f"scaling needs columns {ranks!r} and {time!r}",
                          f"the table has {', '.join(map(str, table.columns))}")
    data = table[[ranks, time]].dropna()
    if data.empty:
        raise HpclabError("scaling: no (ranks, time) rows", "check that the runs finished")
    if (data[ranks] <= 0).any() or (data[time] <= 0).any():
        raise HpclabError("scaling: rank counts and times must be positive", "check the table")
    best = data.groupby(ranks)[time].agg(["min", "size"]).reset_index()
    best.columns = ["ranks", "seconds", "runs"]
    p0, t0 = best["ranks"].iloc[0], best["seconds"].iloc[0]
    q = best["ranks"] / p0
    best["speedup"] = t0 / best["seconds"]
    best["ideal_speedup"] = q
    best["efficiency"] = best["speedup"] / q
    with np.errstate(divide="ignore", invalid="ignore"):
        kf = (1 / best["speedup"] - 1 / q) / (1 - 1 / q)
    best["karp_flatt"] = kf.where(q > 1)
    return pd.DataFrame(best)
