"""The coverage sizes (calibration.probes.sizes.coverage_probes) keep to the cost budget: where one
step towards the target of every param would cost more than it, a cheaper step (a value less even,
or one below the base) moves the param instead. The issue's case: the probe alone, no warmup below
it, so every coverage size steps up from the probe (wan-single in bench/accuracy.py)."""

from __future__ import annotations

from calibration.calibrate.loop import BUDGET
from calibration.calibrate.run import _planned, calibrate_session
from calibration.core.costs import relative_cost
from calibration.core.session import Session
from calibration.probes.far import far_axes
from calibration.probes.sizes import covered, departures, moves_alone
from runtime.kinds import FindingKind
from tests.calibration.probes.kinked import Kink, Kinked, formula_text

KINK = Kink("min", 64)  # no kink within the range: the formula is right
PROBE = {"steps": 2, "frames": 8, "height": 32, "width": 32}
TARGET = {"steps": 8, "frames": 8, "height": 48, "width": 48}


def formulas():
    from dslc.build import load_text

    return load_text(formula_text(KINK), "kinked.wf")["kinked"]


def test_coverage_sizes_step_down_to_fit_the_budget_and_still_move_every_param():
    pipeline = formulas()
    points, sizes, uncovered = _planned(pipeline, PROBE, PROBE, TARGET)
    planned = [points[role] for role, _ in sizes]
    total = sum((relative_cost(pipeline, p, TARGET) for p in planned[1:]), start=0 * BUDGET)
    # one step up of steps (4) and of width (48) beside the terms' size cost 5/9 of the target
    assert total < BUDGET, [(p, float(relative_cost(pipeline, p, TARGET))) for p in planned]
    assert uncovered == ()
    assert all(covered(name, planned) for name in departures(PROBE, TARGET))
    assert any(p["width"] < PROBE["width"] for p in planned)  # width moved down: cheaper


def test_the_probe_alone_calibrates_within_the_budget_and_its_bounds_hold():
    session = Session(Kinked(KINK), formulas(), "cpu")  # type: ignore[arg-type]  # own __call__
    cal = calibrate_session(
        session, target=TARGET, probe=PROBE, warmup=PROBE, verify=True, repeat=1
    )
    assert cal.extra_cost < BUDGET and cal.uncovered == ()
    for c in cal.phases():
        assert c.bound is not None and c.measured is not None and c.bound >= c.measured, c


# A target 2.5x past every measured height (far): one size at its height, moving height alone
# from the warmup, measures the far value and covers height at once (calibration.probes.far.
# far_first); with the plain coverage sizes first, no size at the target's height fits the budget.
WARMUP_FAR = {"steps": 1, "frames": 8, "height": 16, "width": 16}
PROBE_FAR = {"steps": 1, "frames": 8, "height": 32, "width": 32}
TARGET_FAR = {"steps": 2, "frames": 8, "height": 80, "width": 48}


def test_a_far_axis_is_measured_at_the_targets_value_by_a_size_that_also_covers_it():
    pipeline = formulas()
    points, sizes, uncovered = _planned(pipeline, WARMUP_FAR, PROBE_FAR, TARGET_FAR)
    planned = [points["warmup"], *(points[role] for role, _ in sizes)]
    total = sum((relative_cost(pipeline, p, TARGET_FAR) for p in planned[2:]), start=0 * BUDGET)
    assert total < BUDGET and uncovered == ()
    assert all(covered(name, planned) for name in departures(PROBE_FAR, TARGET_FAR))
    at_height = [p for p in planned if p["height"] == TARGET_FAR["height"]]
    assert at_height and any(moves_alone(at_height[0], p, "height") for p in planned)
    assert "height" not in {a.name for a in far_axes(pipeline, planned, TARGET_FAR)}


def test_the_far_axis_measured_by_plan_leaves_no_far_axis_note_and_bounds_hold():
    session = Session(Kinked(KINK), formulas(), "cpu")  # type: ignore[arg-type]  # own __call__
    cal = calibrate_session(
        session, target=TARGET_FAR, probe=PROBE_FAR, warmup=WARMUP_FAR, verify=True, repeat=1
    )
    assert cal.extra_cost < BUDGET and cal.uncovered == ()
    far = [f for f in cal.findings if f.kind == FindingKind.FAR_AXIS]
    assert not [f for f in far if f.direction == "height"], [f.message for f in far]
    for c in cal.phases():
        assert c.bound is not None and c.measured is not None and c.bound >= c.measured, c
