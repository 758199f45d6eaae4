"""The serving lifecycle on the real tiny FLUX (CPU, exact backend): one test per transition and per
failure kind, failures injected at the memory backend's boundary (``calibration.lifecycle.faults``).
"""

from __future__ import annotations

import pytest

from calibration.lifecycle.faults import ERROR, PEAK, Fault
from calibration.lifecycle.model import NO_PLAN_VALIDATES, NOTHING_FITS, OK, REFUSED, Failure
from calibration.placement.mechanisms import has_offload_hooks
from calibration.plan.model import Device
from runtime.measure.diffusers_hooks import pipeline_modules
from tests.calibration.lifecycle_setup import calibration, lifecycle

pytest.importorskip("accelerate")

FIRST = {  # what the estimates plan at 1 MiB (no reserve): the transformer streams a block
    "vae": "resident",
    "text_encoder": "offloaded",
    "text_encoder_2": "offloaded",
    "transformer": "layerwise 1/2",
}
CONSERVATIVE = {  # the least footprint: the VAE and the transformer grouped
    "vae": "grouped",
    "text_encoder": "offloaded",
    "text_encoder_2": "offloaded",
    "transformer": "grouped",
}


def _names(outcome):
    return [s.name for s in outcome.report.steps]


def _validations(outcome):
    return [s.outcome for s in outcome.report.step("validate")]


def _hooked(session):
    return {n for n, m in pipeline_modules(session.pipe).items() if has_offload_hooks(m)}


def test_off_measures_and_applies_nothing():
    outcome, session = lifecycle(mode="off")
    assert _names(outcome) == ["warmup", "probes", "estimate"]
    report = outcome.report
    assert (report.status, report.serving, report.placement) == (OK, True, ())
    assert outcome.applied is None and not _hooked(session)
    assert len(outcome.records) == len(calibration().records)


def test_plan_plans_and_applies_nothing():
    outcome, session = lifecycle(mode="plan")
    assert _names(outcome) == ["warmup", "probes", "estimate", "plan"]
    assert outcome.report.step("plan")[0].data["placement"] == FIRST
    assert outcome.report.status == OK and outcome.report.placement == ()
    assert not _hooked(session)


def test_plan_mode_says_when_nothing_fits():
    outcome, _ = lifecycle(mode="plan", device=Device(1 << 16, reserve_bytes=0))
    assert outcome.report.step("plan")[0].outcome == "nothing fits"
    assert outcome.report.status == NOTHING_FITS


def test_apply_validates_rewarms_and_serves():
    outcome, session = lifecycle()
    assert _names(outcome) == [
        "warmup",
        "probes",
        "estimate",
        "plan",
        "apply",
        "validate",
        "re-warm",
        "serving",
    ]
    report = outcome.report
    assert report.validated and report.serving and report.status == OK
    assert dict(report.placement) == FIRST
    for phase in report.step("validate")[0].data["phases"]:
        assert phase["measured_bytes"] <= phase["predicted_bytes"] <= phase["usable_bytes"]
    assert outcome.applied is not None and len(outcome.applied.streamed["transformer"]) == 1
    assert _hooked(session) == set(pipeline_modules(session.pipe))  # the plan is in force
    assert outcome.monitor is not None  # serving began: the recorder takes no more requests
    with pytest.raises(RuntimeError, match="warmup has ended"):
        session.recorder.request()


def test_out_of_memory_rolls_back_and_replans():
    outcome, _session = lifecycle([Fault("DenoisingStage", times=1)])
    assert _validations(outcome) == [Failure.OUT_OF_MEMORY.value, "holds"]
    names = _names(outcome)
    assert names[names.index("validate") + 1 : names.index("validate") + 3] == [
        "rollback",
        "re-plan",
    ]
    assert dict(outcome.report.placement) != FIRST  # denoising needed more room: less resident
    first, second = (s.data["phases"] for s in outcome.report.step("validate"))
    denoise = [next(p for p in v if p["label"] == "stage:DenoisingStage") for v in (first, second)]
    assert denoise[1]["predicted_bytes"] > denoise[0]["predicted_bytes"]  # its bound was raised
    assert outcome.report.status == OK and outcome.report.validated
    failed = [r for r in outcome.records if r.error is not None]
    assert [r.error.type for r in failed] == ["torch.OutOfMemoryError"]  # the record is kept


def test_a_peak_above_the_plan_replans_with_the_measured_phases():
    peak = calibration().estimate.phase("stage:DenoisingStage").peak
    extra = peak.bound_bytes - peak.raw_bytes + 1000  # past the bound's own padding
    outcome, _ = lifecycle([Fault("DenoisingStage", PEAK, extra)])  # in every request
    assert _validations(outcome) == [Failure.OVER_BOUND.value, "holds"]
    first, second = (s.data["phases"] for s in outcome.report.step("validate"))
    label = "stage:DenoisingStage"
    before = next(p for p in first if p["label"] == label)
    after = next(p for p in second if p["label"] == label)
    assert before["measured_bytes"] > before["predicted_bytes"]
    assert after["predicted_bytes"] == after["measured_bytes"]  # the measurement, planned for
    assert dict(outcome.report.placement) == FIRST  # it still fits as placed


def test_a_peak_above_capacity_ends_on_the_fallback_unvalidated():
    outcome, session = lifecycle([Fault("DecodingStage", PEAK, 2 << 20)])
    assert _validations(outcome)[0] == Failure.OVER_CAPACITY.value
    assert outcome.report.step("re-plan")[0].outcome == "nothing fits"
    fallback = outcome.report.step("fallback")[0]
    assert fallback.detail.startswith("nothing fits by the measured phases")
    report = outcome.report
    assert report.status == NO_PLAN_VALIDATES and report.serving and not report.validated
    assert dict(report.placement) == CONSERVATIVE
    assert _hooked(session) == set(pipeline_modules(session.pipe))  # the fallback is in force


def test_a_request_error_falls_back_when_re_planning_changes_nothing():
    outcome, _ = lifecycle([Fault("DecodingStage", ERROR, times=1)])
    assert _validations(outcome) == [Failure.REQUEST_ERROR.value, "holds"]
    assert "repeats a plan that failed" in outcome.report.step("fallback")[0].detail
    assert outcome.report.verdict.startswith("the fallback held")
    assert dict(outcome.report.placement) == CONSERVATIVE and outcome.report.status == OK


def test_tries_are_bounded_then_the_fallback_is_kept():
    outcome, _ = lifecycle([Fault("DenoisingStage")], max_replans=1)  # fails every request
    assert _validations(outcome) == [Failure.OUT_OF_MEMORY.value] * 3  # plan, re-plan, fallback
    assert len(outcome.report.step("rollback")) == 3
    assert outcome.report.status == NO_PLAN_VALIDATES
    assert "NO PLAN VALIDATES" in outcome.report.verdict
    kept = [r for r in outcome.records if r.error is not None]
    assert len(kept) >= 3  # every failed validation's record, the re-warm's too


def test_strict_refuses_to_serve_and_leaves_the_pipeline_as_it_was():
    outcome, session = lifecycle([Fault("DenoisingStage")], mode="strict", max_replans=0)
    report = outcome.report
    assert report.status == REFUSED and not report.serving and report.placement == ()
    assert _names(outcome)[-1] == "refuse"
    assert outcome.applied is None and not _hooked(session)
    assert session.recorder.request() is not None  # still warming up: never entered serving


class FailingCollective:
    """An agreement whose ``call``-th collective fails (a rank lost mid-way), else a single rank."""

    def __init__(self, call: int) -> None:
        self.calls, self.call = 0, call

    def max_int(self, value: int) -> int:
        self.calls += 1
        if self.calls == self.call:
            raise RuntimeError("gloo: connection reset by peer")
        return value


def test_a_failure_mid_way_leaves_no_plan_in_force_and_keeps_the_records():
    # bounds and inputs exchanged, whether a plan fits, repeats, or repeats a slower placement
    before_validation = 5
    outcome, session = lifecycle(agreement=FailingCollective(before_validation + 1))
    names = _names(outcome)
    assert names[names.index("plan") :] == [
        "plan",
        "apply",
        "ranks",  # the collective failed: the validation's plan undone, this rank goes on alone
        "fallback",
        "apply",
        "re-warm",
        "serving",
    ]
    assert "connection reset" in outcome.report.step("ranks")[0].detail
    # the validation's record kept (and the re-warm's), the fallback in force, unvalidated
    assert len(outcome.records) == len(calibration().records) + 2
    report = outcome.report
    assert report.status == NO_PLAN_VALIDATES and report.serving
    assert dict(report.placement) == CONSERVATIVE
    outcome.applied.undo()
    assert not _hooked(session)


def test_a_failed_collective_in_strict_mode_stops_serving_with_no_plan_in_force():
    outcome, session = lifecycle(mode="strict", agreement=FailingCollective(6))
    report = outcome.report
    assert [s.name for s in report.steps][-2:] == ["ranks", "refuse"]
    assert report.status == REFUSED and not report.serving and report.placement == ()
    assert outcome.applied is None and not _hooked(session)
