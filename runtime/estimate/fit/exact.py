"""Exact rational linear algebra for ``value = constant + Σ slope_i × term_i`` over measured sizes.

A memory measure may have several terms (``memory ~ [height * width, frames * height * width]``).
With ``k`` terms a fit needs ``k + 1`` measured sizes in general position, but a probe plan often
varies fewer directions than that (every size at the target's frame count, say). The target can
still be predicted exactly when its row ``(1, T_1, ..., T_k)`` is a combination of the measured
rows: the prediction is then the same for every solution of the fit (an *estimable* function, in
the language of linear models), even though the slopes are not all determined. So:

1. :func:`independent_rows` picks, in the caller's order (nearest the target first), the measured
   rows that are linearly independent (at most ``k + 1``);
2. :func:`basic_solution` solves them exactly with the constant pivoted first and every term that
   the rows do not determine given slope 0 (its part rides in the constant, which is right exactly
   where the target does not move it);
3. :func:`estimable` says whether the target's row lies in their span (rational rank, Gaussian
   elimination in ``Fraction``): only then is the fit's value at the target the same for every
   solution. A ``min``, ``max``, clamp or ``if`` whose kink no size crosses leaves two terms equal
   on every size and different at the target: not estimable, whatever the values.

Everything is ``Fraction``: a few rows of a few terms, solved exactly, so two runs of the same
sizes give the same answer bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

Row = tuple[Fraction, ...]
ZERO = Fraction(0)


def row(terms: Sequence[int | Fraction]) -> Row:
    """The design row of one size: 1 for the constant, then its terms."""
    return (Fraction(1), *(Fraction(t) for t in terms))


def dot(a: Sequence[Fraction], b: Sequence[Fraction]) -> Fraction:
    """The exact inner product."""
    return sum((x * y for x, y in zip(a, b)), ZERO)


def _reduce(vector: Row, basis: Sequence[tuple[int, Row]]) -> Row:
    """``vector`` minus its components along an echelon ``basis`` of ``(pivot, row)`` pairs."""
    out = list(vector)
    for pivot, b in basis:
        if out[pivot]:
            factor = out[pivot] / b[pivot]
            out = [x - factor * y for x, y in zip(out, b)]
    return tuple(out)


def _add(basis: list[tuple[int, Row]], r: Row) -> bool:
    """Add ``r`` to an echelon basis when it adds a direction; whether it did."""
    reduced = _reduce(r, basis)
    pivot = next((i for i, x in enumerate(reduced) if x), None)
    if pivot is None:
        return False
    basis.append((pivot, reduced))
    return True


def independent_rows(rows: Sequence[Row]) -> list[int]:
    """Indices of the rows (in the given order) that each add a new direction to the span."""
    basis: list[tuple[int, Row]] = []
    chosen: list[int] = []
    width = len(rows[0]) if rows else 0
    for index, r in enumerate(rows):
        if len(chosen) == width:
            break
        if _add(basis, r):
            chosen.append(index)
    return chosen


def rank(rows: Sequence[Row]) -> int:
    """The rows' rational rank."""
    return len(independent_rows(rows))


def estimable(rows: Sequence[Row], target: Row) -> bool:
    """Whether ``target`` lies in the span of ``rows`` (the fit's value there is then unique)."""
    basis: list[tuple[int, Row]] = []
    for r in rows:
        _add(basis, r)
    return bool(rows) and not any(_reduce(target, basis))


def row_reduce(rows: list[list[Fraction]], width: int) -> tuple[list[list[Fraction]], list[int]]:
    """Gauss-Jordan over the first ``width`` columns, pivoting left to right: the reduced rows
    (pivot rows first) and each pivot's column (shared by the fit and the predictor's planes)."""
    reduced = [list(r) for r in rows]
    pivots: list[int] = []
    for column in range(width):
        line = len(pivots)
        found = next((i for i in range(line, len(reduced)) if reduced[i][column]), None)
        if found is None:
            continue
        reduced[line], reduced[found] = reduced[found], reduced[line]
        lead = reduced[line][column]
        reduced[line] = [x / lead for x in reduced[line]]
        for i, other in enumerate(reduced):
            if i != line and other[column]:
                factor = other[column]
                reduced[i] = [x - factor * y for x, y in zip(other, reduced[line])]
        pivots.append(column)
    return reduced, pivots


def basic_solution(rows: Sequence[Row], values: Sequence[Fraction]) -> tuple[Fraction, ...]:
    """Coefficients ``(constant, slope_1, ...)`` with ``rows · x == values`` exactly.

    ``rows`` must be linearly independent. Columns are pivoted left to right (the constant first),
    and a column without a pivot gets coefficient 0.
    """
    width = len(rows[0])
    augmented, pivots = row_reduce([list(r) + [Fraction(v)] for r, v in zip(rows, values)], width)
    line = len(pivots)
    if line != len(augmented):
        raise ValueError("the rows are not linearly independent")
    solution = [ZERO] * width
    for i, column in enumerate(pivots):
        solution[column] = augmented[i][-1]
    return tuple(solution)


def fit_rows(
    rows: Sequence[Row], values: Sequence[Fraction]
) -> tuple[tuple[Fraction, ...], list[int]]:
    """The exact fit through the independent rows (in the given order: nearest the target first)
    and their indices; the other rows are left to test it."""
    chosen = independent_rows(list(rows))
    if not chosen:
        return (), chosen
    coefficients = basic_solution([rows[i] for i in chosen], [values[i] for i in chosen])
    return coefficients, chosen


def predict(coefficients: Sequence[Fraction], r: Sequence[Fraction]) -> Fraction:
    """The fitted value at row ``r``."""
    return dot(coefficients, r)


def _normal(
    rows: Sequence[Row], weights: Sequence[Fraction]
) -> tuple[list[int], list[tuple[Fraction, ...]]]:
    """The columns the rows determine (the others are combinations of them over the rows) and the
    weighted normal matrix ``X' W X`` over those columns."""
    columns = [tuple(r[j] for r in rows) for j in range(len(rows[0]))]
    kept = independent_rows(columns)
    a = [tuple(r[j] for j in kept) for r in rows]
    normal = [
        tuple(sum((w * x[i] * x[j] for x, w in zip(a, weights)), ZERO) for j in range(len(kept)))
        for i in range(len(kept))
    ]
    return kept, normal


def least_squares(
    rows: Sequence[Row], values: Sequence[Fraction], weights: Sequence[Fraction] | None = None
) -> tuple[tuple[Fraction, ...], list[int]] | None:
    """The exact (weighted) least-squares coefficients over the columns the rows determine (the
    others 0) and those columns; None without rows. Normal equations in ``Fraction``."""
    if not rows:
        return None
    w = list(weights) if weights is not None else [Fraction(1)] * len(rows)
    kept, normal = _normal(rows, w)
    a = [tuple(r[j] for j in kept) for r in rows]
    rhs = [sum((wi * x[i] * v for x, v, wi in zip(a, values, w)), ZERO) for i in range(len(kept))]
    solution = basic_solution(normal, rhs)
    coefficients = [ZERO] * len(rows[0])
    for j, c in zip(kept, solution):
        coefficients[j] = c
    return tuple(coefficients), kept


def weighted_least_squares_at(
    rows: Sequence[Row], values: Sequence[Fraction], weights: Sequence[Fraction], target: Row
) -> tuple[Fraction, tuple[Fraction, ...], Fraction] | None:
    """The weighted least-squares plane's value at ``target``, its coefficients, and the value's
    variance ``target' (X' W X)^-1 target`` (with weights ``1 / variance`` of each value, this is
    the variance of the prediction); None unless ``target`` lies in the rows' span.

    Columns that are combinations of others over the rows are dropped first (the estimable value
    does not depend on how they are split), then the normal equations are solved exactly.
    """
    if not rows or not estimable(rows, target):
        return None
    solved = least_squares(rows, values, weights)
    assert solved is not None
    coefficients, kept = solved
    _, normal = _normal(rows, weights)
    at = tuple(target[j] for j in kept)
    variance = dot(at, basic_solution(normal, at))
    return dot(coefficients, target), coefficients, variance
