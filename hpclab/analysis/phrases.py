"""Sentences built from measurements: the one place the course words an outcome.

A notebook, a lab or the fidelity table never types "faster", "no difference" or "an order of
magnitude" about a number the learner just measured: it asks this module, which looks at the
numbers and their spread and says only what they support.

A comparison of two sides is decided by statistics (hpclab.analysis.stats, after Hoefler and
Belli, SC15): the ratio of the two sides with its 95 % confidence interval (CI), nonparametric
because timings are skewed. A CI inside 1/1.05..1.05 says "no difference larger than 5 %"; a CI
that excludes 1 otherwise says "different" (`beyond_spread`); anything else says "this machine
cannot tell" with the CI and the noise, and run counts too few to reach 95 % at all (fewer than
MIN_RUNS a side unpaired, MIN_RUNS_PAIRED paired) say "cannot be told apart with so few runs",
whatever the medians say. Runs are compared
unpaired unless the caller says they alternated round by round (paired=True).

Every function is pure: numbers in, a `Comparison` or a string out. Swapping the two sides of a
comparison flips its sentence (tests/test_phrases.py checks it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from statistics import median
from typing import Iterable, Sequence

from hpclab.analysis import stats

# Fewest runs per side before a decision can be reached at 95 %, from the exact distributions:
# unpaired 4 + 4 (1 - 2/C(8, 4) = 0.971; 3 + 3 reach only 0.9), paired 6 (1 - 2/2^6 = 0.969).
MIN_RUNS = stats.min_runs(paired=False)
MIN_RUNS_PAIRED = stats.min_runs(paired=True)


@dataclass(frozen=True)
class Spread:
    """min, median and max of n repeated measurements of one quantity."""

    n: int
    min: float
    median: float
    max: float

    @classmethod
    def of(cls, values: Iterable[float]) -> "Spread":
        vals = _measured(values)
        if not vals:
            raise ValueError("a spread needs at least one measured value")
        return cls(len(vals), min(vals), median(vals), max(vals))

    def overlaps(self, other: "Spread") -> bool:
        return self.min <= other.max and other.min <= self.max

    def text(self, unit: str = "", digits: int = 3) -> str:
        """'1.59 ms (1.52-1.66, 5 runs)' or '1.59 ms (1 run)'."""
        u = f" {unit}" if unit else ""
        if self.n == 1:
            return f"{_num(self.median, digits)}{u} (1 run)"
        return f"{_num(self.median, digits)}{u} ({_num(self.min, digits)}-{_num(self.max, digits)}, {self.n} runs)"


def _missing(v) -> bool:
    return v is None or math.isnan(float(v))


def _measured(values: Iterable[float]) -> list[float]:
    """The values that were measured (None and NaN, a failed run's marks, dropped)."""
    return [float(v) for v in values if not _missing(v)]


def _num(x: float, digits: int = 3) -> str:
    """A number with `digits` significant figures, without scientific notation for ordinary sizes."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    mag = math.floor(math.log10(abs(x)))
    decimals = max(0, digits - 1 - mag)
    return f"{x:.{decimals}f}"


def _r(x: float, extra: int = 0) -> str:
    """A ratio near 1 with two decimals (0.97, 1.04); far from 1, two significant figures;
    `extra` more digits when asked."""
    return f"{x:.{2 + extra}f}" if 0.1 <= x < 10 else _num(x, 2 + extra)


def _span(lo: float, hi: float, show=lambda x, extra: _num(x, 2 + extra)) -> str:
    """'1.6-2.1': an interval with as few digits as keep its two ends apart (at most 2 more)."""
    for extra in range(3):
        a, b = show(lo, extra), show(hi, extra)
        if a != b or lo == hi:
            break
    return f"{a}-{b}"


@dataclass(frozen=True)
class Comparison:
    """Two measured sides of one quantity, and what the numbers allow one to say about them.

    a and b are the sides' spreads; a_values and b_values the runs themselves (in the same unit),
    `paired` whether a_values[i] and b_values[i] ran in one round. `lower_is_better` says which way
    is good (times: lower; bandwidths: higher); it only chooses the words ("slower"/"faster",
    "lower"/"higher"). The decision is stats.decide's at `level` with `margin`."""

    a_name: str
    b_name: str
    a: Spread
    b: Spread
    quantity: str
    unit: str
    lower_is_better: bool
    a_values: tuple[float, ...] = field(default=(), repr=False)
    b_values: tuple[float, ...] = field(default=(), repr=False)
    paired: bool = False
    margin: float = stats.MARGIN
    level: float = stats.LEVEL

    @property
    def ratio(self) -> float:
        """Median of a over median of b."""
        return self.a.median / self.b.median if self.b.median else math.inf

    @cached_property
    def decision(self) -> stats.Decision | None:
        """stats.decide on the two sides' runs; None when a run is zero or negative (a ratio of
        such values means nothing) or the comparison was built without its runs."""
        if not self.a_values or not self.b_values or min(*self.a_values, *self.b_values) <= 0:
            return None
        return stats.decide(self.a_values, self.b_values, paired=self.paired, margin=self.margin,
                            level=self.level)

    @property
    def outcome(self) -> str:
        """'different', 'equivalent' or 'undecided' (stats.OUTCOMES)."""
        return self.decision.outcome if self.decision is not None else "undecided"

    @property
    def enough_runs(self) -> bool:
        """Whether these run counts can reach a decision at `level` at all (at least MIN_RUNS per
        side unpaired, MIN_RUNS_PAIRED paired, for equal sides)."""
        return stats.enough_runs_for(self.a.n, self.b.n, paired=self.paired, level=self.level)

    @property
    def beyond_spread(self) -> bool:
        """Decided "different" by stats.decide: the ratio's CI excludes 1 and is not within the margin."""
        return self.outcome == "different"

    @property
    def winner(self) -> str | None:
        """The better side's name when the two are decided different, else None."""
        if not self.beyond_spread:
            return None
        a_lower = self.decision.ratio.hi < 1
        return self.a_name if a_lower == self.lower_is_better else self.b_name

    def _estimate(self) -> float:
        return self.decision.ratio.estimate if self.decision is not None else self.ratio

    def word(self) -> str:
        """How a compares with b, one word: 'slower', 'faster', 'higher', 'lower' (from the ratio
        estimate of the decision, else the medians)."""
        higher = self._estimate() > 1
        if self.unit_is_time:
            return "slower" if higher else "faster"
        return "higher" if higher else "lower"

    @property
    def unit_is_time(self) -> bool:
        return self.unit in {"s", "ms", "us", "ns", "ns per element", "ns per point", "ms per iteration"} or \
            self.quantity.startswith("time")

    def difference(self) -> str:
        """'29 % slower', '3.4x higher': the size of a against b (the decision's ratio estimate),
        in the clearer of the two forms."""
        r = self._estimate()
        if r >= 1.5 or r <= 1 / 1.5:
            big = max(r, 1 / r) if r > 0 else math.inf
            return f"{_num(big, 2)}x {self.word()}"
        return f"{_num(abs(r - 1) * 100, 2)} % {self.word()}"

    def _runs(self) -> str:
        if self.paired:
            return f"{self.a.n} paired runs"
        if self.a.n == self.b.n:
            return f"{self.a.n} run{'s' if self.a.n != 1 else ''} each"
        return f"{self.a.n} and {self.b.n} runs"

    def _effect_ci(self) -> str:
        """The CI in the form difference() uses: '1.6-2.1x' or '8.0-17 %'."""
        r = self.decision.ratio
        if r.estimate >= 1.5 or r.estimate <= 1 / 1.5:
            lo, hi = (r.lo, r.hi) if r.estimate > 1 else (1 / r.hi, 1 / r.lo)
            return f"{_span(lo, hi)}x"
        lo, hi = sorted((abs(r.lo - 1) * 100, abs(r.hi - 1) * 100))  # as difference(): |ratio - 1|
        return f"{_span(lo, hi)} %"

    def sentence(self) -> str:
        """One sentence for a learner: the outcome first, then the numbers that support it."""
        d = self.decision
        u = f" {self.unit}" if self.unit else ""
        medians = f"medians {_num(self.a.median)} vs {_num(self.b.median)}{u}"
        where = f" in {self.quantity}"
        lvl = f"{self.level * 100:g} %"
        margin = f"{self.margin * 100:g} %"
        if d is None:
            return (f"{self.a_name} and {self.b_name} cannot be compared as a ratio{where}: "
                    f"some runs measured zero or less ({medians}; {self._runs()}).")
        r = d.ratio
        noise = f"noise +-{_num(d.noise * 100, 2)} %"
        if not d.reachable:
            fewest = stats.min_runs(paired=self.paired, level=self.level)
            need = f"{fewest} paired runs" if self.paired else f"{fewest} runs each"
            return (f"{self.a_name} and {self.b_name} cannot be told apart with so few runs "
                    f"({self._runs()}): a {lvl} CI of their {self.quantity} needs at least {need} "
                    f"(ratio {_r(r.estimate)}; {medians}; {noise}).")
        if d.outcome == "equivalent":
            return (f"{self.a_name} and {self.b_name}: no difference larger than "
                    f"{margin}{where} (ratio {_r(r.estimate)}, {lvl} CI "
                    f"{_span(r.lo, r.hi, _r)}; {medians}; {self._runs()}).")
        if d.outcome == "different":
            said = "" if self.unit_is_time else where
            return (f"{self.a_name} is {self.difference()} than {self.b_name}{said} ({lvl} CI "
                    f"{self._effect_ci()}; {medians}; {self._runs()}).")
        return (f"This machine cannot tell {self.a_name} from {self.b_name}{where} with {self._runs()}: "
                f"the ratio's {lvl} CI, {_span(r.lo, r.hi, _r)}, holds both 1 and differences over "
                f"{margin} ({medians}; {noise}).")

    def swapped(self) -> "Comparison":
        return Comparison(self.b_name, self.a_name, self.b, self.a, self.quantity, self.unit,
                          self.lower_is_better, self.b_values, self.a_values, self.paired,
                          self.margin, self.level)


def chance_apart(na: int, nb: int) -> float:
    """How often the ranges of na and nb values drawn from one continuous distribution do not
    overlap: every ordering of the na + nb values is equally likely, and in exactly two of the
    C(na + nb, na) ways to place the a-values among them all a-values lie below all b-values, or
    above. 3 and 3 runs: 0.1, one time in ten; 5 and 5: 2/252, under 1 %. (The false alarm rate
    of calling ranges apart a difference; Comparison decides by stats.decide instead.)"""
    return 2 / math.comb(na + nb, na) if na > 0 and nb > 0 else 1.0


def compare(a: Sequence[float], b: Sequence[float], *, a_name: str = "A", b_name: str = "B",
            quantity: str = "time", unit: str = "", lower_is_better: bool = True,
            paired: bool = False, margin: float = stats.MARGIN, level: float = stats.LEVEL) -> Comparison:
    """Compare two sets of repeated measurements (a and b: values in the same unit, > 0 for a
    decision). paired=True says a[i] and b[i] ran in one round (the runs alternated A B A B); a
    round with a missing value on either side is then dropped whole. Unpaired by default: equal
    lengths alone do not make runs paired. `margin` (0.05 = 5 %) and `level` (0..1) go to
    stats.decide."""
    if paired:
        if len(a) != len(b):
            raise ValueError(f"paired runs need one b per a: got {len(a)} and {len(b)} values")
        rounds = [(x, y) for x, y in zip(a, b) if not _missing(x) and not _missing(y)]
        av, bv = [float(x) for x, _ in rounds], [float(y) for _, y in rounds]
    else:
        av, bv = _measured(a), _measured(b)
    return Comparison(a_name, b_name, Spread.of(av), Spread.of(bv), quantity, unit, lower_is_better,
                      tuple(av), tuple(bv), paired, margin, level)


def ratio(big: float, small: float) -> str:
    """How many times one number is another, and its order of magnitude in words:
    '17x: about one order of magnitude', '1.3x: well under one order of magnitude',
    '340x: about two orders of magnitude'."""
    if small <= 0 or big <= 0:
        return "not comparable (a value is zero or negative)"
    r = big / small
    if r < 1:
        return f"{_num(1 / r, 2)}x smaller: " + _orders(1 / r)
    return f"{_num(r, 2)}x: " + _orders(r)


def _orders(r: float) -> str:
    k = math.log10(r)
    if k < 0.5:
        return "well under one order of magnitude"
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
    n = round(k)
    if abs(k - n) <= 0.25:
        return f"about {words.get(n, str(n))} order{'s' if n > 1 else ''} of magnitude"
    lo = math.floor(k)
    return f"between {words.get(lo, str(lo))} and {words.get(lo + 1, str(lo + 1))} orders of magnitude"


def pct(fraction: float) -> str:
    """0.634 -> '63 %' (the course writes a space before %)."""
    return f"{fraction * 100:.0f} %"


def share(part: float, whole: float, name: str) -> str:
    """'compute is 63 % of the whole'."""
    return f"{name} is {pct(part / whole)} of the whole" if whole else f"{name}: the whole is zero"


def dominant(parts: dict[str, float], whole: float | None = None, threshold: float = 0.5) -> str:
    """Which part leads a sum: 'compute dominates (63 % of the total)' when one part holds more
    than `threshold` of it, else 'no single part dominates: compute 41 %, transfer 30 %, ...'."""
    total = whole if whole is not None else sum(parts.values())
    if total <= 0:
        return "nothing was measured (the total is zero)"
    ordered = sorted(parts.items(), key=lambda kv: kv[1], reverse=True)
    top, value = ordered[0]
    if value / total > threshold:
        return f"{top} dominates ({pct(value / total)} of the total)"
    listed = ", ".join(f"{k} {pct(v / total)}" for k, v in ordered if v / total >= 0.005)
    return f"no single part dominates: {listed}"


def against_limit(value: float, limit: float, *, what: str, limit_name: str, unit: str = "",
                  spread: Spread | None = None) -> str:
    """A measurement against a bound (a roof, a peak): '72 % of the roof (8.1 of 11.2 G/s)'; above
    it, says so and that the bound was then not the limit (or the measurement includes something
    the bound does not count)."""
    u = f" {unit}" if unit else ""
    frac = value / limit if limit else math.inf
    body = f"{what} is {pct(frac)} of {limit_name} ({_num(value)} of {_num(limit)}{u})"
    if spread is not None and spread.n > 1:
        body += f"; its runs span {_num(spread.min / limit * 100, 2)}-{_num(spread.max / limit * 100, 2)} %"
    if frac > 1.05:
        body += f": above {limit_name}, so {limit_name} is not what limits it here"
    return body


def efficiency(values: dict[int, float]) -> str:
    """Parallel efficiencies by rank count, said with what they are: '1 rank 1.00, 2 ranks 1.03
    (above 1: the ranks together did better than one rank's rate times 2)'."""
    parts = [f"{p} rank{'s' if p != 1 else ''} {e:.2f}" for p, e in sorted(values.items())]
    above = [p for p, e in values.items() if e > 1.0]
    tail = ""
    if above:
        tail = (" (above 1 at " + ", ".join(str(p) for p in sorted(above)) +
                " ranks: more than the single rank's rate times the rank count)")
    return ", ".join(parts) + tail


def factors(total: float, parts: dict[str, float], *, what: str = "in all") -> str:
    """Effects that multiply, said as factors and as shares of the logarithm (never as shares of
    a sum, which would add them): total = the product of the parts (each a ratio > 0).

    '53x in all = 1.9x (the shared core) x 28x (busy-polling); on a log scale 16 % and 84 %'. A
    part below 1 is named as such ('0.95x: a gain'). When the parts' product is not the total
    (they were measured separately), the sentence gives the remainder as its own factor."""
    if total <= 0 or any(v <= 0 for v in parts.values()):
        return "not comparable (a ratio is zero or negative)"
    named = dict(parts)
    product = math.prod(named.values())
    rest = total / product
    if abs(math.log(rest)) > math.log(1.02):  # more than 2 % left over: show it, do not hide it
        named["not explained by the parts"] = rest
    body = " x ".join(f"{_num(v, 2)}x ({k})" for k, v in named.items())
    head = f"{_num(total, 2)}x {what} = {body}"
    log_total = math.log(total)
    if log_total == 0:
        return head
    if any(math.log(v) / log_total < 0 for v in named.values() if v != 1):
        # a factor that works against the total has no share of it: say so instead
        return f"{head}; the factors pull in opposite directions, so none is a share of the total"
    shares = " and ".join(pct(math.log(v) / log_total) for v in named.values())
    return f"{head}; on a log scale {shares}"


# --- comparisons as a small table, and what the noise watch saw beside them --------------------------

def said(cmp: "Comparison") -> str:
    """A comparison's outcome in a few words, for a table cell: '14x higher', '29 % slower',
    'no difference > 5 %', 'undecided' (or 'too few runs' when the run counts cannot decide)."""
    if cmp.outcome == "different":
        return cmp.difference()
    if cmp.outcome == "equivalent":
        return f"no difference > {cmp.margin * 100:g} %"
    return "undecided" if cmp.enough_runs else "too few runs"


def outcomes(comparisons: dict) -> "pd.DataFrame":
    """A small table of comparisons (the course puts numbers in tables, not in prose).

    comparisons: {row name: phrases.Comparison}. One row each: outcome (stats.decide's:
    different, equivalent, undecided), a vs b (said()), ratio (the decision's estimate of a/b,
    3 significant digits), its 95 % CI ('11.8-16.7') and the runs ('4 + 4', '6 paired')."""
    import pandas as pd

    rows = []
    for name, c in comparisons.items():
        r = c.decision.ratio if c.decision is not None else None
        rows.append({"comparison": name, "outcome": c.outcome, "a vs b": said(c),
                     "ratio a/b": float(f"{(r.estimate if r else c.ratio):.3g}"),
                     "95 % CI": f"{r.lo:.3g}-{r.hi:.3g}" if r else "-",
                     "runs": f"{c.a.n} paired" if c.paired else f"{c.a.n} + {c.b.n}"})
    return pd.DataFrame(rows).set_index("comparison")


def noise_note(runs) -> str:
    """What the noise watch saw beside an experiment's runs (hpclab.runs.parse.noise), as a
    sentence under its table: '3 of 12 runs were taken beside other work (...), so these
    decisions may reflect that work, not only the cases.'; '' when no run was disturbed."""
    from hpclab.runs.parse import noise  # runs carry their noise watch; the rest of this module is pure

    part = noise.beside_other_work(runs)
    if not part:
        return ""
    return f"{part[:1].upper()}{part[1:]}, so these decisions may reflect that work, not only the cases."
