"""A calibration that stops (weights that cannot fit the cap, ``WeightsOverCapacity`` in its
first request) leaves nothing to plan from: apply and strict refuse to serve (never serving with
no placement, as they once did in apply: serving, exit 4, no placement), plan plans nothing."""

from __future__ import annotations

import pytest

from calibration.lifecycle.faults import CALL, Fault
from calibration.lifecycle.model import NOTHING_FITS, OK, REFUSED
from calibration.lifecycle.run import run_lifecycle
from calibration.lifecycle.steps import Settings
from tests.calibration.lifecycle_setup import STREAMING, points, session

pytest.importorskip("accelerate")


def _too_big() -> None:
    from runtime.measure.residency import WeightsOverCapacity

    raise WeightsOverCapacity("transformer", None, 326_656, 0, 307_200, 326_656)


@pytest.mark.parametrize(
    ("mode", "status", "serving"),
    [("apply", REFUSED, False), ("strict", REFUSED, False), ("plan", NOTHING_FITS, True)],
)
def test_a_calibration_that_stops_never_serves_with_no_placement(mode, status, serving):
    fresh, _ = session([Fault("DenoisingStage", CALL, times=1, action=_too_big)])
    report = run_lifecycle(fresh, points(), Settings(STREAMING, mode)).report
    assert report.step("estimate")[0].outcome == "failed"
    assert "cannot be calibrated" in report.verdict and "transformer" in report.verdict
    assert (report.status, report.serving, dict(report.placement)) == (status, serving, {})
    assert report.status != OK
