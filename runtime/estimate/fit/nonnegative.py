"""Non-negative least squares, exact: a constant + slopes >= 0 through measured sizes.

A slope below 0 says a term makes the quantity smaller, which no term of a formula does; noise on a
small term can fit one. The non-negative least-squares solution is the least-squares fit on one
subset of the terms (the others at 0) whose slopes are all >= 0, and of those fits the one with the
least weighted squared residual: every subset is tried, fewest terms first, each solved exactly
(``exact.least_squares``), so the answer is the same in every run. ``MAX_TERMS`` bounds the work
(``2 ** MAX_TERMS`` subsets).

With ``tolerances``, the fit chosen is instead the one whose largest residual over tolerance, over
every size (held-out ones included), is least: a set then fits whenever one of its subsets does.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from itertools import combinations

from attrs import frozen

from runtime.estimate.fit.exact import ZERO, dot, least_squares, rank, row

#: The most terms one non-negative fit takes (its subsets are enumerated).
MAX_TERMS = 12


@frozen
class NonNegativeFit:
    """A constant and one slope >= 0 per term (0 for the terms left out), and its worst residual."""

    constant: Fraction
    slopes: tuple[Fraction, ...]
    kept: tuple[int, ...]  # the terms fitted (the others at slope 0)
    score: Fraction  # weighted squared residual of the fitted sizes, or the worst ratio

    def at(self, terms: Sequence[Fraction]) -> Fraction:
        """The fit's value at a size's terms."""
        return self.constant + dot(self.slopes, [Fraction(t) for t in terms])


def _residuals(
    fit: tuple[Fraction, ...], rows: Sequence[tuple[Fraction, ...]], values: Sequence[Fraction]
) -> list[Fraction]:
    return [v - dot(fit, r) for r, v in zip(rows, values)]


def nonnegative_fit(
    terms: Sequence[Sequence[Fraction]],
    values: Sequence[Fraction],
    weights: Sequence[Fraction] | None = None,
    *,
    fitted: Sequence[bool] | None = None,
    tolerances: Sequence[Fraction] | None = None,
) -> NonNegativeFit | None:
    """The non-negative fit of ``values`` on ``terms`` (one tuple of term values per size),
    weighted by ``weights`` (1 / variance) over the sizes marked ``fitted`` (all by default);
    None when no subset's fit is determined by the fitted sizes."""
    width = len(terms[0]) if terms else 0
    if width > MAX_TERMS:
        raise ValueError(f"a non-negative fit takes at most {MAX_TERMS} terms, got {width}")
    use = list(fitted) if fitted is not None else [True] * len(terms)
    w = [Fraction(x) for x in weights] if weights is not None else [Fraction(1)] * len(terms)
    rows = [row(t) for t in terms]
    ys = [Fraction(v) for v in values]
    inside = [i for i in range(len(rows)) if use[i]]
    best: NonNegativeFit | None = None
    for size in range(width + 1):
        for kept in combinations(range(width), size):
            cols = (0, *(k + 1 for k in kept))
            sub = [tuple(rows[i][c] for c in cols) for i in inside]
            if not sub or rank(sub) < len(cols):
                continue
            solved = least_squares(sub, [ys[i] for i in inside], [w[i] for i in inside])
            assert solved is not None
            coefficients = solved[0]
            if any(c < 0 for c in coefficients[1:]):
                continue
            full = [ZERO] * (width + 1)
            for c, value in zip(cols, coefficients):
                full[c] = value
            score = _score(tuple(full), rows, ys, w, inside, tolerances)
            if best is None or score < best.score:
                best = NonNegativeFit(full[0], tuple(full[1:]), kept, score)
    return best


def _score(
    full: tuple[Fraction, ...],
    rows: Sequence[tuple[Fraction, ...]],
    ys: Sequence[Fraction],
    w: Sequence[Fraction],
    inside: Sequence[int],
    tolerances: Sequence[Fraction] | None,
) -> Fraction:
    """The weighted squared residual of the fitted sizes, or (``tolerances``) the largest
    ``|residual| / tolerance`` over every size."""
    residuals = _residuals(full, rows, ys)
    if tolerances is None:
        return sum((w[i] * residuals[i] ** 2 for i in inside), ZERO)
    ratios = [abs(r) / Fraction(t) if t else abs(r) * 10**30 for r, t in zip(residuals, tolerances)]
    return max(ratios, default=ZERO)
