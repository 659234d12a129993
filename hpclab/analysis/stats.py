"""Repeated timings compared the way Hoefler and Belli ask: medians, confidence intervals, a test.

T. Hoefler and R. Belli, "Scientific Benchmarking of Parallel Computing Systems", SC15: report
the median of repeated runs with a nonparametric confidence interval (CI), compare two systems by
a test of their difference rather than by eye, and let the variability set how many runs are
enough. Timings are skewed: a run can only be slowed, and on a shared virtual machine a slow run
(another tenant, a page fault storm, a migrated vCPU) is common. A mean and a normal-theory
interval chase that tail; medians and order statistics do not assume any shape.

What this module computes, each from exact distributions (no table, so any number of runs works):
- `median_ci`: the median of one sample and a distribution-free CI from two order statistics
  (the count of runs below the true median is binomial(n, 1/2)).
- `ratio_ci`: how many times a is b, on the log scale, with a CI. Paired runs (a[i] and b[i]
  measured in one round, as the course's experiments alternate A B A B): the Hodges-Lehmann
  estimate of log(a_i / b_i) and the Wilcoxon signed-rank CI from the Walsh averages. Unpaired:
  the Hodges-Lehmann shift of log a against log b and the Mann-Whitney CI from all pairwise
  differences.
- `decide`: "different", "equivalent" (no difference larger than a margin) or "undecided".
- `stop_rule`: whether an adaptive runner has run enough rounds; its looks share the 5 % of
  chance between them, so deciding after every round does not multiply false alarms.

When n is too small for the asked level, an interval is widened to the extreme order statistics
and its `coverage` says what it really is; `decide` never reaches a verdict on such an interval.
The exact distributions assume continuous values; ties (two identical timings) make the true
coverage slightly larger than the one reported.

Every function is pure: numbers in, frozen records out.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Sequence

LEVEL = 0.95     # the course's confidence level
MARGIN = 0.05    # a ratio within 1/(1 + MARGIN) .. 1 + MARGIN is "no difference"
OUTCOMES = ("different", "equivalent", "undecided")


def _sample(values: Iterable[float], what: str, positive: bool = False) -> list[float]:
    vals = [float(v) for v in values]
    if not vals:
        raise ValueError(f"{what} has no values: at least one measured run is needed")
    if any(not math.isfinite(v) for v in vals):
        raise ValueError(f"{what} holds a NaN or infinite value: drop the failed runs before comparing")
    if positive and any(v <= 0 for v in vals):
        raise ValueError(f"{what} holds a value <= 0: a ratio needs positive times or rates")
    return vals


# --- exact null distributions ---------------------------------------------------------------
# Each is a list of integer counts c[s], s = 0..M, of equally likely outcomes with statistic s,
# and their total; all three are symmetric about M / 2.

@lru_cache(maxsize=None)
def _binomial_counts(n: int) -> tuple[tuple[int, ...], int]:
    """Counts of the number of runs below the true median: C(n, s) out of 2^n."""
    return tuple(math.comb(n, s) for s in range(n + 1)), 2 ** n


@lru_cache(maxsize=None)
def _signed_rank_counts(n: int) -> tuple[tuple[int, ...], int]:
    """Counts of the Wilcoxon signed-rank sum W+ for n pairs: subsets of {1..n} with sum s, of 2^n."""
    top = n * (n + 1) // 2
    c = [1] + [0] * top
    for rank in range(1, n + 1):
        for s in range(top, rank - 1, -1):
            c[s] += c[s - rank]
    return tuple(c), 2 ** n


@lru_cache(maxsize=None)
def _mann_whitney_counts(m: int, n: int) -> tuple[tuple[int, ...], int]:
    """Counts of the Mann-Whitney U for samples of m and n: the coefficients of the Gaussian
    binomial [m + n choose m]_q = prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i), of C(m + n, m)."""
    top = m * n
    c = [1] + [0] * top
    for i in range(1, m + 1):
        # times (1 - q^(n+i)), then divided by (1 - q^i); terms above q^top cannot come back down
        for s in range(top, n + i - 1, -1):
            c[s] -= c[s - n - i]
        for s in range(i, top + 1):
            c[s] += c[s - i]
    return tuple(c), math.comb(m + n, m)


def _depth(counts: Sequence[int], total: int, level: float) -> tuple[int, float]:
    """(k, coverage): the deepest k >= 1 such that the interval between the k-th smallest and the
    k-th largest of the M ordered candidates (M = len(counts) - 1) covers with probability
    1 - 2 P(S <= k - 1) >= level. When even k = 1 falls short, k = 1 and its true coverage."""
    m = len(counts) - 1
    below = 0          # P(S <= k - 1) * total
    k, coverage = 1, 1 - 2 * counts[0] / total
    for depth in range(1, (m + 1) // 2 + 1):
        below += counts[depth - 1]
        cov = 1 - 2 * below / total
        if cov < level:
            break
        k, coverage = depth, cov
    return k, max(coverage, 0.0)


# --- one sample -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Estimate:
    """The median of n runs and its CI [lo, hi] (same unit as the runs); `coverage` is the exact
    probability (0..1) that such an interval holds the true median."""

    n: int
    median: float
    lo: float
    hi: float
    coverage: float

    @property
    def rel_half_width(self) -> float:
        """Half the CI's width over the median (0.03 = +-3 %); inf for a zero median."""
        return (self.hi - self.lo) / 2 / abs(self.median) if self.median else math.inf


def median_ci(values: Iterable[float], level: float = LEVEL) -> Estimate:
    """The median of repeated measurements (any unit) with a distribution-free CI at `level`
    (0..1): the k-th smallest and k-th largest run, k the deepest whose binomial coverage reaches
    `level`. With too few runs for `level` (5 or fewer at 0.95) the interval is [min, max] and
    `coverage` says what it really is (1 - 2^(1-n))."""
    vals = sorted(_sample(values, "the sample"))
    n = len(vals)
    k, coverage = _depth(*_binomial_counts(n), level)
    return Estimate(n, statistics.median(vals), vals[k - 1], vals[n - k], coverage)


# --- two samples ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Ratio:
    """How many times a is b: `estimate` with its CI [lo, hi] (dimensionless, > 0) and the exact
    coverage (0..1) of that interval; n_a and n_b runs, paired or not."""

    estimate: float
    lo: float
    hi: float
    coverage: float
    n_a: int
    n_b: int
    paired: bool

    def excludes_one(self) -> bool:
        return self.lo > 1 or self.hi < 1

    def within(self, margin: float) -> bool:
        """The CI lies inside [1/(1 + margin), 1 + margin]: no difference larger than `margin`."""
        return 1 / (1 + margin) <= self.lo and self.hi <= 1 + margin


def ratio_ci(a: Sequence[float], b: Sequence[float], *, paired: bool, level: float = LEVEL) -> Ratio:
    """The ratio a/b of two sets of positive measurements in one unit, with a CI at `level`.

    paired=True: a[i] and b[i] come from one round (equal lengths). The estimate is exp of the
    Hodges-Lehmann median of the Walsh averages (d_i + d_j) / 2, i <= j, of d = log(a / b); the CI
    their k-th smallest and largest, k from the exact signed-rank distribution.
    paired=False: exp of the median of all differences log a_i - log b_j, the CI from the exact
    Mann-Whitney distribution.
    Too few runs for `level` (paired: under 6; unpaired: 3 + 3, say) widen the CI to the extreme
    candidates, and `coverage` says what it really is."""
    la = [math.log(v) for v in _sample(a, "side a", positive=True)]
    lb = [math.log(v) for v in _sample(b, "side b", positive=True)]
    if paired:
        if len(la) != len(lb):
            raise ValueError(f"paired runs need one b per a: got {len(la)} and {len(lb)} runs "
                             "(compare them unpaired, or drop the unmatched rounds)")
        d = [x - y for x, y in zip(la, lb)]
        cands = sorted((d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d)))
        counts, total = _signed_rank_counts(len(d))
    else:
        cands = sorted(x - y for x in la for y in lb)
        counts, total = _mann_whitney_counts(len(la), len(lb))
    k, coverage = _depth(counts, total, level)
    m = len(cands)
    return Ratio(math.exp(statistics.median(cands)), math.exp(cands[k - 1]), math.exp(cands[m - k]),
                 coverage, len(la), len(lb), paired)


def enough_runs_for(n_a: int, n_b: int, *, paired: bool, level: float = LEVEL) -> bool:
    """Can n_a and n_b runs reach a CI of the ratio at `level` at all? Paired: n_a = n_b >= 6 at
    0.95 (1 - 2/2^n); unpaired: 1 - 2/C(n_a + n_b, n_a) >= level (4 + 4, or 3 + 5, at 0.95)."""
    if n_a < 1 or n_b < 1 or (paired and n_a != n_b):
        return False
    counts, total = _signed_rank_counts(n_a) if paired else _mann_whitney_counts(n_a, n_b)
    return 1 - 2 * counts[0] / total >= level


def min_runs(*, paired: bool, level: float = LEVEL) -> int:
    """The fewest runs per side (equal sides) that can reach `level`: 6 paired, 4 unpaired at 0.95."""
    n = 1
    while not enough_runs_for(n, n, paired=paired, level=level):
        n += 1
    return n


# --- the decision ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Decision:
    """What two sets of runs allow one to say: `outcome` is one of OUTCOMES.

    a and b are each side's median with its CI, `ratio` the ratio a/b with its CI, `margin` the
    largest relative difference (0.05 = 5 %) called "no difference", `level` the CI's confidence."""

    a: Estimate
    b: Estimate
    ratio: Ratio
    margin: float
    level: float
    outcome: str

    @property
    def noise(self) -> float:
        """The larger of the two sides' median CI half-widths over their medians (0.18 = +-18 %)."""
        return max(self.a.rel_half_width, self.b.rel_half_width)

    @property
    def reachable(self) -> bool:
        """Whether these run counts can reach `level` at all."""
        return self.ratio.coverage >= self.level

    def needs_more(self) -> bool:
        """True when undecided: then the CI is either not yet at `level` or straddles 1 and
        reaches beyond the margin, and more runs narrow it towards one side or inside the margin."""
        return self.outcome == "undecided"


def decide(a: Sequence[float], b: Sequence[float], *, paired: bool, margin: float = MARGIN,
           level: float = LEVEL) -> Decision:
    """Compare two sets of positive measurements of one quantity (same unit).

    "equivalent" when the ratio's CI lies within [1/(1 + margin), 1 + margin] (this wins even if
    the CI also excludes 1: an effect under the margin is not one the course calls a difference);
    "different" when the CI excludes 1 and is not inside the margin; "undecided" otherwise, and
    always when the run counts cannot reach `level`. Two samples of one distribution come out
    "different" in at most 1 - level of trials."""
    ratio = ratio_ci(a, b, paired=paired, level=level)
    if ratio.coverage < level:
        outcome = "undecided"
    elif ratio.within(margin):
        outcome = "equivalent"
    elif ratio.excludes_one():
        outcome = "different"
    else:
        outcome = "undecided"
    return Decision(median_ci(a, level), median_ci(b, level), ratio, margin, level, outcome)


@dataclass(frozen=True)
class Stop:
    """An adaptive runner's next step: `stop` with `reason` "decided" or "cap reached", or not with
    reason "another round"; `rounds` done so far, `first_look` (the round of the first decision
    that can count) and `look_level` (the confidence of each look), and the decision on the runs
    so far at `look_level` (None before any run)."""

    stop: bool
    reason: str
    rounds: int
    first_look: int
    look_level: float
    decision: Decision | None


def looks(*, paired: bool, min_rounds: int = 1, max_rounds: int = 20, level: float = LEVEL) -> tuple[int, float]:
    """(first_look, look_level) for an adaptive runner that decides after every round from
    first_look to max_rounds: each of those looks gets an equal share of 1 - level (Bonferroni),
    so chance alone ends a sequence on "different" (or "equivalent") in at most 1 - level of them.
    first_look is the earliest round >= min_rounds whose runs can reach look_level (9 paired,
    6 unpaired with the defaults, against 6 and 4 for a single look at 0.95)."""
    if max_rounds < min_runs(paired=paired, level=level):
        raise ValueError(f"a cap of {max_rounds} rounds cannot reach {level * 100:g} %: at least "
                         f"{min_runs(paired=paired, level=level)} are needed")
    for first in range(max(min_rounds, 1), max_rounds + 1):
        per_look = 1 - (1 - level) / (max_rounds - first + 1)
        if enough_runs_for(first, first, paired=paired, level=per_look):
            return first, per_look
    return max_rounds, level  # unreachable: at max_rounds one look at `level` is enough


def stop_rule(a: Sequence[float], b: Sequence[float], *, paired: bool, min_rounds: int = 1,
              max_rounds: int = 20, margin: float = MARGIN, level: float = LEVEL) -> Stop:
    """Whether to run another round of A and B, given the runs so far (a round = one run a side;
    values > 0 in one unit).

    Deciding after every round gives chance many tries: with looks at every round from 6 to 20,
    two samples of one distribution end "different" in about 15 % of sequences, not 5 %. So each
    look is a decision at `looks(...)`'s stricter look_level, and no look comes before first_look.
    It stops as soon as a look decides ("different" or "equivalent") or at `max_rounds`
    ("cap reached", the decision then says what is known, usually "undecided")."""
    first, per_look = looks(paired=paired, min_rounds=min_rounds, max_rounds=max_rounds, level=level)
    rounds = min(len(a), len(b))
    decision = decide(a, b, paired=paired, margin=margin, level=per_look) if rounds else None
    if rounds >= first and decision is not None and decision.outcome != "undecided":
        return Stop(True, "decided", rounds, first, per_look, decision)
    if rounds >= max_rounds:
        return Stop(True, "cap reached", rounds, first, per_look, decision)
    return Stop(False, "another round", rounds, first, per_look, decision)
