"""The subset search's fraction-free least squares against the ``Fraction`` one it replaced
(``exact.least_squares``, the oracle): the same coefficients and residuals bit for bit, and None
exactly where the fitted sizes leave a slope undetermined."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.estimate.fit.exact import dot, estimable, least_squares, rank, row
from runtime.estimate.fit.integer import IntegerColumn, determinant, integer_least_squares
from runtime.estimate.fit.search import candidate_sets, leave_one_out, subset_search

exact = st.fractions(min_value=-(10**6), max_value=10**6, max_denominator=10**4)
term = st.one_of(st.integers(0, 64), st.sampled_from([Fraction(1, 3), Fraction(5, 2)]))


@st.composite
def systems(draw: st.DrawFn) -> tuple[list[list[Fraction]], list[Fraction], list[int]]:
    sizes = draw(st.integers(1, 9))
    width = draw(st.integers(0, 3))
    columns = [[Fraction(draw(term)) for _ in range(sizes)] for _ in range(width)]
    values = [draw(st.one_of(exact, st.floats(-1e9, 1e9).map(Fraction))) for _ in range(sizes)]
    fitted = sorted(draw(st.sets(st.integers(0, sizes - 1), min_size=1)))
    return columns, values, fitted


@settings(max_examples=300, deadline=None)
@given(systems())
def test_the_integer_fit_is_the_fraction_fit(system):
    columns, values, fitted = system
    rows = [row([c[i] for c in columns]) for i in range(len(values))]
    sub = [rows[i] for i in fitted]
    got = integer_least_squares(
        [IntegerColumn.of(c) for c in columns], IntegerColumn.of(values), fitted
    )
    if rank(sub) < len(columns) + 1:
        assert got is None
        return
    solved = least_squares(sub, [values[i] for i in fitted])
    assert solved is not None and got is not None
    assert got.coefficients == solved[0]
    assert got.residuals == tuple(v - dot(solved[0], r) for r, v in zip(rows, values))


@given(st.lists(st.lists(st.integers(-50, 50), min_size=4, max_size=4), min_size=4, max_size=4))
def test_the_determinant_is_the_fraction_one(matrix):
    """Bareiss against elimination in Fraction (zero exactly when the rows are dependent)."""
    rows = [tuple(Fraction(x) for x in r) for r in matrix]
    assert (determinant(matrix) == 0) == (rank(rows) < 4)
    a, sign, out = [list(r) for r in rows], 1, Fraction(1)
    for k in range(4):
        pivot = next((i for i in range(k, 4) if a[i][k]), None)
        if pivot is None:
            assert determinant(matrix) == 0
            return
        if pivot != k:
            a[k], a[pivot], sign = a[pivot], a[k], -sign
        out *= a[k][k]
        for i in range(k + 1, 4):
            f = a[i][k] / a[k][k]
            a[i] = [x - f * y for x, y in zip(a[i], a[k])]
    assert determinant(matrix) == sign * out


@settings(max_examples=200, deadline=None)
@given(systems())
def test_leave_one_out_is_the_fraction_one(system):
    """Each size predicted from the others as the Fraction fit predicts it, rank-deficient
    others included (the Fraction path decides those)."""
    columns, values, _ = system
    terms = [[c[i] for c in columns] for i in range(len(values))]
    rows = [row(t) for t in terms]
    expected = []
    for i in range(len(rows)):
        others = [r for j, r in enumerate(rows) if j != i]
        if not estimable(others, rows[i]):
            expected.append(None)
            continue
        solved = least_squares(others, [v for j, v in enumerate(values) if j != i])
        assert solved is not None
        expected.append(dot(solved[0], rows[i]))
    assert leave_one_out(terms, values) == tuple(expected)


def _fraction_search(columns, values, tolerances, held, most):
    """The search as it was in ``Fraction`` (the oracle): the first set of fewest terms whose
    slopes are >= 0 and whose residuals are all within tolerance."""
    fitted = [i for i, h in enumerate(held) if not h]
    for chosen in candidate_sets([list(range(len(columns)))], 0, most):
        rows = [row([columns[m][i] for m in chosen]) for i in range(len(values))]
        sub = [rows[i] for i in fitted]
        if not sub or rank(sub) < len(chosen) + 1:
            continue
        solved = least_squares(sub, [values[i] for i in fitted])
        assert solved is not None
        if any(c < 0 for c in solved[0][1:]):
            continue
        residuals = [abs(v - dot(solved[0], r)) for r, v in zip(rows, values)]
        if all(r <= t for r, t in zip(residuals, tolerances)):
            return chosen, solved[0], max(residuals)
    return None


@settings(max_examples=200, deadline=None)
@given(systems(), st.data())
def test_the_subset_search_finds_what_the_fraction_search_finds(system, data):
    columns, values, _ = system
    tolerances = [data.draw(st.sampled_from([Fraction(0), Fraction(1, 2), Fraction(10**5)]))] * len(
        values
    )
    held = [data.draw(st.booleans()) for _ in values]
    found = subset_search(
        [list(range(len(columns)))], lambda m: columns[m], values, tolerances, held, most=3
    )
    expected = _fraction_search(columns, values, tolerances, held, 3)
    if expected is None:
        assert found.terms is None
    else:
        assert found.terms == expected[0]
        assert (found.constant, *found.slopes) == expected[1]
        assert found.residual == expected[2]


@settings(max_examples=100, deadline=None)
@given(
    width=st.integers(0, 5),
    most=st.integers(0, 3),
    first=st.lists(st.integers(0, 6), max_size=3, unique=True),
)
def test_a_preferred_set_comes_first_and_once(width: int, most: int, first: list[int]) -> None:
    """``first`` leads, then every set of the tiers in their order, none twice (infer's time check
    tries the chosen set before the plain ones)."""
    tiers = [list(range(width)), list(range(width + 1))]
    plain = list(candidate_sets(tiers, 0, most))
    preferred = list(candidate_sets(tiers, 0, most, first=tuple(first)))
    assert preferred[0] == tuple(first)
    assert preferred[1:] == [s for s in plain if s != tuple(first)]
    assert len(set(preferred)) == len(preferred)
