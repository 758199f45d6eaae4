"""Two regimes of one measured series: the sizes nearest the target on one plane, the smaller ones
on a plane with the same slopes and a constant of their own (a fixed part their peaks carry, or
lack, that the larger sizes' do not). A weights level's activations under offload bend so at small
sizes (``runtime.estimate.peak_fit``): the plane through the nearest sizes that span every term
then reaches down to a bent size for a direction and reads its offset as a slope, negative.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from attrs import frozen

from runtime.estimate.fit.exact import ZERO, estimable, fit_rows, predict, row

Terms = tuple[int | Fraction, ...]


@frozen
class Split:
    """The shared plane (the near regime's: the far sizes' own constant left out), the number of
    sizes in the near regime (the first ones) and the indices of the sizes it passes through."""

    constant: Fraction
    slopes: tuple[Fraction, ...]
    near: int
    chosen: tuple[int, ...]


def split_fit(
    terms: Sequence[Terms], values: Sequence[Fraction], target: Terms, slack: float
) -> Split | None:
    """The plane through ``terms`` (distinct sizes, nearest the target first) with the sizes past
    the first ``near`` on their own constant, for the most near sizes that give one: determined at
    the target, no slope negative, every size within ``slack`` of it and at least one size it
    does not pass through to confirm it (the exact fit's own test: ``calibration.probes.
    residuals``). None where no split does (at least two near sizes and one far)."""
    for near in range(len(terms) - 1, 1, -1):
        rows = [(*row(t), Fraction(int(i >= near))) for i, t in enumerate(terms)]
        coefficients, chosen = fit_rows(rows, values)
        if len(chosen) == len(rows) or not estimable(
            [rows[i] for i in chosen], (*row(target), ZERO)
        ):
            continue
        slopes = tuple(coefficients[1:-1])
        off = (abs(predict(coefficients, r) - v) > slack for r, v in zip(rows, values))
        if any(s < 0 for s in slopes) or any(off):
            continue
        return Split(coefficients[0], slopes, near, tuple(chosen))
    return None
