"""A placement's measured compute cost kept (the peer's streamed DiT that computes slower than
predicted): the seconds measured above the prediction stay with that placement and feed the
predicted time of the same placement in later plans (a re-plan on other bounds, a fallback, a
document read back), never another placement's, and never the validation's own judgement."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calibration.lifecycle.model import Baseline
from calibration.lifecycle.speed import still_slower
from calibration.lifecycle.validate import _predicted_at
from calibration.plan import Component, Device, Phase, PlanInputError, Target, solve
from calibration.plan.costs import MAX_COSTS, MeasuredCosts, placement_key

GiB = 1 << 30
DIT = Component.uniform("transformer", 4 * GiB, 4, GiB)


def _plan(capacity: int, bound: int = 0):
    target = Target("t", (Phase("denoise", bound, ("transformer",)),), compute_s=1.0)
    return solve([DIT], [target], Device(capacity, reserve_bytes=0))


def test_a_streamed_dit_measured_slower_keeps_its_cost_in_the_next_plan_of_it():
    streamed = _plan(2 * GiB)
    predicted = streamed.predicted_seconds
    assert predicted is not None
    costs = MeasuredCosts().learn(streamed, predicted + 0.5, predicted)  # its hooks cost 0.5 s
    replanned = _plan(2 * GiB + 1)  # other bounds, the same placement
    assert placement_key(replanned) == placement_key(streamed)
    charged = costs.charge(replanned)
    assert charged.predicted_seconds == pytest.approx(predicted + 0.5)
    assert charged.predicted("t").measured_extra_s == pytest.approx(0.5)
    # the lifecycle's rule: a placement rolled back as slower is not tried again while its
    # prediction says slower than before; uncharged, the same placement looks fine again
    before = Baseline(previous_s=predicted + 0.1)
    assert still_slower(charged, before) and not still_slower(replanned, before)
    # the validation judges against the prediction without it (never absorbs a slowdown)
    assert _predicted_at(charged, "t", None) == pytest.approx(predicted)


def test_another_placement_is_not_charged():
    costs = MeasuredCosts().learn(_plan(2 * GiB), 10.0, 1.0)
    resident = _plan(8 * GiB)
    assert placement_key(resident) != placement_key(_plan(2 * GiB))
    assert costs.charge(resident).predicted_seconds == resident.predicted_seconds


def test_the_largest_extra_is_kept_and_a_faster_request_keeps_it():
    plan = _plan(2 * GiB)
    costs = MeasuredCosts().learn(plan, 3.0, 1.0).learn(plan, 1.5, 1.0).learn(plan, 0.5, 1.0)
    assert costs.of(plan) == pytest.approx(2.0)
    assert MeasuredCosts().learn(plan, 3.0, None) == MeasuredCosts()  # nothing predicted


def test_a_saved_cost_read_back_charges_the_same():
    plan = _plan(2 * GiB)
    costs = MeasuredCosts().learn(plan, 2.0, 1.25)
    again = MeasuredCosts(costs.document())
    assert again == costs and again.charge(plan).predicted_seconds == pytest.approx(
        costs.charge(plan).predicted_seconds
    )


@given(st.sampled_from([math.nan, math.inf, -1.0, "1"]))
def test_a_hostile_cost_is_a_typed_error(value):
    with pytest.raises(PlanInputError, match="measured cost"):
        MeasuredCosts({"k": value})


def test_too_many_costs_are_refused_before_reading_them():
    with pytest.raises(PlanInputError, match="at most"):
        MeasuredCosts({str(i): 0.0 for i in range(MAX_COSTS + 1)})
