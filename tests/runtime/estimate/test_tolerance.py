"""The one tolerance rule (``noise.tolerance`` under a caller's ``Tolerance`` policy) gives what the
two rules it replaced gave, each on its own domain: calibrate's checks (``RESIDUAL``: ``Z`` sigma
of a size's own, carried and model error) and ``dslc infer``'s time check (``ONE_SPREAD``: the
clock's jitter plus ``max(Z x the base's spread, TIME_FLOOR)`` of the time). The old formulas live
here only, as the oracle."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from runtime.estimate.fit.noise import (
    CLOCK_JITTER_S,
    MODEL_ERROR,
    ONE_SPREAD,
    RESIDUAL,
    TIME_FLOOR,
    Tolerance,
    Z,
    tolerance,
)

seconds = st.floats(min_value=0.0, max_value=1e4, allow_nan=False, allow_infinity=False)
spreads = st.floats(min_value=0.0, max_value=10.0, allow_nan=False, allow_infinity=False)
efolds = st.floats(min_value=0.0, max_value=20.0, allow_nan=False, allow_infinity=False)
values = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False)


def old_checks(se: float, carried: float, far: float, value: float) -> float:
    """Calibrate's rule before: ``Z`` sigma of the residual's own, carried and model error."""
    return Z * math.sqrt(se * se + carried * carried + (MODEL_ERROR * far * abs(value)) ** 2)


def old_spread(value: float, spread: float) -> float:
    """Infer's rule before: the clock's jitter + ``Z`` spreads, ``TIME_FLOOR`` at least."""
    return CLOCK_JITTER_S + max(Z * spread, TIME_FLOOR) * value


@given(se=seconds, carried=seconds, far=efolds, value=values)
def test_checks_rule_is_the_old_one_to_the_bit(se, carried, far, value) -> None:
    assert tolerance(RESIDUAL, value, se, carried, far) == old_checks(se, carried, far, value)


@given(value=seconds, spread=spreads)
def test_spread_rule_is_the_old_one(value, spread) -> None:
    """Equal but for the order of one product's rounding (``Z x (spread x value)``)."""
    new = tolerance(ONE_SPREAD, value, spread * value)
    assert math.isclose(new, old_spread(value, spread), rel_tol=1e-12, abs_tol=1e-300)


@given(value=seconds, se=st.one_of(st.just(0.0), st.floats(1e-100, 1e4)), floor=st.floats(0.0, 1.0))
def test_the_floor_and_jitter_bound_it_below(value, se, floor) -> None:
    """A policy's floor and jitter are lower bounds, and ``z`` scales the sigma alone."""
    policy = Tolerance(floor=floor, jitter=CLOCK_JITTER_S)
    got = tolerance(policy, value, se)
    assert got >= CLOCK_JITTER_S + floor * value
    assert got >= CLOCK_JITTER_S + Z * se
    assert tolerance(Tolerance(z=2 * Z), value, se) == 2 * tolerance(RESIDUAL, value, se)
