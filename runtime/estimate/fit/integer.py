"""Fraction-free exact least squares for the subset search and leave-one-out: the answer of
``exact.least_squares`` (the same coefficients, bit for bit) computed in integers.

Every column and the values are scaled to integers by their least common denominators (scaling a
column scales its slope; scaling the values scales every coefficient and residual alike), the
normal equations ``G c = b`` are built in integers, and Cramer's rule solves them with Bareiss's
fraction-free elimination: ``det(G)`` and each ``det(G_j)`` are integers, no ``gcd`` on the way.
A search tries thousands of small sets over the same sizes, so ``Normal`` computes each entry of
``G`` and ``b`` once, and a set's residuals are computed only until one is past its tolerance.
bench/fit_core.py measures it against the ``Fraction`` path.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from fractions import Fraction

from attrs import define, field, frozen


@frozen
class IntegerColumn:
    """One term's values at every size, times ``scale`` (the least common denominator)."""

    values: tuple[int, ...]
    scale: int

    @staticmethod
    def of(values: Sequence[Fraction | int]) -> IntegerColumn:
        exact = [Fraction(v) for v in values]
        scale = math.lcm(1, *(v.denominator for v in exact))
        return IntegerColumn(tuple(int(v * scale) for v in exact), scale)


class _Constant:
    """The key of the constant's column in a ``Normal``: equal to no term."""


ONES = _Constant()


@frozen
class IntegerFit:
    """A solved set: the coefficients ``(constant, slope_1, ...)`` and the residuals (value minus
    fit, at every size, fitted or held out), each an integer over ``denominator``, compared in
    integers and made ``Fraction`` only when asked for."""

    raw: tuple[int, ...]  # det(G_j): the scaled system's coefficients times det(G)
    det: int
    scales: tuple[int, ...]  # each column's scale, the constant's 1
    columns: tuple[tuple[int, ...], ...]  # the scaled columns, the constant's first
    values: IntegerColumn

    @property
    def denominator(self) -> int:
        return abs(self.det) * self.values.scale

    @property
    def numerators(self) -> tuple[int, ...]:
        sign = 1 if self.det > 0 else -1
        return tuple(sign * n * s for n, s in zip(self.raw, self.scales, strict=True))

    @property
    def coefficients(self) -> tuple[Fraction, ...]:
        return tuple(Fraction(n, self.denominator) for n in self.numerators)

    def residual_numerator(self, size: int) -> int:
        """The residual at ``size`` times ``denominator``."""
        fitted = sum(n * c[size] for n, c in zip(self.raw, self.columns, strict=True))
        return (self.values.values[size] * self.det - fitted) * (1 if self.det > 0 else -1)

    @property
    def residuals(self) -> tuple[Fraction, ...]:
        return tuple(
            Fraction(self.residual_numerator(i), self.denominator)
            for i in range(len(self.values.values))
        )

    def negative_slope(self) -> bool:
        """Whether some term's slope is below 0 (the constant's sign is free)."""
        return any(n < 0 for n in self.numerators[1:])

    def over(self, tolerances: Sequence[Fraction], worst: bool) -> int | None:
        """A size whose residual exceeds its tolerance (None: none does): with ``worst`` the one
        exceeding it the most, else the first found (the rest are not computed)."""
        found, most = None, Fraction(0)
        for i, t in enumerate(tolerances):
            excess = abs(self.residual_numerator(i)) * t.denominator - t.numerator * (
                self.denominator
            )
            if excess <= 0:
                continue
            if not worst:
                return i
            share = Fraction(excess, t.denominator)
            if found is None or share > most:
                found, most = i, share
        return found


def determinant(matrix: Sequence[Sequence[int]]) -> int:
    """The exact determinant by Bareiss's elimination: every division is exact."""
    a = [list(r) for r in matrix]
    n, sign, previous = len(a), 1, 1
    for k in range(n - 1):
        if a[k][k] == 0:
            swap = next((i for i in range(k + 1, n) if a[i][k]), None)
            if swap is None:
                return 0
            a[k], a[swap] = a[swap], a[k]
            sign = -sign
        for i in range(k + 1, n):
            for j in range(k + 1, n):
                a[i][j] = (a[i][j] * a[k][k] - a[i][k] * a[k][j]) // previous
        previous = a[k][k]
    return sign * a[n - 1][n - 1] if n else 1


@define
class Normal:
    """The normal equations over the sizes ``fitted``, each entry computed once: the sets of one
    search share most of their columns."""

    values: IntegerColumn
    fitted: tuple[int, ...]
    columns: dict[Hashable, IntegerColumn] = field(factory=dict)
    _products: dict[tuple[Hashable, Hashable], int] = field(factory=dict)
    _moments: dict[Hashable, int] = field(factory=dict)

    def __attrs_post_init__(self) -> None:
        self.columns.setdefault(ONES, IntegerColumn((1,) * len(self.values.values), 1))

    def _product(self, a: Hashable, b: Hashable) -> int:
        key = (a, b) if (a, b) in self._products else (b, a)
        if key not in self._products:
            x, y = self.columns[a].values, self.columns[b].values
            self._products[key] = sum(x[r] * y[r] for r in self.fitted)
        return self._products[key]

    def _moment(self, a: Hashable) -> int:
        if a not in self._moments:
            x, y = self.columns[a].values, self.values.values
            self._moments[a] = sum(x[r] * y[r] for r in self.fitted)
        return self._moments[a]

    def solve(self, keys: Sequence[Hashable]) -> IntegerFit | None:
        """The fit of the constant and the columns ``keys`` (None: the fitted sizes leave a slope
        undetermined)."""
        every = [ONES, *keys]
        gram = [[self._product(a, b) for b in every] for a in every]
        det = determinant(gram)
        if det == 0:
            return None
        moment = [self._moment(a) for a in every]
        raw = tuple(
            determinant([[*g[:j], moment[i], *g[j + 1 :]] for i, g in enumerate(gram)])
            for j in range(len(every))
        )
        columns = [self.columns[k] for k in every]
        return IntegerFit(
            raw,
            det,
            tuple(c.scale for c in columns),
            tuple(c.values for c in columns),
            self.values,
        )


def integer_least_squares(
    columns: Sequence[IntegerColumn], values: IntegerColumn, fitted: Sequence[int]
) -> IntegerFit | None:
    """The fit of ``constant + Σ slope × column`` through the sizes ``fitted`` (indices), with
    the residuals at every size; None when those sizes do not determine every slope."""
    normal = Normal(values, tuple(fitted), {k: c for k, c in enumerate(columns)})
    return normal.solve(range(len(columns)))
