"""Any failure while a plan is applied is a failed validation, on the real tiny FLUX (CPU): a
component's ``.to()`` that raises (``faults.failing_to``: an out-of-memory error or any other) is
undone, re-planned from (the component needed more than the plan left it) and fallen back from;
the worker never serves with no placement, and nothing of the failed plan stays on the pipeline.
"""

from __future__ import annotations

import pytest

from calibration.lifecycle.faults import failing_to
from calibration.lifecycle.model import NO_PLAN_VALIDATES, OK, Failure
from calibration.lifecycle.run import run_lifecycle
from calibration.lifecycle.steps import Settings
from calibration.plan.apply import has_offload_hooks
from runtime.measure.diffusers_hooks import pipeline_modules
from tests.calibration.lifecycle_setup import STREAMING, calibration, points, session

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")


def _run(component: str, error, times: int = 1, mode: str = "apply"):
    fresh, _ = session()
    failing_to(getattr(fresh.pipe, component), error, times)
    settings = Settings(STREAMING, mode)
    return run_lifecycle(fresh, points(), settings, calibration=calibration()), fresh


def _hooked(fresh):
    return {n for n, m in pipeline_modules(fresh.pipe).items() if has_offload_hooks(m)}


@pytest.mark.parametrize(
    ("component", "error", "failure"),
    [
        ("text_encoder_2", lambda: torch.OutOfMemoryError("CUDA out of memory"), "out-of-memory"),
        ("vae", lambda: RuntimeError("CUDA error: an illegal memory access"), "request-error"),
    ],
)
def test_a_failed_move_is_a_failed_validation_rolled_back_and_replanned(component, error, failure):
    outcome, fresh = _run(component, error)
    report = outcome.report
    assert "error" not in [s.name for s in report.steps]
    first = report.step("apply")[0]
    assert first.outcome == "failed" and first.data["component"] == component
    validations = [s.outcome for s in report.step("validate")]
    assert validations[0] == failure and validations[-1] == "holds"
    assert report.step("re-plan") or report.step("fallback")
    assert report.status == OK and report.serving and report.placement
    assert outcome.applied is not None and not outcome.applied.undone
    outcome.applied.undo()
    assert not _hooked(fresh)  # the plan in force came off whole: nothing of the failed one


def test_an_out_of_memory_move_replans_with_more_room_for_that_component():
    outcome, _ = _run("vae", lambda: torch.OutOfMemoryError("CUDA out of memory"))
    report = outcome.report
    assert report.step("validate")[0].outcome == Failure.OUT_OF_MEMORY.value
    first, second = report.step("plan")[0], (report.step("re-plan") or report.step("fallback"))[0]
    assert first.data["placement"]["vae"] == "resident"
    assert second.data["placement"] != first.data["placement"]  # not the same placement again
    assert report.serving and report.placement


def test_a_move_that_failed_leaves_nothing_to_put_back():
    # the vae's move fails twice (the first apply, the re-plan's): it never left its device, so
    # the undo moves nothing (a move not needed cannot fail) and the lifecycle goes on; it used
    # to put the vae "back" with a .to() that failed and stop serving with nothing left in place
    outcome, fresh = _run("vae", lambda: RuntimeError("device lost"), times=2)
    report = outcome.report
    assert [s.outcome for s in report.step("rollback")].count("failed") == 0
    assert report.status in (OK, NO_PLAN_VALIDATES) and report.serving and report.placement
    assert not report.left_in_place and not report.step("error")
    # the fallback groups the vae: its hooks move the tensors without the module's failing .to()
    assert [s.outcome for s in report.step("apply")][:2] == ["failed", "done"]
    assert report.step("fallback")[0].data["placement"]["vae"] == "grouped"
    assert outcome.applied is not None
    outcome.applied.undo()
    assert not _hooked(fresh)
