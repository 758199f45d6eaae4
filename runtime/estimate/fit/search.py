"""Bounded subset search: the smallest set of candidate terms whose constant + non-negative
combination gives every size within its tolerance, and held-out judgement of a set.

Candidates come in nested ``tiers``, plainest first: every set of the first tier, fewest terms
first, then the new sets of the next. Each set is fitted exactly (least squares in ``Fraction`` on
the sizes not held out, which must determine every slope) and kept when every slope is >= 0 and
every size, held out or not, is within its tolerance. ``limit`` bounds the sets tried, so the work
is bounded whatever the candidates.

``leave_one_out`` predicts each size from the exact fit through the others (where they determine
it): the held-out error by which a term set is judged, as Extra-P selects performance models.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from fractions import Fraction
from itertools import combinations
from typing import Generic, TypeVar

from attrs import frozen

from runtime.estimate.fit.exact import ZERO, dot, estimable, least_squares, rank, row

T = TypeVar("T", bound=Hashable)


@frozen
class Rejection(Generic[T]):
    """A set tried and why it does not fit: a negative slope, or its worst size (index) and by how
    much (the residual)."""

    terms: tuple[T, ...]
    negative: bool
    worst: int | None = None
    residual: Fraction = ZERO


@frozen
class SubsetFit(Generic[T]):
    """The set found (None: none within the limits), its exact coefficients, and the evidence."""

    terms: tuple[T, ...] | None
    constant: Fraction
    slopes: tuple[Fraction, ...]
    residual: Fraction  # the largest |residual| over every size, fitted and held out
    tried: int  # sets tried
    rejected: tuple[Rejection[T], ...]  # the first rejected sets (at most ``keep``)


def _sets(tiers: Sequence[Sequence[T]], least: int, most: int) -> Iterator[tuple[T, ...]]:
    """Every set of each tier, fewest terms first, each once."""
    seen: set[tuple[T, ...]] = set()
    for tier in tiers:
        for size in range(least, most + 1):
            for chosen in combinations(tier, size):
                if chosen not in seen:
                    seen.add(chosen)
                    yield chosen


def subset_search(
    tiers: Sequence[Sequence[T]],
    column: Callable[[T], Sequence[Fraction]],
    values: Sequence[Fraction],
    tolerances: Sequence[Fraction],
    held_out: Sequence[bool] | None = None,
    *,
    most: int = 3,
    limit: int = 60_000,
    least: int = 0,
    keep: int = 4,
) -> SubsetFit[T]:
    """The first set (see the module docstring) whose fit gives every size within its tolerance.

    ``column(term)`` is the term's value at every size, in the order of ``values``."""
    held = list(held_out) if held_out is not None else [False] * len(values)
    ys = [Fraction(v) for v in values]
    fitted = [i for i in range(len(ys)) if not held[i]]
    table: dict[T, tuple[Fraction, ...]] = {}
    rejected: list[Rejection[T]] = []
    tried = 0
    for chosen in _sets(tiers, least, most):
        if tried == limit:
            break
        tried += 1
        for m in chosen:
            if m not in table:
                table[m] = tuple(Fraction(x) for x in column(m))
        rows = [row([table[m][i] for m in chosen]) for i in range(len(ys))]
        sub = [rows[i] for i in fitted]
        if not sub or rank(sub) < len(chosen) + 1:
            continue  # not determined by the fitted sizes: a smaller set says the same
        solved = least_squares(sub, [ys[i] for i in fitted])
        assert solved is not None
        coefficients = solved[0]
        if any(c < 0 for c in coefficients[1:]):
            if len(rejected) < keep:
                rejected.append(Rejection(chosen, True))
            continue
        residuals = [abs(y - dot(coefficients, r)) for r, y in zip(rows, ys)]
        over = [r - Fraction(t) for r, t in zip(residuals, tolerances)]
        if all(o <= 0 for o in over):
            return SubsetFit(
                chosen, coefficients[0], coefficients[1:], max(residuals), tried, tuple(rejected)
            )
        if len(rejected) < keep:
            worst = max(range(len(over)), key=lambda i: over[i])
            rejected.append(Rejection(chosen, False, worst, residuals[worst]))
    return SubsetFit(None, ZERO, (), ZERO, tried, tuple(rejected))


def leave_one_out(
    terms: Sequence[Sequence[Fraction]], values: Sequence[Fraction]
) -> tuple[Fraction | None, ...]:
    """Each size's value predicted by the least-squares fit through the others (None where the
    others do not determine it there)."""
    rows = [row(t) for t in terms]
    ys = [Fraction(v) for v in values]
    out: list[Fraction | None] = []
    for i in range(len(rows)):
        others = [rows[j] for j in range(len(rows)) if j != i]
        if not estimable(others, rows[i]):
            out.append(None)
            continue
        solved = least_squares(others, [ys[j] for j in range(len(rows)) if j != i])
        assert solved is not None
        out.append(dot(solved[0], rows[i]))
    return tuple(out)


def held_out_error(
    terms: Sequence[Sequence[Fraction]], values: Sequence[Fraction]
) -> Fraction | None:
    """The largest relative leave-one-out error, ``|predicted - value| / |value|``, over the sizes
    the others determine; None when no size is determined by the others."""
    predicted = leave_one_out(terms, values)
    errors = [
        abs(p - Fraction(v)) / abs(Fraction(v)) if v else abs(p - Fraction(v))
        for p, v in zip(predicted, values)
        if p is not None
    ]
    return max(errors) if errors else None
