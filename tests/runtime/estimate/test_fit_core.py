"""The fitting core (runtime.estimate.fit) against independent oracles: numpy's rank and least
squares, scipy-free brute force for non-negative least squares, and hand-made records for the one
definition of a stage sample."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.estimate.fit import (
    FindingKind,
    PhaseKind,
    estimable,
    held_out_error,
    leave_one_out,
    nonnegative_fit,
    point_key,
    rank,
    row,
    stage_sample,
    subset_search,
)
from runtime.record import StageIterations
from tests.runtime.estimate.conftest import record, stage, steps

small = st.integers(min_value=-6, max_value=6)
matrices = st.integers(1, 5).flatmap(
    lambda width: st.lists(st.lists(small, min_size=width, max_size=width), min_size=1, max_size=6)
)


@settings(max_examples=200, deadline=None)
@given(matrices, st.data())
def test_rank_and_estimability_agree_with_numpy(rows, data):
    exact = [tuple(Fraction(x) for x in r) for r in rows]
    assert rank(exact) == np.linalg.matrix_rank(np.array(rows, dtype=float))
    target = data.draw(st.lists(small, min_size=len(rows[0]), max_size=len(rows[0])))
    stacked = np.array([*rows, target], dtype=float)
    in_span = np.linalg.matrix_rank(stacked) == np.linalg.matrix_rank(np.array(rows, dtype=float))
    assert estimable(exact, tuple(Fraction(x) for x in target)) == in_span


def test_a_kink_no_size_crosses_leaves_the_target_not_estimable():
    # memory ~ [min(frames, 16) * area, frames * area]: equal terms below the chunk
    def terms(frames: int, area: int) -> tuple[Fraction, ...]:
        return row([min(frames, 16) * area, frames * area])

    probes = [terms(f, a) for f in (4, 8, 16) for a in (1024, 2304)]
    assert not estimable(probes, terms(24, 9216))
    assert estimable([*probes, terms(20, 1024)], terms(24, 9216))


values = st.lists(st.integers(0, 1000), min_size=4, max_size=7)


@settings(max_examples=100, deadline=None)
@given(values, st.data())
def test_nonnegative_fit_is_the_least_squares_optimum_over_slopes_at_or_above_zero(ys, data):
    width = data.draw(st.integers(1, 3))
    terms = [tuple(Fraction(data.draw(st.integers(0, 20))) for _ in range(width)) for _ in ys]
    fit = nonnegative_fit(terms, [Fraction(y) for y in ys])
    # oracle: every subset's float least squares, the feasible one of least squared residual
    x = np.array([[1.0, *map(float, t)] for t in terms])
    best = None
    for size in range(width + 1):
        for kept in combinations(range(width), size):
            cols = [0, *(k + 1 for k in kept)]
            if np.linalg.matrix_rank(x[:, cols]) < len(cols):
                continue
            coef = np.linalg.lstsq(x[:, cols], np.array(ys, dtype=float), rcond=None)[0]
            if any(c < -1e-9 for c in coef[1:]):
                continue
            sse = float(np.sum((x[:, cols] @ coef - ys) ** 2))
            best = sse if best is None else min(best, sse)
    if best is None:
        assert fit is None
        return
    assert fit is not None and all(s >= 0 for s in fit.slopes)
    assert float(fit.score) <= best * (1 + 1e-9) + 1e-6


def test_subset_search_finds_the_smallest_set_and_bounds_its_work():
    sizes = [1, 2, 3, 5, 8]
    candidates = ["n", "n2", "n3"]
    powers = {"n": 1, "n2": 2, "n3": 3}

    def column(term: str) -> list[Fraction]:
        return [Fraction(n ** powers[term]) for n in sizes]

    values = [Fraction(7 + 3 * n * n) for n in sizes]
    found = subset_search([candidates], column, values, [Fraction(0)] * len(sizes))
    assert found.terms == ("n2",) and found.constant == 7 and found.slopes == (3,)
    assert found.tried == 3  # constant, n, n2
    bounded = subset_search([candidates], column, values, [Fraction(0)] * 5, limit=2)
    assert bounded.terms is None and bounded.tried == 2


def test_leave_one_out_predicts_each_size_from_the_others():
    terms = [(Fraction(n),) for n in (1, 2, 3, 4)]
    line = [Fraction(10 + 2 * n) for n in (1, 2, 3, 4)]
    assert leave_one_out(terms, line) == tuple(line)
    assert held_out_error(terms, line) == 0
    bent = [*line[:3], Fraction(30)]
    assert held_out_error(terms, bent) > Fraction(1, 10)


def test_a_stage_sample_drops_the_first_iteration_and_takes_the_median():
    rec = record(
        {"size": 10, "steps": 4},
        phases=[stage("DenoisingStage", 5000, 1.0)],
        iterations=steps("DenoisingStage", [0.5, 0.1, 0.3, 0.1]),
        stage_iterations=[StageIterations("DenoisingStage", 4, 4, "counted")],
    )
    sample = stage_sample(rec, "DenoisingStage", declared=10)
    assert sample.count == 4  # counted, not declared
    assert sample.memory == 4000  # above the baseline of 1000
    assert sample.seconds == 0.1  # median of 0.1, 0.3, 0.1 (the first, 0.5, pays one-time costs)
    assert sample.repeated and abs(sample.fixed_s - 0.0) < 1e-12
    one_shot = stage_sample(
        record({"size": 10}, phases=[stage("DecodingStage", 1200, 0.75)]), "DecodingStage", 3
    )
    assert one_shot.seconds == 0.25 and one_shot.count == 3 and not one_shot.repeated


def test_kinds_are_their_text_and_point_keys_ignore_order():
    assert PhaseKind.STAGE == "stage" and FindingKind.NOT_ESTIMABLE == "not-estimable"
    assert point_key({"b": 1, "a": 2}) == point_key({"a": 2, "b": 1})
