"""The re-warm is agreed like a validation: a re-warm that fails (here on the only rank; the
two-rank case is in test_rank_faults.py) rolls a validated placement back; apply falls back to the
most conservative placement, unvalidated, and re-warms it (kept whatever that re-warm says, as
apply keeps any unvalidated fallback), strict refuses; never a hook left."""

from __future__ import annotations

import pytest

from calibration.lifecycle.faults import ERROR, OUT_OF_MEMORY, Fault
from calibration.lifecycle.model import NO_PLAN_VALIDATES, REFUSED
from calibration.placement.mechanisms import has_offload_hooks
from runtime.measure.diffusers_hooks import pipeline_modules
from tests.calibration.lifecycle_setup import lifecycle

pytest.importorskip("accelerate")

CONSERVATIVE = {  # the least footprint: the VAE and the transformer grouped
    "vae": "grouped",
    "text_encoder": "offloaded",
    "text_encoder_2": "offloaded",
    "transformer": "grouped",
}
#: The re-warm: the request after the first validation (which holds at 1 MiB).
REWARM_OOM = Fault("DenoisingStage", OUT_OF_MEMORY, times=1, after=1)


def _names(outcome):
    names = [s.name for s in outcome.report.steps]
    return names[names.index("plan") :]


def _hooked(session):
    return {n for n, m in pipeline_modules(session.pipe).items() if has_offload_hooks(m)}


def test_a_failed_re_warm_rolls_back_and_serves_the_fallback_re_warmed():
    outcome, session = lifecycle([REWARM_OOM])
    assert _names(outcome) == [
        "plan",
        "apply",
        "validate",
        "re-warm",  # out of memory: the placement taken off
        "rollback",
        "fallback",
        "apply",
        "re-warm",
        "serving",
    ]
    report = outcome.report
    first = report.step("re-warm")[0]
    assert first.outcome == "failed" and "OutOfMemoryError" in first.detail
    assert report.status == NO_PLAN_VALIDATES and report.serving
    assert dict(report.placement) == CONSERVATIVE
    outcome.applied.undo()
    assert not _hooked(session)


def test_a_failed_re_warm_in_strict_mode_refuses_with_no_hook_left():
    outcome, session = lifecycle([REWARM_OOM], mode="strict")
    assert _names(outcome)[-3:] == ["re-warm", "rollback", "refuse"]
    report = outcome.report
    assert report.status == REFUSED and not report.serving and not report.placement
    assert outcome.applied is None and not _hooked(session)


def test_an_unvalidated_fallback_whose_re_warm_fails_too_is_kept_as_apply_keeps_it():
    outcome, session = lifecycle([Fault("DenoisingStage", ERROR, after=1)])
    tail = ["re-warm", "rollback", "fallback", "apply", "re-warm", "serving"]
    assert _names(outcome)[-6:] == tail
    assert [s.outcome for s in outcome.report.step("re-warm")] == ["failed", "failed"]
    report = outcome.report
    assert report.status == NO_PLAN_VALIDATES and report.serving
    assert dict(report.placement) == CONSERVATIVE
    outcome.applied.undo()
    assert not _hooked(session)
