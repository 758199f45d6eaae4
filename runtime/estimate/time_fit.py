"""Per-iteration time at the target, and how well the measurements know it.

Timings are noisy where memory is exact, and a small probe's time is mostly fixed per-call cost:
the slope that carries it to the target comes from the small differences between sizes, and an
error there is multiplied by the distance to the target. So each measured size keeps one sample
per run (a record's median steady iteration: the iterations of one run are slow or fast
together, so they are not independent samples), and the fit says its own uncertainty:

- **noise**: the samples' relative spread, pooled over the sizes measured more than once (the
  median over sizes of ``1.4826 x MAD / median``, a robust standard deviation, times
  ``SMALL_SAMPLE``'s factor for the size's sample count: a MAD of 3 samples is about half the
  standard deviation), at least ``NOISE_FLOOR``; ``DEFAULT_NOISE`` when no size has two samples;
- each size's median then has the standard error ``1.2533 x noise x median / sqrt(n)``;
- the plane is a *local* model: a time per pixel drifts with size (caches, kernel choice), so a
  size far from the target says less about the target than its noise suggests. Each size adds
  ``MODEL_ERROR x distance x median`` to its standard error (in quadrature), the distance being
  how many e-folds its time terms lie from the target's (the largest ``|ln(target / size)|`` over
  the terms both have above 0);
- the plane ``constant + Σ slope_i x term_i`` is fitted by weighted least squares (weights
  ``1 / (se² + model²)``), exactly (``runtime.estimate.planes``), and its value at the target has
  the variance ``target' (X' W X)^-1 target``;
- when more sizes were measured than the plane needs and they scatter about it more than their
  noise explains (a time per pixel that changes with size: caches, kernel choice), the variance is
  multiplied by that excess, the weighted residuals' chi-square per degree of freedom
  (``misfit``, at least 1), so the spread covers what the plane cannot follow.

``spread`` is that standard deviation (one sigma). The calibration policy reads it to decide
whether a larger probe is needed, before running one (``predicted_spread``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from fractions import Fraction

from attrs import frozen

from runtime.estimate.planes import independent_rows, row, weighted_least_squares_at

#: Relative noise assumed when no size was measured twice.
DEFAULT_NOISE = 0.05
#: The least relative noise: clocks, caches and schedulers jitter even when samples agree.
NOISE_FLOOR = 0.005
#: How far the plane may be off at a size, relative to its time, per e-fold of distance between
#: the size's time terms and the target's. Measured on the CPU (bench/README.md, "Time near the
#: target", `bench/drift.py`): the Wan VAE's decode time per pixel rose 16 % and 35 % from 64 to
#: 128 px (1.4 e-folds of area) in two runs, 11-25 % an e-fold, part of which a plane's constant
#: takes up; on a GPU small sizes leave the device idle, the other way round.
MODEL_ERROR = 0.1
#: A robust standard deviation from the median absolute deviation (normal samples).
MAD_TO_SD = 1.4826
#: ``1.4826 x MAD`` of a few samples is far below the standard deviation: of 3 normal samples its
#: median is 0.54 sigma (the middle sample's own deviation, 0, is one of the 3). These factors
#: make it median-unbiased for n samples (pooling over sizes takes a median): 1 / the median of
#: ``1.4826 x MAD`` over simulated normal samples (tests/runtime/estimate/test_time_fit.py
#: checks them by simulation); past 16 samples ``1 + 1.2 / n``.
SMALL_SAMPLE: tuple[float, ...] = (
    1.0, 1.0, 1.414, 1.871, 1.487, 1.338, 1.264, 1.209, 1.178, 1.150,
    1.135, 1.120, 1.107, 1.097, 1.090, 1.082, 1.077,
)  # fmt: skip
#: The standard error of a median is about this times the mean's (normal samples).
MEDIAN_SE = 1.2533


@frozen
class SizeTimes:
    """The per-iteration samples of one stage at one measured size (its time terms), one a run."""

    terms: tuple[Fraction, ...]
    seconds: tuple[float, ...]

    @property
    def median(self) -> float:
        """The size's typical per-iteration time."""
        return statistics.median(self.seconds)


@frozen
class TimeFit:
    """The fitted per-iteration time at the target, with its one-sigma spread."""

    value: float
    spread: float
    coefficients: tuple[float, ...]
    noise: float
    misfit: float = 1.0  # the spread's inflation for sizes off the plane (chi-square per dof)


def relative_noise(sizes: Sequence[SizeTimes]) -> float:
    """The samples' pooled relative standard deviation (see the module docstring)."""
    spreads = []
    for size in sizes:
        if len(size.seconds) < 2:
            continue
        middle = size.median
        if middle <= 0:
            continue
        mad = statistics.median(abs(s - middle) for s in size.seconds)
        spreads.append(MAD_TO_SD * small_sample(len(size.seconds)) * mad / middle)
    if not spreads:
        return DEFAULT_NOISE
    return max(NOISE_FLOOR, statistics.median(spreads))


def distance(terms: Sequence[Fraction], target: Sequence[Fraction]) -> float:
    """E-folds between a size's time terms and the target's: the largest ``|ln(target / size)|``
    over the terms above 0 at both (0 when none is: nothing says how far)."""
    return max(
        (abs(math.log(t / x)) for x, t in zip(terms, target) if x > 0 and t > 0), default=0.0
    )


def small_sample(n: int) -> float:
    """The factor that makes ``1.4826 x MAD`` of ``n`` normal samples median-unbiased."""
    return SMALL_SAMPLE[n] if n < len(SMALL_SAMPLE) else 1 + 1.2 / n


def _weight(median: float, count: int, noise: float, far: float = 0.0) -> Fraction:
    """``1 / (se² + model²)`` of a median of ``count`` samples around ``median``, ``far`` e-folds
    from the target (a floor keeps it finite)."""
    scale = max(median, 1e-9)
    se = MEDIAN_SE * noise * scale / math.sqrt(max(count, 1))
    model = MODEL_ERROR * far * scale
    return Fraction(1 / (se * se + model * model))


def fit_time(
    sizes: Sequence[SizeTimes],
    target: Sequence[Fraction],
    noise: float | None = None,
    misfit: float | None = None,
) -> TimeFit | None:
    """The plane through the sizes' medians at ``target``; None unless two or more sizes determine
    it there. ``noise`` and ``misfit`` are measured from the sizes unless given."""
    if len(sizes) < 2:
        return None
    level = relative_noise(sizes) if noise is None else noise
    rows = [row(s.terms) for s in sizes]
    values = [Fraction(s.median) for s in sizes]
    weights = [_weight(s.median, len(s.seconds), level, distance(s.terms, target)) for s in sizes]
    fitted = weighted_least_squares_at(rows, values, weights, row(target))
    if fitted is None:
        return None
    value, coefficients, variance = fitted
    if misfit is None:
        misfit = lack_of_fit(rows, values, weights, coefficients)
    return TimeFit(
        float(value),
        math.sqrt(max(0.0, float(variance)) * misfit),
        tuple(float(c) for c in coefficients),
        level,
        misfit,
    )


def lack_of_fit(
    rows: Sequence[Sequence[Fraction]],
    values: Sequence[Fraction],
    weights: Sequence[Fraction],
    coefficients: Sequence[Fraction],
) -> float:
    """How much more the sizes scatter about the plane than their noise explains: the weighted
    residuals' chi-square per degree of freedom, at least 1 (1 when no size is spare)."""
    free = len(rows) - len(independent_rows([tuple(r) for r in rows]))
    if free <= 0:
        return 1.0
    chi2 = sum(
        w * (v - sum((c * x for c, x in zip(coefficients, r)), Fraction(0))) ** 2
        for r, v, w in zip(rows, values, weights)
    )
    return max(1.0, float(chi2) / free)


def predicted_spread(
    sizes: Sequence[SizeTimes],
    extra: Sequence[tuple[Sequence[Fraction], int]],
    target: Sequence[Fraction],
) -> float | None:
    """The spread at ``target`` once ``extra`` sizes (terms, sample count) are measured too, each
    assumed to land on the current fit (and the current excess scatter to stay): what a probe
    would buy, before running it."""
    current = fit_time(sizes, target)
    noise = relative_noise(sizes)
    misfit = 1.0 if current is None else current.misfit  # the excess scatter stays
    guesses = []
    for terms, count in extra:
        at = fit_time(sizes, terms, noise)
        guess = at.value if at is not None else max(s.median for s in sizes)
        guesses.append(SizeTimes(tuple(Fraction(t) for t in terms), (guess,) * max(count, 1)))
    hypothetical = fit_time([*sizes, *guesses], target, noise, misfit)
    if hypothetical is None:
        return None if current is None else current.spread
    return hypothetical.spread
