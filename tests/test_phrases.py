"""Do the course's sentences say only what the numbers support, and flip when the sides swap?"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpclab.analysis import phrases

ROOF = Path(__file__).parent / "data" / "roof" / "runs.json"


def ns_per_element(kernel: str) -> list[float]:
    """Best time per element of one STREAM kernel in each of the 3 recorded 1-rank runs (ns)."""
    runs = json.loads(ROOF.read_text())["stream"]
    return [r["results"]["kernels"][kernel]["min_time"] / r["results"]["array_elements"] * 1e9 for r in runs]


def test_copy_is_slower_than_sum_beyond_the_spread_on_recorded_runs():
    """Copy reads two lines per element (one by write-allocate), Sum one: on the recorded runs
    Copy is about 2x slower and the ranges do not overlap."""
    c = phrases.compare(ns_per_element("Copy"), ns_per_element("Sum"), a_name="Copy", b_name="Sum",
                        quantity="time per element", unit="ns")
    assert c.beyond_spread and c.winner == "Sum"
    assert "Copy is 1.9x slower than Sum, beyond the spread of 3 runs" in c.sentence()


def test_swapping_the_sides_flips_the_sentence():
    c = phrases.compare(ns_per_element("Copy"), ns_per_element("Sum"), a_name="Copy", b_name="Sum",
                        quantity="time per element", unit="ns")
    s = c.swapped()
    assert s.winner == c.winner == "Sum"
    assert "Sum is 1.9x faster than Copy" in s.sentence()
    assert "slower" in c.sentence() and "faster" not in c.sentence().split("(")[0]


def test_overlapping_ranges_are_within_the_noise_whatever_the_medians():
    """Copy and Scale overlap on the recorded runs: no winner, and the sentence says so."""
    c = phrases.compare(ns_per_element("Scale"), ns_per_element("Copy"), a_name="Scale", b_name="Copy",
                        quantity="time per element", unit="ns")
    assert not c.beyond_spread and c.winner is None
    assert "within the noise of 3 runs" in c.sentence()
    assert "within the noise" in c.swapped().sentence()


def test_too_few_runs_are_never_called_a_difference():
    c = phrases.compare([1.0, 1.1], [5.0, 5.2], a_name="A", b_name="B")
    assert not c.beyond_spread and "cannot be told apart with so few runs" in c.sentence()


@pytest.mark.parametrize("quantity,unit,lower,word", [("bandwidth", "MB/s", False, "higher"), ("time", "ms", True, "slower")])
def test_the_word_follows_the_quantity(quantity, unit, lower, word):
    c = phrases.compare([10, 11, 12], [4, 5, 6], a_name="A", b_name="B", quantity=quantity, unit=unit,
                        lower_is_better=lower)
    assert f"A is 2.2x {word} than B" in c.sentence()
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
