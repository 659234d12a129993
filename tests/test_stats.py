"""Do the course's comparisons keep their promises: exact coverage, 5 % false alarms, power?

Pure functions on seeded samples; no cluster, no files.
"""

from __future__ import annotations

import math
import random

import pytest

from hpclab.analysis import stats


def lognormal(rng: random.Random, n: int, sigma: float, scale: float = 1.0) -> list[float]:
    """n timings around `scale` with a multiplicative noise of `sigma` (log scale)."""
    return [scale * rng.lognormvariate(0.0, sigma) for _ in range(n)]


# --- exact distributions, checked by hand -----------------------------------------------------

@pytest.mark.parametrize("n", range(6, 21))
def test_median_ci_coverage_is_the_binomial_sum(n):
    """Is the median's CI [x_(k), x_(n+1-k)] the narrowest whose coverage, the sum of C(n, i) / 2^n
    for i = k..n-k, reaches 95 %, and is that sum what it reports?"""
    est = stats.median_ci(range(1, n + 1))  # value i is the i-th order statistic
    k = int(est.lo)
    assert est.hi == n + 1 - k and est.median == (n + 1) / 2

    def binomial(depth):
        return sum(math.comb(n, i) for i in range(depth, n - depth + 1)) / 2 ** n

    assert est.coverage == pytest.approx(binomial(k), abs=1e-15)
    assert est.coverage >= 0.95 > binomial(k + 1)


@pytest.mark.parametrize("n", range(1, 6))
def test_too_few_runs_give_min_to_max_with_their_true_coverage(n):
    """With 5 runs or fewer no interval reaches 95 %: is it [min, max], saying 1 - 2^(1-n)?"""
    est = stats.median_ci([3.0, 1.0, 2.0, 5.0, 4.0][:n])
    assert (est.lo, est.hi) == (min([3.0, 1.0, 2.0, 5.0, 4.0][:n]), max([3.0, 1.0, 2.0, 5.0, 4.0][:n]))
    assert est.coverage == pytest.approx(1 - 2 ** (1 - n))


def test_six_paired_runs_all_one_way_give_the_extreme_walsh_averages():
    """6 paired runs, a always slower: is the CI [min, max] of a_i / b_i (the extreme Walsh
    averages are the extreme differences) with coverage 1 - 2/64?"""
    a = [1.10, 1.21, 1.15, 1.30, 1.12, 1.18]
    b = [1.00, 1.00, 1.05, 1.10, 1.00, 1.02]
    r = stats.ratio_ci(a, b, paired=True)
    quotients = [x / y for x, y in zip(a, b)]
    assert r.lo == pytest.approx(min(quotients)) and r.hi == pytest.approx(max(quotients))
    assert r.coverage == 1 - 2 / 64 and r.lo > 1


def test_seven_paired_runs_drop_the_two_extreme_walsh_averages_each_side():
    """n = 7: W+ <= 2 happens for 3 of the 128 sign patterns ({}, {1}, {2}); is k = 3, the
    coverage 1 - 6/128, and the Hodges-Lehmann estimate the median of the 28 Walsh averages?"""
    d = [0.01, 0.03, -0.02, 0.05, 0.02, 0.04, 0.00]
    r = stats.ratio_ci([math.exp(x) for x in d], [1.0] * 7, paired=True)
    walsh = sorted((d[i] + d[j]) / 2 for i in range(7) for j in range(i, 7))
    assert r.coverage == 1 - 6 / 128
    assert math.log(r.lo) == pytest.approx(walsh[2]) and math.log(r.hi) == pytest.approx(walsh[-3])
    assert math.log(r.estimate) == pytest.approx((walsh[13] + walsh[14]) / 2)


def test_two_paired_runs_estimate_the_geometric_middle():
    """Ratios 2 and 8: the Walsh averages of their logs are log 2, log 4, log 8; is the estimate 4?"""
    assert stats.ratio_ci([2.0, 8.0], [1.0, 1.0], paired=True).estimate == pytest.approx(4.0)


def test_unpaired_4_and_4_runs_reach_95_percent_and_3_and_3_do_not():
    """Mann-Whitney: 2 of the C(8, 4) = 70 orderings put every a below or above every b; is the
    extreme interval's coverage 1 - 2/70 for 4 + 4 and 1 - 2/20 = 0.9 for 3 + 3?"""
    a, b = [2.0, 2.2, 2.1, 2.3], [1.0, 1.1, 1.05, 1.2]
    r = stats.ratio_ci(a, b, paired=False)
    assert r.coverage == pytest.approx(1 - 2 / 70)
    assert r.lo == pytest.approx(2.0 / 1.2) and r.hi == pytest.approx(2.3 / 1.0)
    assert stats.ratio_ci(a[:3], b[:3], paired=False).coverage == pytest.approx(0.9)
    assert stats.min_runs(paired=False) == 4 and stats.min_runs(paired=True) == 6
    assert stats.enough_runs_for(3, 5, paired=False) and not stats.enough_runs_for(3, 4, paired=False)


def test_critical_values_match_the_published_tables():
    """Do the computed distributions give the textbook two-sided 5 % critical values (signed rank
    n = 10: 8; Mann-Whitney 10 and 10: 23), i.e. CI depths k = 9 and 24?"""
    d = [0.01 * i for i in range(1, 11)]
    r = stats.ratio_ci([math.exp(x) for x in d], [1.0] * 10, paired=True)
    walsh = sorted((d[i] + d[j]) / 2 for i in range(10) for j in range(i, 10))
    assert math.log(r.lo) == pytest.approx(walsh[8])
    a = [math.exp(0.013 * i) for i in range(10)]
    b = [math.exp(0.007 * i + 0.001) for i in range(10)]
    diffs = sorted(math.log(x) - math.log(y) for x in a for y in b)
    assert math.log(stats.ratio_ci(a, b, paired=False).lo) == pytest.approx(diffs[23])


def test_a_sample_that_cannot_make_a_ratio_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="one b per a"):
        stats.ratio_ci([1.0, 2.0], [1.0], paired=True)
    with pytest.raises(ValueError, match="<= 0"):
        stats.ratio_ci([1.0, 0.0], [1.0, 1.0], paired=False)
    with pytest.raises(ValueError, match="NaN"):
        stats.median_ci([1.0, float("nan")])
    with pytest.raises(ValueError, match="no values"):
        stats.median_ci([])


# --- what the decision promises, by sampling ----------------------------------------------------

@pytest.mark.parametrize("paired", [True, False])
def test_one_distribution_is_called_different_at_most_one_time_in_twenty(paired):
    """Two sets of 10 runs of one skewed distribution (lognormal, sigma 0.2): how often does
    decide say "different"? At most 1 - coverage (under 5 %); asserted <= 7 % over 2000 trials."""
    rng = random.Random(36)
    trials = 2000
    hits = sum(stats.decide(lognormal(rng, 10, 0.2), lognormal(rng, 10, 0.2), paired=paired).outcome == "different"
               for _ in range(trials))
    assert hits / trials <= 0.07


@pytest.mark.parametrize("paired", [True, False])
def test_a_ten_percent_shift_is_found_with_a_ci_that_holds_it(paired):
    """a 10 % slower than b, noise sigma 0.02, 8 runs each: is it "different" in >= 95 % of
    trials, and does the ratio's CI hold 1.10 as often as its coverage promises?"""
    rng = random.Random(110)
    trials = 1000
    found = held = 0
    coverage = None
    for _ in range(trials):
        d = stats.decide(lognormal(rng, 8, 0.02, 1.10), lognormal(rng, 8, 0.02), paired=paired)
        found += d.outcome == "different" and d.ratio.lo > 1
        held += d.ratio.lo <= 1.10 <= d.ratio.hi
        coverage = d.ratio.coverage
    assert found / trials >= 0.95
    # binomial sampling error of 1000 trials: three standard errors below the exact coverage
    assert held / trials >= coverage - 3 * math.sqrt(coverage * (1 - coverage) / trials)


@pytest.mark.parametrize("paired", [True, False])
def test_equal_tight_samples_are_equivalent(paired):
    """One distribution with little noise (sigma 0.005, 8 runs each): "equivalent", every time?"""
    rng = random.Random(5)
    outcomes = {stats.decide(lognormal(rng, 8, 0.005), lognormal(rng, 8, 0.005), paired=paired).outcome
                for _ in range(200)}
    assert outcomes == {"equivalent"}


def test_an_effect_inside_the_margin_is_equivalent_even_when_it_excludes_one():
    """a 2 % slower than b with almost no noise: the CI excludes 1 but lies within 1 +- 5 %; is
    that "equivalent" (an effect under the margin is not a difference the course names)?"""
    rng = random.Random(2)
    d = stats.decide(lognormal(rng, 8, 0.001, 1.02), lognormal(rng, 8, 0.001), paired=False)
    assert d.ratio.excludes_one() and d.outcome == "equivalent" and not d.needs_more()


def test_a_heavy_tail_with_few_runs_is_undecided_not_the_wrong_way():
    """Side a has about 30 % of its runs 2x slower (a shared VM's bad moments), 4 runs each: is
    the usual outcome "undecided", and is a ever called the faster one beyond chance (2.5 %)?"""
    rng = random.Random(30)
    trials = 1000
    undecided = wrong_way = 0
    for _ in range(trials):
        a = [v * (2.0 if rng.random() < 0.3 else 1.0) for v in lognormal(rng, 4, 0.02)]
        d = stats.decide(a, lognormal(rng, 4, 0.02), paired=False)
        undecided += d.outcome == "undecided"
        wrong_way += d.outcome == "different" and d.ratio.hi < 1
    assert undecided / trials >= 0.75
    assert wrong_way / trials <= 0.025
    # one such sample by hand: 2 of 6 runs doubled
    d = stats.decide([1.00, 2.02, 0.99, 1.01, 1.98, 1.00], [1.00, 1.01, 0.99, 1.02, 1.00, 0.98], paired=False)
    assert d.outcome == "undecided" and d.needs_more() and d.noise > 0.3


def test_too_few_runs_are_undecided_whatever_the_gap():
    """3 + 3 runs apart by 2x (the old rule's "beyond the spread"): undecided, since the extreme
    interval covers only 90 %?"""
    d = stats.decide([2.0, 2.1, 2.2], [1.0, 1.05, 1.1], paired=False)
    assert d.outcome == "undecided" and not d.reachable and d.ratio.coverage == pytest.approx(0.9)


def test_the_decision_is_the_same_whichever_side_comes_first():
    """Swapping a and b: the same outcome and the reciprocal ratio with its reciprocal CI?"""
    rng = random.Random(9)
    a, b = lognormal(rng, 7, 0.05, 1.2), lognormal(rng, 7, 0.05)
    for paired in (True, False):
        ab, ba = stats.decide(a, b, paired=paired), stats.decide(b, a, paired=paired)
        assert ab.outcome == ba.outcome
        assert ab.ratio.estimate == pytest.approx(1 / ba.ratio.estimate)
        assert (ab.ratio.lo, ab.ratio.hi) == pytest.approx((1 / ba.ratio.hi, 1 / ba.ratio.lo))
        assert ab.noise == ba.noise


# --- the stop rule ------------------------------------------------------------------------------

def adaptive(rng: random.Random, scale: float, sigma: float, paired: bool, cap: int = 20) -> stats.Stop:
    """Run rounds (one run a side) until stop_rule says stop; a is `scale` times b."""
    a: list[float] = []
    b: list[float] = []
    while not (step := stats.stop_rule(a, b, paired=paired, max_rounds=cap)).stop:
        a += lognormal(rng, 1, sigma, scale)
        b += lognormal(rng, 1, sigma)
    return step


@pytest.mark.parametrize("paired", [True, False])
def test_a_big_effect_stops_at_the_first_look(paired):
    """a 2x b with little noise: does the runner stop, decided, at the first round that may decide?"""
    rng = random.Random(1)
    first, _ = stats.looks(paired=paired)
    for _ in range(20):
        step = adaptive(rng, 2.0, 0.02, paired)
        assert (step.reason, step.rounds, step.decision.outcome) == ("decided", first, "different")


@pytest.mark.parametrize("paired", [True, False])
def test_pure_noise_runs_to_the_cap(paired):
    """One distribution with 20 % noise: can the margin ever be reached? No: the cap ends it."""
    rng = random.Random(4)
    step = adaptive(rng, 1.0, 0.2, paired)
    assert (step.stop, step.reason, step.rounds) == (True, "cap reached", 20)
    assert step.decision.outcome == "undecided"


def test_looking_every_round_keeps_false_alarms_under_five_percent():
    """Deciding after every round from the first look to 20: how often does one distribution end
    "different"? Without sharing the 5 % between looks it would be about 15 %; asserted <= 5 %."""
    rng = random.Random(12)
    trials = 300
    alarms = sum(adaptive(rng, 1.0, 0.2, True).decision.outcome == "different" for _ in range(trials))
    assert alarms / trials <= 0.05


def test_the_first_look_and_its_level_share_five_percent():
    """Default cap 20: first looks 9 paired (1 - 2/2^9 reaches 1 - 0.05/12) and 6 unpaired; a cap
    below what 95 % needs is refused; one look at the cap keeps 95 %."""
    assert stats.looks(paired=True) == (9, pytest.approx(1 - 0.05 / 12))
    assert stats.looks(paired=False) == (6, pytest.approx(1 - 0.05 / 15))
    assert stats.looks(paired=True, min_rounds=6, max_rounds=6) == (6, 0.95)
    with pytest.raises(ValueError, match="cannot reach"):
        stats.looks(paired=True, max_rounds=5)
    assert not stats.stop_rule([], [], paired=True).stop
    assert stats.stop_rule([2.0] * 8, [1.0] * 8, paired=True).reason == "another round"
