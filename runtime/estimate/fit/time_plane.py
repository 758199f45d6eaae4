"""Per-iteration time at the target, and how well the measurements know it.

Timings are noisy where memory is exact, and a small probe's time is mostly fixed per-call cost:
the slope that carries it to the target comes from the small differences between sizes, and an
error there is multiplied by the distance to the target. So each measured size keeps one sample
per run (``samples.stage_sample``), and the fit says its own uncertainty, by the one noise model
(``noise``):

- the samples' pooled relative noise (``noise.relative_noise``);
- each size's median then has the standard error ``MEDIAN_SE x noise x median / sqrt(n)``;
- the plane is a *local* model: each size adds ``MODEL_ERROR x distance x median`` to its standard
  error (in quadrature), the distance being how many e-folds its time terms lie from the target's;
- the plane ``constant + Σ slope_i x term_i`` is fitted by weighted least squares (weights
  ``1 / (se² + model²)``), exactly (``exact``), and its value at the target has the variance
  ``target' (X' W X)^-1 target``;
- when more sizes were measured than the plane needs and they scatter about it more than their
  noise explains, the variance is multiplied by that excess, the weighted residuals' chi-square
  per degree of freedom (``misfit``, at least 1).

``spread`` is that standard deviation (one sigma). The calibration policy reads it to decide
whether a larger probe is needed, before running one (``predicted_spread``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from fractions import Fraction

from attrs import frozen

from runtime.estimate.fit.exact import ZERO, dot, independent_rows, row, weighted_least_squares_at
from runtime.estimate.fit.noise import distance, fit_weight, relative_noise


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


def size_noise(sizes: Sequence[SizeTimes]) -> float:
    """The sizes' pooled relative noise (``noise.relative_noise``)."""
    return relative_noise([s.seconds for s in sizes])


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
    level = size_noise(sizes) if noise is None else noise
    rows = [row(s.terms) for s in sizes]
    values = [Fraction(s.median) for s in sizes]
    weights = [
        fit_weight(s.median, len(s.seconds), level, distance(s.terms, target)) for s in sizes
    ]
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
        (w * (v - dot(coefficients, r)) ** 2 for r, v, w in zip(rows, values, weights)), ZERO
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
    noise = size_noise(sizes)
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
