"""Speed in validation, on the real tiny FLUX (CPU, exact backend): a placement whose request is
slower than predicted beyond the calibration's spread, and slower than before the plan by more
than 5 %, and than one request with the plan undone, is rolled back and never applied again.

The verdicts are judged on a steady clock (``lifecycle_setup.Steady``) that a ``call`` fault moves
on by the delay in the chosen requests' denoising: on the real clock a loaded machine made the
fallback's own validation ``slower`` once in CI (the verdict is the lifecycle's, not the clock's).
The delay itself is real where it is measured: a ``slow`` fault spends its seconds of this thread's
CPU time, and the recorder's clock on the CPU (this thread's CPU time) reads at least that much.
"""

from __future__ import annotations

import pytest

from calibration.lifecycle.faults import CALL, SLOW, Fault
from calibration.lifecycle.model import OK, Failure
from calibration.lifecycle.render import document, lines
from calibration.lifecycle.run import Outcome, run_lifecycle
from calibration.lifecycle.steps import Settings, baseline
from tests.calibration.lifecycle_setup import (
    REAL,
    STREAMING,
    Steady,
    calibration,
    lifecycle,
    points,
    session,
)

pytest.importorskip("accelerate")


def _validations(outcome):
    return [s.outcome for s in outcome.report.step("validate")]


def _delay() -> float:
    before = baseline(calibration())
    assert before.previous_s is not None
    return 2 * (before.previous_s + before.spread_s)  # well past both thresholds


def _slow_lifecycle(delay: float, times: int) -> Outcome:
    """The lifecycle on a steady clock moved on by ``delay`` in the denoising of the first
    ``times`` requests after the calibration."""
    clock = Steady()
    fresh, backend = session(clock=clock)
    backend.faults = (Fault("DenoisingStage", CALL, action=lambda: clock.jump(delay), times=times),)
    return run_lifecycle(fresh, points(), Settings(STREAMING, "apply"), calibration=calibration())


def test_a_slower_placement_is_rolled_back_and_replanned():
    delay = _delay()
    # slow on the validation request and on the request that confirms it, not after
    outcome = _slow_lifecycle(delay, times=2)
    report = outcome.report
    assert _validations(outcome) == [Failure.TOO_SLOW.value, "holds"]
    names = [s.name for s in report.steps]
    first = names.index("validate")
    # one request with the plan undone is not slow: the placement is, not the machine
    assert names[first + 1 : first + 4] == ["rollback", "unplanned", "re-plan"]
    assert report.step("unplanned")[0].outcome == "faster"
    slow, held = (s.data["time"] for s in report.step("validate"))
    assert slow["measured_s"] > slow["predicted_s"] + slow["spread_s"]
    assert slow["measured_s"] > 1.05 * slow["previous_s"]
    assert slow["measured_s"] >= delay  # the CPU time really spent
    assert held["measured_s"] < slow["measured_s"] - delay / 2
    plan, replan = report.step("plan")[0], report.step("re-plan")[0]
    assert "the measured time" in replan.detail
    # the re-plan keeps the link and charges the placement its measured cost: a later request
    assert replan.data["bandwidth_bytes_per_s"] == plan.data["bandwidth_bytes_per_s"]
    assert replan.data["predicted_s"] == pytest.approx(slow["measured_s"])
    # the same placement, predicted slower than before still: never applied again; the fallback is
    assert replan.data["placement"] == plan.data["placement"]
    assert [s.data["placement"] for s in report.step("apply")].count(plan.data["placement"]) == 1
    assert "rolled back as slower" in report.step("fallback")[0].detail
    assert report.status == OK and report.validated and report.serving


def test_one_slow_request_is_confirmed_before_anything_is_rolled_back():
    delay = _delay()
    outcome = _slow_lifecycle(delay, times=1)
    assert _validations(outcome) == ["holds"]  # the second request was not slower
    assert not outcome.report.step("rollback") and outcome.report.status == OK
    held = outcome.report.step("validate")[0].data["time"]
    assert held["measured_s"] < delay  # judged on the faster request, the one without the delay
    assert max(r.duration_s for r in outcome.records) >= delay  # the slow one is kept
    # the calibration's requests, the validation, the one confirming it, the re-warm
    assert len(outcome.records) == len(calibration().records) + 3


def test_a_slow_fault_spends_real_cpu_time_the_recorder_reads():
    delay = 0.05
    outcome, _ = lifecycle([Fault("DenoisingStage", SLOW, delay_s=delay, times=1)], clock=REAL)
    first = outcome.records[len(calibration(REAL).records)]  # the validation request
    assert first.duration_s >= delay  # a lower bound only: a loaded machine is slower, never faster


def test_predicted_and_measured_time_are_shown_side_by_side():
    outcome, _ = lifecycle()  # steady: a loaded machine never makes this validation slower
    check = outcome.report.step("validate")[0].data["time"]
    assert check["predicted_s"] == outcome.plan.predicted_seconds > 0
    assert check["measured_s"] > 0 and check["previous_s"] > 0
    doc = document(outcome.report, outcome.records)
    shown = next(s for s in doc["steps"] if s["name"] == "validate")["time"]
    assert shown == check and doc["left_in_place"] == {}
    text = [line for line in lines(outcome.report) if line.strip().startswith("time:")]
    assert len(text) == 1
    assert f"of {check['predicted_s']:.3g} s predicted" in text[0]
    assert f"measured {check['measured_s']:.3g} s" in text[0]
