"""The time fit's value and uncertainty: by hand, and against an independent weighted least squares
(numpy's ``lstsq`` on rows scaled by the square roots of the weights -- noise and model error per
e-fold from the target, in quadrature -- its covariance scaled by the residuals' chi-square per
degree of freedom when that exceeds 1)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.estimate.fit.noise import (
    DEFAULT_NOISE,
    MAD_TO_SD,
    MEDIAN_SE,
    MODEL_ERROR,
    NOISE_FLOOR,
    distance,
    small_sample,
)
from runtime.estimate.fit.time_plane import SizeTimes, fit_time, predicted_spread
from runtime.estimate.fit.time_plane import size_noise as relative_noise


def size(term: int, *seconds: float) -> SizeTimes:
    return SizeTimes((Fraction(term),), tuple(seconds))


def test_two_sizes_by_hand():
    # Both sizes spread by MAD 0.1 and 0.2 around medians 1 and 2: relative noise 1.4826 x 0.1,
    # times 1.871 for three samples.
    # Through (10, 1) and (20, 2) the line is 0.1 x term: 4 at 40, which is -2 y(10) + 3 y(20), so
    # its variance is 4 var(10) + 9 var(20). Each size's variance is its median's se² (se(x) =
    # 1.2533 x noise x median / sqrt(3)) plus the model error of a size ln(40 / x) e-folds away:
    # (0.1 x ln 4 x 1)² at 10, (0.1 x ln 2 x 2)² at 20.
    sizes = [size(10, 1.0, 1.1, 0.9), size(20, 2.0, 2.2, 1.8)]
    fit = fit_time(sizes, (Fraction(40),))
    assert fit is not None
    noise = MAD_TO_SD * 1.871 * 0.1
    se10 = MEDIAN_SE * noise * 1.0 / math.sqrt(3)
    var10 = se10**2 + (MODEL_ERROR * math.log(4) * 1.0) ** 2
    var20 = (2 * se10) ** 2 + (MODEL_ERROR * math.log(2) * 2.0) ** 2
    assert fit.noise == pytest.approx(noise)
    assert fit.value == pytest.approx(4.0)
    assert fit.coefficients == pytest.approx((0.0, 0.1), abs=1e-12)
    assert fit.spread == pytest.approx(math.sqrt(4 * var10 + 9 * var20))


@pytest.mark.parametrize("n", [*range(2, 17), 20, 30])
def test_the_small_sample_factor_makes_a_few_samples_mad_median_unbiased(n):
    # An independent check by simulation: normal samples of size n, 20,000 draws; the median of
    # 1.4826 x MAD x factor over the draws is the standard deviation (1) within 3 %.
    x = np.random.default_rng(n).standard_normal((20_000, n))
    mad = np.median(np.abs(x - np.median(x, axis=1, keepdims=True)), axis=1)
    assert np.median(MAD_TO_SD * small_sample(n) * mad) == pytest.approx(1.0, rel=0.03)


def test_pooled_noise_of_three_runs_a_size_is_the_samples_relative_deviation():
    # 200 sizes of 3 runs each, 5 % normal noise around 1 s: the pooled estimate is 5 %, where the
    # plain 1.4826 x MAD would say 2.7 %.
    rng = np.random.default_rng(3)
    sizes = [
        SizeTimes((Fraction(k + 1),), tuple(1 + 0.05 * rng.standard_normal(3))) for k in range(200)
    ]
    assert relative_noise(sizes) == pytest.approx(0.05, rel=0.1)


def test_distance_counts_e_folds_of_the_terms_both_sides_have():
    assert distance((Fraction(10),), (Fraction(40),)) == pytest.approx(math.log(4))
    assert distance((Fraction(40),), (Fraction(10),)) == pytest.approx(math.log(4))
    assert distance((Fraction(2), Fraction(8)), (Fraction(4), Fraction(4))) == pytest.approx(
        math.log(2)
    )
    assert distance((Fraction(0), Fraction(3)), (Fraction(5), Fraction(3))) == 0.0
    assert distance((), ()) == 0.0


def test_distance_past_a_float_either_way_is_its_e_folds_not_an_overflow():
    """issue 39: `time ~ height ** 60 * height ** 60` planned at height 4096 from sizes of height
    16 made the ratio 2**1440, and ``math.log`` of it an OverflowError (exit 3)."""
    small, large = Fraction(16**120), Fraction(4096**120)
    assert distance((small,), (large,)) == pytest.approx(120 * math.log(256))
    assert distance((large,), (small,)) == pytest.approx(120 * math.log(256))
    assert distance((Fraction(1, 3**700),), (Fraction(3**700),)) == pytest.approx(
        1400 * math.log(3)
    )


def test_a_size_at_the_target_carries_no_model_error():
    # Three sizes on a bent curve; the one at the target's terms decides the value nearly alone.
    sizes = [size(10, 1.0, 1.0, 1.0), size(20, 2.0, 2.0, 2.0), size(40, 6.0, 6.0, 6.0)]
    fit = fit_time(sizes, (Fraction(40),))
    assert fit is not None
    assert fit.value == pytest.approx(6.0, rel=0.01)


def test_noise_defaults_and_floor():
    assert relative_noise([size(10, 1.0), size(20, 2.0)]) == DEFAULT_NOISE  # nothing repeated
    assert relative_noise([size(10, 1.0, 1.0, 1.0)]) == NOISE_FLOOR  # identical samples
    assert fit_time([size(10, 1.0, 1.1)], (Fraction(40),)) is None  # one size fits no slope


def test_a_target_outside_the_measured_span_is_not_fitted():
    sizes = [
        SizeTimes((Fraction(1), Fraction(1)), (1.0,)),
        SizeTimes((Fraction(2), Fraction(2)), (2.0,)),
    ]
    assert fit_time(sizes, (Fraction(3), Fraction(9))) is None


def test_a_farther_size_narrows_the_spread_more_than_a_nearer_one():
    sizes = [size(10, 1.0, 1.1, 0.9), size(20, 2.0, 2.2, 1.8)]
    target = (Fraction(160),)
    now = fit_time(sizes, target)
    assert now is not None
    near = predicted_spread(sizes, [((Fraction(30),), 3)], target)
    far = predicted_spread(sizes, [((Fraction(80),), 3)], target)
    assert near is not None and far is not None
    assert far < near < now.spread


def test_sizes_off_the_line_widen_the_spread_by_their_excess_scatter():
    # (10, 1), (20, 2), (30, 4): each median known to about 1.2533 x 5 % (one sample, default
    # noise), plus 10 % a e-fold from the target at 60 of model error. The weighted line misses by
    # more than both explain (chi-square 2.3 on one degree of freedom): the spread grows by its
    # square root, and the bent line's own leverage widens it further.
    on_line = [size(10, 1.0), size(20, 2.0), size(30, 3.0)]
    off_line = [size(10, 1.0), size(20, 2.0), size(30, 4.0)]
    target = (Fraction(60),)
    straight, bent = fit_time(on_line, target), fit_time(off_line, target)
    assert straight is not None and bent is not None
    assert straight.misfit == 1.0
    assert bent.misfit > 2
    assert bent.spread > 1.5 * straight.spread


def _oracle(sizes: list[SizeTimes], target: float) -> tuple[float, float]:
    noise = relative_noise(sizes)
    rows, values, roots = [], [], []
    for s in sizes:
        se = MEDIAN_SE * noise * s.median / math.sqrt(len(s.seconds))
        model = MODEL_ERROR * abs(math.log(target / float(s.terms[0]))) * s.median
        rows.append([1.0, float(s.terms[0])])
        values.append(s.median)
        roots.append(1 / math.sqrt(se * se + model * model))
    a = np.array(rows) * np.array(roots)[:, None]
    b = np.array(values) * np.array(roots)
    beta = np.linalg.lstsq(a, b, rcond=None)[0]
    t = np.array([1.0, target])
    covariance = np.linalg.inv(a.T @ a)
    free = len(sizes) - 2
    chi2 = float(np.sum((a @ beta - b) ** 2))
    misfit = max(1.0, chi2 / free) if free > 0 else 1.0
    return float(t @ beta), float(math.sqrt(t @ covariance @ t * misfit))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 1000),
            st.lists(st.floats(0.01, 10.0), min_size=1, max_size=5),
        ),
        min_size=2,
        max_size=6,
        unique_by=lambda x: x[0],
    ),
    st.integers(1, 5000),
)
def test_the_fit_agrees_with_numpy_weighted_least_squares(data, target):
    sizes = [SizeTimes((Fraction(t),), tuple(seconds)) for t, seconds in data]
    fit = fit_time(sizes, (Fraction(target),))
    assert fit is not None
    value, spread = _oracle(sizes, target)
    scale = max(abs(value), max(s.median for s in sizes))
    assert fit.value == pytest.approx(value, rel=1e-6, abs=1e-9 * scale)
    assert fit.spread == pytest.approx(spread, rel=1e-6, abs=1e-9 * scale)
