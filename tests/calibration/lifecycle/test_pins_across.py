"""The lifecycle holds one pin state across its placements (issue 39, item 8): apply, the rollback
of a plan that failed, the re-plan's apply and the final undo each place this worker's pins in the
same ``PinBook``, as the sequence of ``PinChange`` shows; a copy another owner (a second pipeline)
holds is shared, never pinned twice nor released under it. A rollback between two placements keeps
this worker's pins for the next one, which releases only those it drops (none re-pinned); a run
that ends with no placement releases them. On the CPU the bookkeeping runs and no
tensor is pinned (the apply steps say pinning applies on CUDA only)."""

from __future__ import annotations

import attrs
import pytest

from calibration.lifecycle.faults import OUT_OF_MEMORY, Fault
from calibration.lifecycle.run import run_lifecycle
from calibration.lifecycle.steps import Log, Settings, apply_and_validate, plan_inputs
from calibration.placement.pins import CUDA_ONLY
from calibration.plan.model import PlacementKind, Plan
from calibration.plan.pinning import WORKER, PinBook
from calibration.plan.pinstate import REST, PinKey, plan_pins
from calibration.plan.solver import solve
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


def test_a_replan_keeping_the_pins_neither_releases_nor_pins_them_again():
    """The fault, the rollback, the re-plan: the pins the re-plan keeps stay (no change of them
    between the two applies), only the vae's are new; the final undo releases every one."""
    book = PinBook()
    outcome = _run(book)
    first, replanned = book.changes  # the rollback changed no pin
    final = plan_pins(outcome.plan)
    assert first.pin and not first.release  # the first plan's pins: wanted, pinned by no one
    assert PinKey("transformer", 1) in first.pin and PinKey("transformer", 0) not in first.pin
    assert PinKey("vae", REST) not in first.pin  # resident in the first plan
    assert first.pin < final  # every one kept by the re-plan ...
    assert replanned.pin == {PinKey("vae", REST)} == final - first.pin  # ... only the vae's new
    assert not replanned.release and not replanned.kept
    assert book.state.of(WORKER) == final
    for step in outcome.report.step("apply"):
        assert step.detail.endswith(f"0 B pinned ({CUDA_ONLY})")
    outcome.applied.undo()
    assert book.changes[-1].release == final and not book.state.pinned


def _resident(plan: Plan, name: str) -> Plan:
    """``plan`` with ``name`` kept resident (its host copy, and its pins, dropped)."""
    placements = tuple(
        attrs.evolve(p, kind=PlacementKind.RESIDENT, pinned_bytes=0, pinned_layers=())
        if p.component == name
        else p
        for p in plan.placements
    )
    return attrs.evolve(plan, placements=placements)


def test_a_replan_that_drops_a_pin_releases_it_once_and_keeps_the_others():
    """Two placements in the lifecycle's steps: the first rolled back (its request out of
    memory), the second keeping text_encoder_2 resident: one release, of its copy, nothing
    pinned again; the end without a placement releases the rest."""
    fresh, _ = session([Fault("DenoisingStage", OUT_OF_MEMORY, times=1)])
    settings = Settings(STREAMING, "apply")
    log = Log()
    components, targets = plan_inputs(calibration())
    first = solve(components, targets, STREAMING)
    dropped = PinKey("text_encoder_2", REST)
    assert dropped in plan_pins(first) and ENCODER in plan_pins(first)
    failed = apply_and_validate(log, fresh, first, points().target, settings)
    assert failed.applied is None and log.pins.state.of(WORKER) == plan_pins(first)
    second = apply_and_validate(
        log, fresh, _resident(first, "text_encoder_2"), points().target, settings
    )
    placed, moved = log.pins.changes
    assert placed.pin == plan_pins(first)
    assert (moved.pin, moved.release) == (frozenset(), {dropped})
    if second.applied is not None:
        second.applied.undo(keep_pins=True)
    log.unpin()  # the lifecycle's end with no placement in force (``finish``)
    assert log.pins.changes[-1].release == plan_pins(first) - {dropped}
    assert not log.pins.state.pinned


def test_a_lifecycle_that_ends_without_a_placement_releases_its_pins():
    """strict, every request out of memory: every placement rolled back, the pins each kept for
    the next released when the worker refuses to serve."""
    book = PinBook()
    fresh, _ = session([Fault("DenoisingStage", OUT_OF_MEMORY)])
    settings = Settings(STREAMING, "strict", max_replans=1)
    outcome = run_lifecycle(fresh, points(), settings, calibration=calibration(), pins=book)
    assert outcome.applied is None and not outcome.report.serving
    assert book.changes[0].pin and not book.state.pinned
    assert not any(c.release for c in book.changes[:-1])  # released once, at the end
    assert book.changes[-1].release == book.changes[0].pin | set().union(
        *(c.pin for c in book.changes[1:])
    )


def test_a_copy_another_pipeline_holds_is_shared_and_kept():
    book = PinBook()
    book.place("i2i", {ENCODER}, lambda key: (), can_pin=False)  # a second pipeline offloads it
    outcome = _run(book)
    _, first, replanned = book.changes
    assert ENCODER in first.shared and ENCODER not in first.pin  # pinned once, for both
    assert ENCODER not in replanned.pin | replanned.release  # held by both across the re-plan
    assert book.state.holders[ENCODER] == {"i2i", WORKER}
    outcome.applied.undo()
    assert book.changes[-1].kept == {ENCODER} and ENCODER not in book.changes[-1].release
    assert book.state.pinned == {ENCODER} and book.state.of("i2i") == {ENCODER}
