"""The lifecycle holds one pin state across its placements (issue 39, item 8): apply, the rollback
of a plan that failed, the re-plan's apply and the final undo each place this worker's pins in the
same ``PinBook``, as the sequence of ``PinChange`` shows; a copy another owner (a second pipeline)
holds is shared, never pinned twice nor released under it. On the CPU the bookkeeping runs and no
tensor is pinned (the apply steps say pinning applies on CUDA only)."""

from __future__ import annotations

import pytest

from calibration.lifecycle.faults import OUT_OF_MEMORY, Fault
from calibration.lifecycle.run import run_lifecycle
from calibration.lifecycle.steps import Settings
from calibration.placement.pins import CUDA_ONLY
from calibration.plan.pinning import WORKER, PinBook
from calibration.plan.pinstate import REST, PinKey, plan_pins
from tests.calibration.lifecycle_setup import STREAMING, calibration, points, session

pytest.importorskip("accelerate")

ENCODER = PinKey("text_encoder", REST)


def _run(book: PinBook):
    """The first plan's request runs out of memory in the denoising stage once: rolled back,
    re-planned (the vae offloaded too), applied again, held."""
    fresh, _ = session([Fault("DenoisingStage", OUT_OF_MEMORY, times=1)])
    settings = Settings(STREAMING, "apply")
    outcome = run_lifecycle(fresh, points(), settings, calibration=calibration(), pins=book)
    assert [s.outcome for s in outcome.report.step("validate")] == ["out-of-memory", "holds"]
    assert outcome.plan is not None and outcome.applied is not None
    return outcome


def test_apply_rollback_replan_and_undo_place_the_pins_in_one_state():
    book = PinBook()
    outcome = _run(book)
    first, rollback, replanned = book.changes
    final = plan_pins(outcome.plan)
    assert first.pin and not first.release  # the first plan's pins: wanted, pinned by no one
    assert PinKey("transformer", 1) in first.pin and PinKey("transformer", 0) not in first.pin
    assert PinKey("vae", REST) not in first.pin  # resident in the first plan
    assert rollback.release == first.pin and not rollback.pin  # undone: every one released
    assert replanned.pin == final and PinKey("vae", REST) in final  # the vae left the device
    assert book.state.of(WORKER) == final
    for step in outcome.report.step("apply"):
        assert step.detail.endswith(f"0 B pinned ({CUDA_ONLY})")
    outcome.applied.undo()
    assert book.changes[-1].release == final and not book.state.pinned


def test_a_copy_another_pipeline_holds_is_shared_and_kept():
    book = PinBook()
    book.place("i2i", {ENCODER}, lambda key: (), can_pin=False)  # a second pipeline offloads it
    outcome = _run(book)
    _, first, rollback, replanned = book.changes
    assert ENCODER in first.shared and ENCODER not in first.pin  # pinned once, for both
    assert ENCODER in rollback.kept and ENCODER not in rollback.release
    assert ENCODER in replanned.shared
    outcome.applied.undo()
    assert book.state.pinned == {ENCODER} and book.state.of("i2i") == {ENCODER}
