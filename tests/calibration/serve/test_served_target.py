"""The tiny SDXL served at its validated target under a 6 MiB cap (its UNet streamed): the
predictor's bound is the plan's for every phase, and requests at that target never drift. Its
calibration pads DenoisingStage's bounds with a formula mismatch's risk; the predictor once left
that out and every served target measured above its bound."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from calibration.cli.options import Choice
from calibration.cli.serve_boot import Boot, boot
from calibration.core.config import RunConfig
from calibration.core.shapes import Shapes
from calibration.plan.model import Device
from calibration.serve.admitted import AdmittedWorker

FORMULAS = Path(__file__).resolve().parents[3] / "formulas"
PROBE = {"steps": 1, "height": 64, "width": 64}
TARGET = {"steps": 2, "height": 128, "width": 128}
CAP = Device(6 << 20, reserve_bytes=0)


@pytest.fixture(scope="module")
def worker() -> Iterator[AdmittedWorker]:
    """The tiny SDXL through the lifecycle at the cap, shared by the tests, closed after them."""
    config = RunConfig(device="cpu", repeat=1)
    shapes = Shapes({}, PROBE, TARGET)
    served = boot(Boot(Choice("sdxl", None, FORMULAS, None), shapes, config, CAP))
    yield served
    served.close()


def test_at_the_validated_target_the_predictor_bounds_every_phase_as_the_plan(
    worker: AdmittedWorker,
) -> None:
    inner = worker.inner
    assert inner.plan is not None
    assert any(p.onload_bytes for p in inner.plan.placements)  # something streams at this cap
    prediction = inner.predictor.predict(dict(TARGET) | {"cfg": True}, inner.plan)
    planned = {u.label: u.bound_bytes + u.weights_bytes for u in inner.plan.phases}
    assert {p.label: p.bound_bytes for p in prediction.phases} == planned


def test_requests_at_the_validated_target_run_without_drift(worker: AdmittedWorker) -> None:
    for _ in range(3):
        answer = worker.serve(dict(TARGET))
        seen = [(a.decision, a.drift, a.replanned) for a in (answer,)]
        over = [p for p in answer.phases if (p.measured or 0) > (p.predicted or 0)]
        del answer  # its image would stay live on the CPU's tracker through the next request
        assert seen == [("run", False, False)], over
        assert not over
    assert not worker.drifts
