"""Undo and rollback against failure, on the real tiny FLUX (CPU): a component whose hook will not
come off (``faults.failing_detach``: a hook that raises in accelerate's own
``remove_hook_from_module``) does not stop the others, every failure is reported, and a lifecycle
whose rollback fails stops serving with a non-zero status and names what is left in place.
"""

from __future__ import annotations

import functools

import pytest

from calibration.examples import EXAMPLES
from calibration.lifecycle.faults import CALL, Fault, failing_detach
from calibration.lifecycle.model import OK, ROLLBACK_FAILED
from calibration.lifecycle.run import run_lifecycle
from calibration.lifecycle.steps import Settings
from calibration.placement.mechanisms import has_offload_hooks
from calibration.plan.apply import UndoError, apply
from calibration.plan.model import Device, Placement, PlacementKind, Plan
from runtime.measure.diffusers_hooks import pipeline_modules
from tests.calibration.lifecycle_setup import STREAMING, calibration, points, session

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

FLUX = EXAMPLES["flux"]


def _placement(name, kind, kept=(), layers=0):
    return Placement(name, kind, kept, layers, 0, 0, 0, 0, 0.0, None, 0)


MIXED = Plan(
    True,
    "fits",
    (
        _placement("vae", PlacementKind.RESIDENT),
        _placement("text_encoder", PlacementKind.OFFLOADED),
        _placement("text_encoder_2", PlacementKind.OFFLOADED),
        _placement("transformer", PlacementKind.LAYERWISE, (0,), 2),
    ),
    (),
    0,
    0.0,
    Device(1 << 30),
)


def _hooked(pipe):
    return {n for n, m in pipeline_modules(pipe).items() if has_offload_hooks(m)}


def test_undo_goes_on_past_a_failing_component_and_reports_every_failure():
    pipe = FLUX.build(0)
    applied = apply(MIXED, pipe, device="cpu", offload_device="cpu")
    failing_detach(pipe.text_encoder)
    failing_detach(pipe.vae)
    with pytest.raises(UndoError) as caught:
        applied.undo()
    assert set(caught.value.failures) == {"text_encoder", "vae"}
    assert all("failed to detach" in why for why in caught.value.failures.values())
    assert caught.value.left == {"text_encoder": "offloading hooks", "vae": "offloading hooks"}
    assert _hooked(pipe) == {"text_encoder", "vae"}  # the rest were restored all the same
    assert not applied.undone
    for _, block in pipe.transformer.named_modules():
        assert not hasattr(block, "_diffusers_hook")
    applied.undo()  # again: the hooks come off now (the injected failure struck once each)
    assert applied.undone and not _hooked(pipe)


def test_a_failed_rollback_stops_serving_and_names_what_is_left():
    """The validation runs out of memory in denoising (the rollback follows); a hook added to the
    transformer during that request refuses to come off."""
    for mode in ("apply", "strict"):
        fresh, backend = session([Fault("DenoisingStage", times=1)])
        stick = functools.partial(failing_detach, fresh.pipe.transformer, times=10)
        backend.faults = (*backend.faults, Fault("DenoisingStage", CALL, action=stick))
        settings = Settings(STREAMING, mode)
        outcome = run_lifecycle(fresh, points(), settings, calibration=calibration())
        report = outcome.report
        assert report.status == ROLLBACK_FAILED != OK
        assert not report.serving and not report.validated and report.placement == ()
        assert "serving" not in [s.name for s in report.steps]
        failed = report.step("rollback")[-1]
        assert failed.outcome == "failed"
        assert dict(report.left_in_place) == {"transformer": "offloading hooks"}
        assert "transformer: offloading hooks" in report.verdict
        assert _hooked(fresh.pipe) == {"transformer"}  # only it: the others came back
        assert outcome.applied is None and outcome.monitor is None
