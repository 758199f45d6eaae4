"""Admission on the tiny FLUX's shared calibration, on a 1.3 MB device without reserve where the
calibration's target plans every component resident: the target RUNs, a wider request REPLACEs
(the planner streams or offloads for it), a larger one and an inadmissible one are refused with
the limits, and plans are cached per shape."""

from __future__ import annotations

import pytest

from calibration.errors import CalibrationError
from calibration.lifecycle.steps import plan_inputs
from calibration.plan.model import Device, PlacementKind, Plan
from calibration.plan.solver import solve
from calibration.serve.admission import (
    DecisionKind,
    RefusalReason,
    RequestRefused,
    ShapePlanner,
    admit,
)
from calibration.serve.predictor import RequestPredictor, from_calibration
from tests.calibration.lifecycle_setup import calibration, formulas

DEVICE = Device(1_300_000, reserve_bytes=0)
WIDER = {"steps": 2, "height": 64, "width": 80}
LARGER = {"steps": 2, "height": 96, "width": 96}


def _setup() -> tuple[RequestPredictor, Plan]:
    cal = calibration()
    plan = solve(*plan_inputs(cal), DEVICE)
    assert all(p.kind is PlacementKind.RESIDENT for p in plan.placements)
    return from_calibration(cal, formulas()), plan


def test_the_validated_shape_and_smaller_ones_run_under_the_placement_in_force() -> None:
    predictor, plan = _setup()
    planner = ShapePlanner()
    for params in (dict(calibration().shapes.target), {"steps": 1, "height": 32, "width": 32}):
        decision = admit(predictor, params, plan, DEVICE, planner)
        assert decision.kind is DecisionKind.RUN
        assert decision.prediction is not None and decision.prediction.fits(DEVICE.usable_bytes)
    assert planner.asked == 0


def test_a_request_that_fits_under_a_placement_of_its_own_replaces() -> None:
    predictor, plan = _setup()
    planner = ShapePlanner()
    assert not predictor.predict(WIDER, plan).fits(DEVICE.usable_bytes)
    decision = admit(predictor, WIDER, plan, DEVICE, planner)
    assert decision.kind is DecisionKind.REPLACE and decision.plan is not None
    assert any(p.kind is not PlacementKind.RESIDENT for p in decision.plan.placements)
    assert decision.prediction == predictor.predict(WIDER, decision.plan)
    assert decision.prediction.fits(DEVICE.usable_bytes)
    assert decision.transfer_s == decision.plan.transfer_s > 0
    asked = planner.asked
    again = admit(predictor, WIDER, plan, DEVICE, planner)
    assert again.plan is decision.plan and planner.asked == asked  # cached per shape


def test_a_request_that_fits_nowhere_is_refused_naming_the_limits() -> None:
    predictor, plan = _setup()
    decision = admit(predictor, LARGER, plan, DEVICE, ShapePlanner())
    assert decision.kind is DecisionKind.REFUSE
    refused = decision.refused
    assert isinstance(refused, RequestRefused) and isinstance(refused, CalibrationError)
    assert refused.reason is RefusalReason.TOO_LARGE
    assert refused.largest == {"steps": 2, "height": 96, "width": 96}
    fitting = refused.fitting
    assert fitting["steps"] is None  # fewer steps do not shrink the decoder
    for axis in ("height", "width"):
        value = fitting[axis]
        assert value is not None and value < 96
        fits = admit(predictor, {**LARGER, axis: value}, plan, DEVICE, ShapePlanner())
        assert fits.kind is not DecisionKind.REFUSE
        above = admit(predictor, {**LARGER, axis: value + 16}, plan, DEVICE, ShapePlanner())
        assert above.kind is DecisionKind.REFUSE
    assert "too large" in str(refused) and f"height = {fitting['height']}" in str(refused)


@pytest.mark.parametrize(
    ("params", "shown"),
    [({"height": 65}, "nearest admissible: height = 64 or 80"), ({"frames": 9}, "no param")],
)
def test_inadmissible_requests_are_refused_the_same_way(params: dict, shown: str) -> None:
    predictor, plan = _setup()
    decision = admit(predictor, params, plan, DEVICE, ShapePlanner())
    assert decision.kind is DecisionKind.REFUSE and decision.prediction is None
    assert decision.refused is not None
    assert decision.refused.reason is RefusalReason.INADMISSIBLE
    assert shown in str(decision.refused)


def test_the_plan_cache_is_bounded() -> None:
    predictor, _ = _setup()
    planner = ShapePlanner(limit=2)
    for width in (32, 48, 64):
        planner.plan_for(predictor, {"steps": 1, "height": 32, "width": width}, DEVICE)
    assert len(planner.plans) == 2 and planner.asked == 3
    planner.plan_for(predictor, {"steps": 1, "height": 32, "width": 64}, DEVICE)
    assert planner.asked == 3


def test_a_request_the_calibration_never_moved_is_refused_as_not_calibrated() -> None:
    """The shared calibration ran FLUX without CFG; under CFG its memory grows with the tokens
    (flux.wf's cfg term), which no size moved: refused, naming the phase, never a ValueError."""
    predictor, plan = _setup()
    params = {**calibration().shapes.target, "cfg": True}
    decision = admit(predictor, params, plan, DEVICE, ShapePlanner())
    assert decision.kind is DecisionKind.REFUSE and decision.prediction is None
    refused = decision.refused
    assert refused is not None and refused.reason is RefusalReason.NOT_CALIBRATED
    assert "not calibrated" in str(refused) and "DenoisingStage" in str(refused)
    assert admit(predictor, {**params, "cfg": False}, plan, DEVICE, ShapePlanner()).kind in (
        DecisionKind.RUN,
        DecisionKind.REPLACE,
    )
