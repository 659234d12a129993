"""Do the course's sentences say only what the numbers support (decided by hpclab.analysis.stats),
and flip when the sides swap?"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from hpclab.analysis import phrases

ROOF = Path(__file__).parent / "data" / "roof" / "runs.json"


def ns_per_element(kernel: str) -> list[float]:
    """Best time per element of one STREAM kernel in each of the 3 recorded 1-rank runs (ns)."""
    runs = json.loads(ROOF.read_text())["stream"]
    return [r["results"]["kernels"][kernel]["min_time"] / r["results"]["array_elements"] * 1e9 for r in runs]


def test_three_recorded_runs_a_side_are_too_few_even_with_ranges_apart():
    """Copy's 3 recorded runs all lie above Sum's, as its second read per element predicts; but
    ranges of 3 and 3 runs of one distribution fall apart one time in ten. Is it no winner, with
    the counts needed for 95 % and the numbers?"""
    c = phrases.compare(ns_per_element("Copy"), ns_per_element("Sum"), a_name="Copy", b_name="Sum",
                        quantity="time per element", unit="ns")
    assert not c.a.overlaps(c.b) and phrases.chance_apart(3, 3) == 0.1
    assert not c.enough_runs and c.outcome == "undecided" and not c.beyond_spread and c.winner is None
    assert c.sentence().startswith("Copy and Sum cannot be told apart with so few runs (3 runs each): "
                                   "a 95 % CI of their time per element needs at least 4 runs each")
    assert "ratio 1.90" in c.sentence() and "medians 0.856 vs 0.449 ns" in c.sentence()


def timings(seed: int, n: int, sigma: float, scale: float = 1.0) -> list[float]:
    """n lognormal timings around `scale` (ms), multiplicative noise `sigma`."""
    rng = random.Random(seed)
    return [scale * rng.lognormvariate(0.0, sigma) for _ in range(n)]


def words_before_numbers(sentence: str) -> int:
    return len(sentence.split("(")[0].split())


def test_a_decided_difference_names_the_winner_first_and_flips_when_swapped():
    """Slow 1.8x Fast, 6 runs each: 'Slow is 1.8x slower than Fast' with the CI of that factor,
    and the swapped comparison 'Fast is 1.8x faster than Slow' with the same winner?"""
    c = phrases.compare(timings(1, 6, 0.02, 1.8), timings(2, 6, 0.02), a_name="Slow", b_name="Fast",
                        quantity="time", unit="ms")
    s = c.swapped()
    assert c.outcome == s.outcome == "different" and c.beyond_spread and s.beyond_spread
    assert c.winner == s.winner == "Fast"
    assert c.sentence().startswith("Slow is 1.8x slower than Fast (95 % CI 1.76-1.83x; medians ")
    assert s.sentence().startswith("Fast is 1.8x faster than Slow (95 % CI 1.76-1.83x; medians ")
    assert c.sentence().endswith("; 6 runs each).")
    assert "faster" not in c.sentence() and "slower" not in s.sentence()
    assert words_before_numbers(c.sentence()) <= 30


def test_a_small_difference_is_said_in_percent_with_its_interval():
    """10 % slower, 8 paired runs: the effect and its CI both in percent?"""
    c = phrases.compare(timings(3, 8, 0.01, 1.10), timings(4, 8, 0.01), a_name="A", b_name="B", unit="ms",
                        paired=True)
    text = c.sentence()
    assert c.outcome == "different" and text.startswith("A is 1") and "% slower than B (95 % CI " in text
    assert text.endswith("; 8 paired runs).")
    lo, hi = (float(x) for x in text.split("95 % CI ")[1].split(" %")[0].split("-"))
    assert lo <= (c.decision.ratio.estimate - 1) * 100 <= hi


def test_equal_sides_say_no_difference_larger_than_the_margin():
    """One distribution with little noise, 6 runs each: 'no difference larger than 5 %', both ways?"""
    c = phrases.compare(timings(5, 6, 0.005), timings(6, 6, 0.005), a_name="A", b_name="B",
                        quantity="time per element", unit="ns")
    assert c.outcome == "equivalent" and not c.beyond_spread and c.winner is None
    for text, first in ((c.sentence(), "A and B"), (c.swapped().sentence(), "B and A")):
        assert text.startswith(f"{first}: no difference larger than 5 % in time per element (ratio ")
        assert words_before_numbers(text) <= 30


def test_noisy_sides_say_this_machine_cannot_tell_with_the_noise():
    """One distribution with 20 % noise, 6 runs each: 'cannot tell', the CI and the noise, both ways?"""
    c = phrases.compare(timings(7, 6, 0.2), timings(8, 6, 0.2), a_name="A", b_name="B", unit="ms")
    d = c.decision
    assert c.outcome == "undecided" and c.enough_runs and d.needs_more() and c.winner is None
    assert c.sentence().startswith("This machine cannot tell A from B in time with 6 runs each: the ratio's 95 % CI, ")
    assert c.swapped().sentence().startswith("This machine cannot tell B from A in time with 6 runs each")
    assert f"noise +-{phrases._num(d.noise * 100, 2)} %" in c.sentence()
    assert words_before_numbers(c.sentence()) <= 30


def test_too_few_runs_are_never_called_a_difference():
    c = phrases.compare([1.0, 1.1], [5.0, 5.2], a_name="A", b_name="B")
    assert not c.beyond_spread and "cannot be told apart with so few runs" in c.sentence()


def test_min_runs_is_the_fewest_that_can_reach_95_percent():
    """MIN_RUNS (unpaired) 4: 3 + 3 reach only 90 %; MIN_RUNS_PAIRED 6: 5 pairs reach 93.75 %."""
    assert (phrases.MIN_RUNS, phrases.MIN_RUNS_PAIRED) == (4, 6)
    apart = [[10.0, 11.0, 12.0, 10.5, 11.5, 10.2], [4.0, 5.0, 6.0, 4.5, 5.5, 4.2]]
    for n, paired, decided in ((3, False, False), (4, False, True), (5, True, False), (6, True, True)):
        c = phrases.compare(apart[0][:n], apart[1][:n], paired=paired)
        assert c.enough_runs == decided and c.beyond_spread == decided


def test_runs_are_unpaired_unless_the_caller_says_they_alternated():
    """Equal lengths alone do not pair runs; paired=True drops a round with a missing value whole."""
    assert not phrases.compare([1, 2, 3], [1, 2, 3]).paired
    c = phrases.compare([1.0, None, 1.2, 1.1], [1.0, 1.1, float("nan"), 1.05], paired=True)
    assert c.paired and c.a_values == (1.0, 1.1) and c.b_values == (1.0, 1.05)
    with pytest.raises(ValueError, match="one b per a"):
        phrases.compare([1.0, 2.0], [1.0], paired=True)


def test_a_zero_or_negative_run_is_not_made_a_ratio():
    c = phrases.compare([0.0, 1.0, 1.1, 1.2], [1.0, 1.1, 1.2, 1.0])
    assert c.decision is None and c.outcome == "undecided" and c.winner is None
    assert "cannot be compared as a ratio" in c.sentence()


@pytest.mark.parametrize("quantity,unit,lower,word", [("bandwidth", "MB/s", False, "higher"), ("time", "ms", True, "slower")])
def test_the_word_follows_the_quantity(quantity, unit, lower, word):
    c = phrases.compare([10, 11, 12, 10.5], [4, 5, 6, 4.5], a_name="A", b_name="B", quantity=quantity, unit=unit,
                        lower_is_better=lower)
    assert c.sentence().startswith(f"A is 2.3x {word} than B")
    assert (" in bandwidth (" in c.sentence()) == (quantity == "bandwidth")
    assert c.winner == ("B" if lower else "A")


@pytest.mark.parametrize("big,small,words", [(5.94, 0.34, "17x: about one order of magnitude"),
                                              (1.3, 1.0, "1.3x: well under one order of magnitude"),
                                              (340, 1.0, "340x: between two and three orders of magnitude"),
                                              (1000, 1.0, "1000x: about three orders of magnitude")])
def test_orders_of_magnitude_are_counted_not_guessed(big, small, words):
    assert phrases.ratio(big, small) == words


def test_a_swapped_ratio_says_smaller():
    assert phrases.ratio(0.34, 5.94).startswith("17x smaller")


def test_dominant_needs_more_than_half():
    assert phrases.dominant({"compute": 63, "transfer": 30, "rest": 7}).startswith("compute dominates (63 %")
    assert phrases.dominant({"compute": 41, "transfer": 30, "rest": 29}).startswith("no single part dominates")


def test_against_limit_says_when_a_value_exceeds_its_bound():
    assert "72 % of the roof" in phrases.against_limit(7.2, 10, what="the solver", limit_name="the roof")
    assert "is not what limits it" in phrases.against_limit(12, 10, what="the solver", limit_name="the roof")


def test_spread_text_names_the_runs():
    assert phrases.Spread.of([1.52, 1.589, 1.66]).text("ms") == "1.59 ms (1.52-1.66, 3 runs)"


def test_factors_multiply_and_never_add():
    """Two effects of 1.9x and 28x are 53x together, shown as factors and log shares (not 46 % + 53 %)."""
    text = phrases.factors(1.9 * 28, {"the shared core": 1.9, "busy-polling": 28})
    assert text.startswith("53x in all = 1.9x (the shared core) x 28x (busy-polling)")
    assert "on a log scale 16 % and 84 %" in text
    assert "not explained" not in text


def test_factors_show_what_the_parts_leave_unexplained():
    text = phrases.factors(10.0, {"a": 2.0, "b": 2.0})
    assert "2.5x (not explained by the parts)" in text
    assert phrases.factors(0, {"a": 2.0}).startswith("not comparable")


def test_factors_in_opposite_directions_get_no_shares():
    """A factor below 1 in a total above 1 is not a share of it: no log shares are given."""
    text = phrases.factors(0.46, {"the shared core": 0.73, "busy-polling": 2.0, "yielding": 0.315})
    assert "pull in opposite directions" in text and "log scale" not in text


def test_the_chance_that_two_ranges_of_one_distribution_do_not_overlap_is_exact():
    """2 / C(na + nb, na), checked against every ordering of 3 + 3 values and by sampling 5 + 5."""
    import itertools
    import random

    orderings = set(itertools.permutations("aaabbb"))
    apart = [o for o in orderings if "".join(o) in ("aaabbb", "bbbaaa")]
    assert phrases.chance_apart(3, 3) == len(apart) / len(orderings) == 0.1
    rng = random.Random(7)
    trials = 20000
    hits = 0
    for _ in range(trials):
        a, b = [rng.random() for _ in range(5)], [rng.random() for _ in range(5)]
        hits += max(a) < min(b) or max(b) < min(a)
    assert abs(hits / trials - phrases.chance_apart(5, 5)) < 0.003
    assert phrases.chance_apart(0, 3) == 1.0
