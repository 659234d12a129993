"""Tests for hpclab.fits: the Hockney fit t = L + m / BW."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpclab.errors import HpclabError
from hpclab.fits import hockney_fit

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
