"""Bounded subset search: the smallest set of candidate terms whose constant + non-negative
combination gives every size within its tolerance, and held-out judgement of a set.

Candidates come in nested ``tiers``, plainest first: every set of the first tier, fewest terms
first, then the new sets of the next. Each set is fitted exactly (least squares on the sizes not
held out, which must determine every slope: in integers, ``fit.integer``) and kept when every
slope is >= 0 and every size, held out or not, is within its tolerance. ``limit`` bounds the sets
tried, so the work is bounded whatever the candidates.

``leave_one_out`` predicts each size from the exact fit through the others (where they determine
it): the held-out error by which a term set is judged, as Extra-P selects performance models.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from fractions import Fraction
from itertools import combinations
from typing import Generic, TypeVar

from attrs import evolve, frozen

from runtime.estimate.fit.exact import ZERO, dot, estimable, least_squares, row
from runtime.estimate.fit.integer import IntegerColumn, Normal, integer_least_squares

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


def candidate_sets(
    tiers: Sequence[Sequence[T]], least: int, most: int, first: tuple[T, ...] | None = None
) -> Iterator[tuple[T, ...]]:
    """The one candidate generator: ``first`` (a set preferred, whatever its size), then every set
    of each tier, fewest terms first, each once."""
    seen: set[tuple[T, ...]] = set()
    if first is not None:
        seen.add(first)
        yield first
    for tier in tiers:
        for size in range(least, most + 1):
            for chosen in combinations(tier, size):
                if chosen not in seen:
                    seen.add(chosen)
                    yield chosen


class TermSearch(Generic[T]):
    """The sizes of one search, each term's column and the normal equations' entries computed
    once: the sets of a search share them, and so do the searches over the same sizes (`dslc
    infer` judges its candidate sets one by one)."""

    def __init__(
        self,
        column: Callable[[T], Sequence[Fraction]],
        values: Sequence[Fraction],
        tolerances: Sequence[Fraction],
        held_out: Sequence[bool] | None = None,
    ) -> None:
        held = list(held_out) if held_out is not None else [False] * len(values)
        fitted = tuple(i for i in range(len(values)) if not held[i])
        self.column, self.normal = column, Normal(IntegerColumn.of(values), fitted)
        self.limits = [Fraction(t) for t in tolerances]

    def judge(
        self, chosen: tuple[T, ...], worst: bool = True
    ) -> SubsetFit[T] | Rejection[T] | None:
        """One set's verdict: its fit (``tried`` 1), why it is rejected (its worst size only with
        ``worst``), or None when the fitted sizes do not determine it."""
        for m in chosen:
            if m not in self.normal.columns:
                self.normal.columns[m] = IntegerColumn.of(self.column(m))
        solved = self.normal.solve(chosen)
        if solved is None:
            return None  # not determined by the fitted sizes: a smaller set says the same
        if solved.negative_slope():
            return Rejection(chosen, True)
        over = solved.over(self.limits, worst)
        if over is None:
            coefficients, residuals = solved.coefficients, [abs(r) for r in solved.residuals]
            return SubsetFit(chosen, coefficients[0], coefficients[1:], max(residuals), 1, ())
        residual = abs(Fraction(solved.residual_numerator(over), solved.denominator))
        return Rejection(chosen, False, over, residual)

    def first(
        self,
        tiers: Sequence[Sequence[T]],
        *,
        most: int = 3,
        limit: int = 60_000,
        least: int = 0,
        keep: int = 4,
    ) -> SubsetFit[T]:
        """The first set (see the module docstring) whose fit gives every size within its
        tolerance; the first ``keep`` rejected sets with why."""
        rejected: list[Rejection[T]] = []
        tried = 0
        for chosen in candidate_sets(tiers, least, most):
            if tried == limit:
                break
            tried += 1
            verdict = self.judge(chosen, worst=len(rejected) < keep)
            if isinstance(verdict, SubsetFit):
                return evolve(verdict, tried=tried, rejected=tuple(rejected))
            if verdict is not None and len(rejected) < keep:
                rejected.append(verdict)
        return SubsetFit(None, ZERO, (), ZERO, tried, tuple(rejected))


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
    search = TermSearch(column, values, tolerances, held_out)
    return search.first(tiers, most=most, limit=limit, least=least, keep=keep)


def leave_one_out(
    terms: Sequence[Sequence[Fraction]], values: Sequence[Fraction]
) -> tuple[Fraction | None, ...]:
    """Each size's value predicted by the least-squares fit through the others (None where the
    others do not determine it there)."""
    rows = [row(t) for t in terms]
    ys = [Fraction(v) for v in values]
    width = len(rows[0]) - 1 if rows else 0
    columns = [IntegerColumn.of([t[j] for t in terms]) for j in range(width)]
    scaled = IntegerColumn.of(ys)
    out: list[Fraction | None] = []
    for i in range(len(rows)):
        solved = integer_least_squares(columns, scaled, [j for j in range(len(rows)) if j != i])
        if solved is not None:  # the others determine every slope: in integers
            out.append(ys[i] - solved.residuals[i])
            continue
        others = [rows[j] for j in range(len(rows)) if j != i]
        if not estimable(others, rows[i]):
            out.append(None)
            continue
        fraction = least_squares(others, [ys[j] for j in range(len(rows)) if j != i])
        assert fraction is not None
        out.append(dot(fraction[0], rows[i]))
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
