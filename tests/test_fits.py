"""Tests for hpclab.analysis.fits: the Hockney fit t = L + m / BW."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpclab.core.errors import HpclabError
from hpclab.analysis.fits import hockney_fit

SIZES = np.array([2**k for k in range(0, 23)], dtype=float)


@given(latency=st.floats(0.05, 100.0), bandwidth=st.floats(10.0, 1e5),
       relative=st.booleans())
@settings(max_examples=60, deadline=None)
def test_exact_data_gives_exact_parameters(latency, bandwidth, relative):
    """Does data made exactly from the model give back L and BW (to rounding)?"""
    t = latency + SIZES / bandwidth
    fit = hockney_fit(SIZES, t, relative=relative)
    assert fit.latency_us == pytest.approx(latency, rel=1e-7, abs=1e-9)
    assert fit.bandwidth_mb_s == pytest.approx(bandwidth, rel=1e-7)
    assert np.abs(fit.residuals_us).max() <= 1e-7 * t.max()
    assert fit.half_bandwidth_bytes == pytest.approx(latency * bandwidth, rel=1e-6)


def test_noisy_data_gives_close_parameters():
    """With 2 % multiplicative noise, are L and BW recovered within a few percent?"""
    rng = np.random.default_rng(20260101)
    latency, bandwidth = 1.5, 8000.0
    sizes = np.repeat(SIZES, 5)
    t = (latency + sizes / bandwidth) * (1 + 0.02 * rng.standard_normal(sizes.size))
    fit = hockney_fit(sizes, t)
    assert fit.latency_us == pytest.approx(latency, rel=0.05)
    assert fit.bandwidth_mb_s == pytest.approx(bandwidth, rel=0.05)
    assert abs(np.median(fit.relative_residuals)) < 0.02


def test_size_range_selects_points():
    """Are only messages inside the chosen size range used, both ends included?"""
    t = 2.0 + SIZES / 500.0
    t[SIZES > 65536] *= 3  # a protocol switch the student wants to leave out
    fit = hockney_fit(SIZES, t, size_range=(1024, 65536))
    assert fit.bytes.min() == 1024 and fit.bytes.max() == 65536
    assert fit.latency_us == pytest.approx(2.0)
    assert fit.bandwidth_mb_s == pytest.approx(500.0)
    assert fit.predict(0) == pytest.approx(2.0)


def test_too_few_sizes_is_an_error():
    """Does a range holding one message size fail with advice to widen it?"""
    with pytest.raises(HpclabError, match="only 1 distinct message size") as err:
        hockney_fit(SIZES, 1 + SIZES, size_range=(8, 8))
    assert "widen" in err.value.hint


def test_flat_times_are_an_error():
    """Does a range where time does not grow give an error instead of a negative bandwidth?"""
    with pytest.raises(HpclabError, match="does not grow"):
        hockney_fit([1, 2, 4, 8], [1.0, 0.99, 0.98, 0.97])


@pytest.mark.parametrize("sizes,times,msg", [
    ([1, 2, 3], [1.0, 2.0], "differ in shape"),
    ([1, 2], [1.0, float("nan")], "NaN"),
    ([1, 2], [0.0, 1.0], "zero or negative"),
])
def test_bad_input_is_an_error(sizes, times, msg):
    """Are mismatched, NaN and non-positive inputs refused with a message?"""
    with pytest.raises(HpclabError, match=msg):
        hockney_fit(sizes, times)


@given(sizes=st.lists(st.integers(0, 1 << 24), min_size=2, max_size=24, unique=True),
       noise=st.lists(st.floats(0.5, 2.0), min_size=24, max_size=24),
       latency=st.floats(-2000.0, 100.0), bandwidth=st.floats(10.0, 1e5), relative=st.booleans())
@settings(max_examples=200, deadline=None)
def test_constrained_fit_never_gives_a_negative_latency(sizes, noise, latency, bandwidth, relative):
    """Whatever positive times come in (even made from a negative 'latency', as a token bucket
    produces), is the default fit's L >= 0, and is it the least-squares optimum under that bound?"""
    m = np.array(sizes, dtype=float)
    t = np.maximum(latency + m / bandwidth, 0.01) * np.array(noise[:len(m)])
    try:
        fit = hockney_fit(m, t, relative=relative)
    except HpclabError:  # time falls with size: no positive bandwidth exists, refused loudly
        return
    assert fit.latency_us >= 0 and fit.bandwidth_mb_s > 0
    free = hockney_fit(m, t, relative=relative, nonnegative=False) if not fit.clamped else None
    if fit.clamped:
        assert fit.latency_us == 0 and fit.unconstrained_latency_us < 0
    else:
        assert fit.latency_us == free.latency_us == fit.unconstrained_latency_us
    # no other line with L >= 0 fits better: try the optimum's neighbours
    w = 1 / t if relative else np.ones_like(t)
    cost = lambda L, inv: float(np.sum((w * (t - L - m * inv)) ** 2))  # noqa: E731
    best = cost(fit.latency_us, 1 / fit.bandwidth_mb_s)
    for dL in (0.0, 1e-3, 1.0):
        for f in (0.999, 1.0, 1.001):
            assert best <= cost(fit.latency_us + dL, f / fit.bandwidth_mb_s) * (1 + 1e-9) + 1e-12


def test_token_bucket_link_gives_the_rate_and_flags_the_clamp():
    """On a shaped link whose first 125 kB per message pass unshaped, t = (m - B)/R + small: is the
    free intercept negative, the default L held at 0 and flagged, and BW within 10 % of R?"""
    rate, bucket = 125.0, 125_000  # MB/s and bytes: 1 Gbit/s with a 1 ms bucket
    sizes = np.array([2**k for k in range(20, 25)], dtype=float)  # 1 MiB .. 16 MiB
    t = 30 + bucket / 3000 + (sizes - bucket) / rate
    free = hockney_fit(sizes, t, nonnegative=False)
    assert free.latency_us < 0
    fit = hockney_fit(sizes, t)
    assert fit.clamped and fit.latency_us == 0
    assert fit.bandwidth_mb_s == pytest.approx(rate, rel=0.1)


def test_scaling_of_a_perfect_code_is_ideal():
    """Does time T/p give speedup p, efficiency 1 and a zero serial fraction?"""
    import pandas as pd

    from hpclab.analysis.fits import scaling_table

    table = pd.DataFrame({"ranks": [1, 2, 4, 8], "seconds": [8.0, 4.0, 2.0, 1.0]})
    sc = scaling_table(table)
    assert list(sc["speedup"]) == [1.0, 2.0, 4.0, 8.0]
    assert np.allclose(sc["efficiency"], 1.0)
    assert np.isnan(sc["karp_flatt"].iloc[0])
    assert np.allclose(sc["karp_flatt"].iloc[1:], 0.0)


def test_scaling_recovers_amdahl_serial_fraction():
    """For Amdahl's law with serial fraction f, is the Karp-Flatt metric exactly f?"""
    import pandas as pd

    from hpclab.analysis.fits import scaling_table

    f = 0.1
    p = np.array([1, 2, 4, 8, 16])
    table = pd.DataFrame({"ranks": p, "seconds": 10 * (f + (1 - f) / p)})
    sc = scaling_table(table)
    assert np.allclose(sc["karp_flatt"].iloc[1:], f)


def test_scaling_keeps_the_fastest_repeat_and_baseline_is_smallest():
    """With repeats and a baseline of 2 ranks, is the best time used and speedup relative to 2?"""
    import pandas as pd

    from hpclab.analysis.fits import scaling_table

    table = pd.DataFrame({"ranks": [4, 2, 2, 4], "seconds": [3.0, 6.0, 5.0, 2.5]})
    sc = scaling_table(table)
    assert list(sc["ranks"]) == [2, 4] and list(sc["runs"]) == [2, 2]
    assert sc["speedup"].iloc[1] == pytest.approx(2.0)
    assert sc["ideal_speedup"].iloc[1] == 2


def test_scaling_refuses_missing_columns():
    """Does a table without the time column fail with the columns it has?"""
    import pandas as pd

    from hpclab.analysis.fits import scaling_table

    with pytest.raises(HpclabError, match="needs columns"):
        scaling_table(pd.DataFrame({"ranks": [1]}))
