"""The grouped placement in serving: the predictor's basis carries the calibration's block groups
(in memory and through its saved document, read by the planner's own parsing), so a served
request whose decode fits the device only with the VAE grouped is planned that way and runs."""

from __future__ import annotations

import json

import attrs
import pytest

from calibration.calibrate.report import document
from calibration.plan.inputs import CalibrationFormatError
from calibration.plan.model import Device, PlacementKind
from calibration.serve.admission import DecisionKind, RefusalReason, RequestRefused
from calibration.serve.basis import Basis, from_document
from calibration.serve.predictor import RequestPredictor
from calibration.serve.worker import Worker
from tests.calibration.lifecycle_setup import PROBE, TARGET, calibration, formulas, session

pytest.importorskip("accelerate")

#: Below the decode's peak with the VAE whole, above it with the VAE grouped
#: (tests/calibration/cli/test_grouped_cli.py's cap, the same tiny FLUX and target).
GROUPED_ONLY = Device(720 << 10, reserve_bytes=0)


def _saved() -> list:
    cal = calibration()
    return [*cal.records, *([cal.measured] if cal.measured is not None else [])]


def test_the_basis_carries_the_calibrations_groups_through_its_document() -> None:
    cal = calibration()
    assert len(cal.group_bytes["vae"]) == 8  # the encoder's 4 blocks, the decoder's 4
    doc = json.loads(json.dumps(document(cal)))
    assert Basis.of(cal).group_bytes == cal.group_bytes
    assert from_document(doc, _saved(), formulas()).group_bytes == cal.group_bytes
    older = {k: v for k, v in doc.items() if k != "group_bytes"}  # written before groups
    assert from_document(older, _saved(), formulas()).group_bytes == {}


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ({"vae": [1, -1]}, r"group_bytes"),
        ({"vae": [1] * 100_001}, r"group_bytes"),
        ({"nowhere": [1]}, r"group bytes for unknown components \['nowhere'\]"),
    ],
)
def test_a_hostile_group_bytes_is_a_typed_error(groups: object, message: str) -> None:
    doc = {**json.loads(json.dumps(document(calibration()))), "group_bytes": groups}
    with pytest.raises(CalibrationFormatError, match=message):
        from_document(doc, _saved(), formulas())


def _worker(basis: Basis) -> Worker:
    """A fresh tiny FLUX, one warmup request run, served unplanned (every component resident)
    on ``GROUPED_ONLY``."""
    fresh, _ = session()
    fresh.run(PROBE)
    fresh.recorder.end_warmup()
    predictor = RequestPredictor.from_basis(basis, fresh.formulas)
    return Worker(fresh, predictor, GROUPED_ONLY, None, None)


def test_a_request_whose_decode_fits_only_grouped_is_planned_grouped_and_runs() -> None:
    worker = _worker(Basis.of(calibration()))
    served = worker.serve(TARGET)
    assert served.decision.kind is DecisionKind.REPLACE and served.record.ok
    assert served.decision.plan is not None
    vae = served.decision.plan.placement("vae")
    assert vae.kind is PlacementKind.GROUPED and vae.group_bytes == calibration().group_bytes["vae"]
    decode = next(p for p in served.phases if p.label == "component:vae@DecodingStage")
    assert decode.measured_bytes is not None and decode.within
    assert all(p.measured_bytes is not None and p.within for p in served.phases)
    assert 0 < served.peak_bytes <= GROUPED_ONLY.usable_bytes


def test_without_the_groups_the_same_request_is_refused() -> None:
    worker = _worker(attrs.evolve(Basis.of(calibration()), group_bytes={}))
    with pytest.raises(RequestRefused) as refused:
        worker.serve(TARGET)
    assert refused.value.reason is RefusalReason.TOO_LARGE
