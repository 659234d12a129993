"""Sentences built from measurements: the one place the course words an outcome.

A notebook, a lab or the fidelity table never types "faster", "within the noise" or "an order of
magnitude" about a number the learner just measured: it asks this module, which looks at the
numbers and their spread and says only what they support.

The rule for "beyond the spread" is simple and stated everywhere it is used: each side has at
least MIN_RUNS repetitions and the two ranges (min..max) do not overlap. Fewer runs, or
overlapping ranges, give "within the noise" with the counts, whatever the medians say.

Every function is pure: numbers in, a `Comparison` or a string out. Swapping the two sides of a
comparison flips its sentence (tests/test_phrases.py checks it on recorded runs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median
from typing import Iterable, Sequence

MIN_RUNS = 3  # repetitions per side before a difference may be called real


@dataclass(frozen=True)
class Spread:
    """min, median and max of n repeated measurements of one quantity."""

    n: int
    min: float
    median: float
    max: float

    @classmethod
    def of(cls, values: Iterable[float]) -> "Spread":
        vals = [float(v) for v in values if v is not None and not math.isnan(float(v))]
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


def _num(x: float, digits: int = 3) -> str:
    """A number with `digits` significant figures, without scientific notation for ordinary sizes."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    mag = math.floor(math.log10(abs(x)))
    decimals = max(0, digits - 1 - mag)
    return f"{x:.{decimals}f}"


@dataclass(frozen=True)
class Comparison:
    """Two measured sides of one quantity, and what the numbers allow one to say about them.

    `lower_is_better` says which way is good (times: lower; bandwidths: higher); it only
    chooses the words ("slower"/"faster", "less"/"more")."""

    a_name: str
    b_name: str
    a: Spread
    b: Spread
    quantity: str
    unit: str
    lower_is_better: bool

    @property
    def ratio(self) -> float:
        """Median of a over median of b."""
        return self.a.median / self.b.median if self.b.median else math.inf

    @property
    def enough_runs(self) -> bool:
        return self.a.n >= MIN_RUNS and self.b.n >= MIN_RUNS

    @property
    def beyond_spread(self) -> bool:
        """At least MIN_RUNS per side and the ranges do not overlap: the difference is measured."""
        return self.enough_runs and not self.a.overlaps(self.b)

    @property
    def winner(self) -> str | None:
        """The better side's name when the difference is beyond the spread, else None."""
        if not self.beyond_spread:
            return None
        a_lower = self.a.median < self.b.median
        return self.a_name if a_lower == self.lower_is_better else self.b_name

    def word(self) -> str:
        """How a compares with b, one word or phrase: 'slower', 'faster', 'more', 'less', ..."""
        higher = self.a.median > self.b.median
        if self.unit_is_time:
            return "slower" if higher else "faster"
        return "higher" if higher else "lower"

    @property
    def unit_is_time(self) -> bool:
        return self.unit in {"s", "ms", "us", "ns", "ns per element", "ns per point", "ms per iteration"} or \
            self.quantity.startswith("time")

    def difference(self) -> str:
        """'29 % slower', '3.4x higher': the size of a against b, in the clearer of the two forms."""
        r = self.ratio
        if r >= 1.5 or r <= 1 / 1.5:
            big = max(r, 1 / r) if r > 0 else math.inf
            return f"{_num(big, 2)}x {self.word()}"
        pct = abs(r - 1) * 100
        return f"{pct:.0f} % {self.word()}"

    def sentence(self) -> str:
        """One sentence that states only what the numbers support, with the numbers."""
        nums = (f"{self.quantity}: {self.a_name} {self.a.text(self.unit)} vs "
                f"{self.b_name} {self.b.text(self.unit)}")
        if not self.enough_runs:
            return (f"{self.a_name} and {self.b_name} cannot be told apart with so few runs "
                    f"(at least {MIN_RUNS} per side are needed; {nums}).")
        if self.a.overlaps(self.b):
            return (f"{self.a_name} and {self.b_name} are within the noise of "
                    f"{min(self.a.n, self.b.n)} runs: their ranges overlap ({nums}).")
        return (f"{self.a_name} is {self.difference()} than {self.b_name}, beyond the spread of "
                f"{min(self.a.n, self.b.n)} runs per side ({nums}).")

    def swapped(self) -> "Comparison":
        return Comparison(self.b_name, self.a_name, self.b, self.a, self.quantity, self.unit, self.lower_is_better)


def chance_apart(na: int, nb: int) -> float:
    """How often the ranges of na and nb values drawn from one continuous distribution do not
    overlap: every ordering of the na + nb values is equally likely, and in exactly two of the
    C(na + nb, na) ways to place the a-values among them all a-values lie below all b-values, or
    above. 3 and 3 runs: 0.1, one time in ten; 5 and 5: 2/252, under 1 %."""
    return 2 / math.comb(na + nb, na) if na > 0 and nb > 0 else 1.0


def compare(a: Sequence[float], b: Sequence[float], *, a_name: str = "A", b_name: str = "B",
            quantity: str = "time", unit: str = "", lower_is_better: bool = True) -> Comparison:
    """Compare two sets of repeated measurements (a and b: values in the same unit)."""
    return Comparison(a_name, b_name, Spread.of(a), Spread.of(b), quantity, unit, lower_is_better)


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
