"""The request predictor on the tiny FLUX's shared calibration: the estimator's own figures at any
request (an independent path: records through ``runtime.estimate.estimate`` at that point), the
planner's at the calibration's target, monotone where the formulas are, and the runtime's typed
errors for inadmissible requests."""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.calibrate.report import document
from calibration.calibrate.settle import in_regime
from calibration.lifecycle.steps import plan_inputs
from calibration.plan.inputs import CalibrationFormatError
from calibration.plan.solver import solve
from calibration.serve.basis import from_document
from calibration.serve.predictor import RequestPredictor, from_calibration
from runtime import InadmissibleError, UnknownParamError
from runtime.estimate import estimate
from runtime.kinds import EARNED
from runtime.record import WarmupRecord
from tests.calibration.lifecycle_setup import STREAMING, calibration, formulas

ROOT = Path(__file__).resolve().parents[3]


def _predictor() -> RequestPredictor:
    return from_calibration(calibration(), formulas())


def _kept() -> list[WarmupRecord]:
    """The records the calibration estimated from (the sizes in the formulas' regime)."""
    cal = calibration()
    return in_regime(formulas(), cal.records, cal.findings, cal.shapes.target)


def _estimated(point: dict[str, int | bool]) -> dict[str, tuple[int | None, int | None]]:
    """Each phase's raw and bound at ``point`` as the estimator gives them from the records, its
    bound with the risk the calibration's findings added (what its own estimate holds beyond the
    estimator's at its target)."""
    cal, at_target = calibration(), _ruled(dict(calibration().shapes.target))
    risks = {
        p.label: (p.peak.bound_bytes or 0) - (at_target[p.label][1] or 0)
        for p in cal.estimate.phases
    }
    return {
        label: (raw, None if bound is None else bound + risks[label])
        for label, (raw, bound) in _ruled(point).items()
    }


def _ruled(point: dict[str, int | bool]) -> dict[str, tuple[int | None, int | None]]:
    """Each phase's raw and bound at ``point`` by the estimator's rules alone (no risk)."""
    cal = calibration()
    evidence = {m.stage: m.margin for m in cal.margins if m.source in EARNED}
    result = estimate(
        _kept(),
        formulas(),
        target=point,
        margin=cal.estimate.margin,
        component_weight_bytes=cal.component_weight_bytes,
        stage_margins=evidence,
    )
    return {p.label: (p.peak.raw_bytes, p.peak.bound_bytes) for p in result.phases}


def _resident(point: dict[str, int | bool]) -> dict[str, tuple[int, int]]:
    """The predictor's raw and bound with the weights the calibration measured with."""
    cal, prediction = calibration(), _predictor().predict(point)
    everything = sum(cal.component_weight_bytes.values())
    return {
        p.label: (
            p.peak_bytes - p.weights_bytes + cal.phase_weights.get(p.label, everything),
            p.bound_bytes - p.weights_bytes + cal.phase_weights.get(p.label, everything),
        )
        for p in prediction.phases
    }


def test_imports_neither_torch_lark_nor_sympy() -> None:
    code = (
        "import sys, calibration.serve.predictor; "
        "print(sorted({'torch', 'lark', 'sympy'} & set(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


@settings(max_examples=15)
@given(st.data())
def test_at_every_measured_point_the_estimators_figures(data: st.DataObject) -> None:
    record = data.draw(st.sampled_from([r for r in _kept() if r.ok]))
    point = dict(record.params)
    assert _resident(point) == _estimated(point)


@settings(max_examples=15)
@given(
    st.integers(1, 5),
    st.integers(1, 10).map(lambda k: 16 * k),
    st.integers(1, 10).map(lambda k: 16 * k),
)
def test_beyond_the_measured_points_the_estimators_figures(steps: int, h: int, w: int) -> None:
    point = {"steps": steps, "height": h, "width": w, "cfg": False}
    assert _resident(point) == _estimated(point)


def test_at_the_target_the_plans_phases_and_the_calibrations_time() -> None:
    cal = calibration()
    components, targets = plan_inputs(cal)
    plan = solve(components, targets, STREAMING)
    assert plan.feasible
    prediction = _predictor().predict(dict(cal.shapes.target), plan)
    planned = {u.label: u.bound_bytes + u.weights_bytes for u in plan.phases}
    assert {p.label: p.bound_bytes for p in prediction.phases} == planned
    assert {p.label: p.weights_bytes for p in prediction.phases} == {
        u.label: u.weights_bytes for u in plan.phases
    }
    assert prediction.fits(STREAMING.usable_bytes)
    alone = _predictor().predict(dict(cal.shapes.target))
    assert alone.seconds == pytest.approx(cal.estimate.timing.seconds)
    assert alone.seconds is not None
    assert prediction.seconds == pytest.approx(alone.seconds + plan.times[0].exposed_s)


def _terms(point: dict[str, int | bool]) -> dict[str, tuple[int | Fraction, ...]]:
    pipeline = formulas()
    return {s: pipeline.memory_terms(s, **point) for s in pipeline.stages}


SIDE = st.integers(1, 12).map(lambda k: 16 * k)


@settings(max_examples=40)
@given(st.integers(1, 6), SIDE, SIDE, st.integers(0, 3), st.integers(0, 64), st.integers(0, 64))
def test_monotone_where_the_formulas_are(s: int, h: int, w: int, ds: int, dh: int, dw: int) -> None:
    small = {"steps": s, "height": h, "width": w, "cfg": False}
    large = {"steps": s + ds, "height": h + dh // 16 * 16, "width": w + dw // 16 * 16, "cfg": False}
    a, b = _terms(small), _terms(large)
    grows = {st_ for st_ in a if all(x <= y for x, y in zip(a[st_], b[st_]))}
    predictor = _predictor()
    p, q = predictor.predict(small), predictor.predict(large)
    for x, y in zip(p.phases, q.phases):
        if x.stage in grows:
            assert x.peak_bytes <= y.peak_bytes and x.bound_bytes <= y.bound_bytes, x.label


def test_inadmissible_and_unknown_params_raise_the_runtimes_errors() -> None:
    predictor = _predictor()
    with pytest.raises(InadmissibleError):
        predictor.predict({"height": 65})
    with pytest.raises(UnknownParamError):
        predictor.predict({"frames": 9})


def _saved() -> list[WarmupRecord]:
    """The calibration's ``--records`` file (the target's run last)."""
    cal = calibration()
    return [*cal.records, *([cal.measured] if cal.measured is not None else [])]


def test_a_saved_document_and_its_records_predict_the_same() -> None:
    cal = calibration()
    doc = json.loads(json.dumps(document(cal)))
    assert [e["estimated"] for e in doc["records"]] == [r in _kept() for r in cal.records]
    basis = from_document(doc, _saved(), formulas())  # the document names the estimate's records
    older = {
        **doc,
        "records": [{k: v for k, v in e.items() if k != "estimated"} for e in doc["records"]],
    }
    before_marks = from_document(older, _kept(), formulas())  # a document written before them
    for b in (basis, before_marks):
        saved = RequestPredictor.from_basis(b, formulas())
        for point in ({"steps": 3, "height": 80, "width": 96}, dict(cal.shapes.target)):
            assert saved.predict(point).phases == _predictor().predict(point).phases


def test_records_out_of_the_documents_order_or_marks_of_another_type_are_refused() -> None:
    doc = json.loads(json.dumps(document(calibration())))
    # the first record that differs is named (the last may be at the first's params)
    with pytest.raises(CalibrationFormatError, match=r"record \d+ is at .*--records"):
        from_document(doc, _saved()[::-1], formulas())
    doc["records"][0]["estimated"] = "yes"
    with pytest.raises(CalibrationFormatError, match=r"records\[0\]\.estimated"):
        from_document(doc, _saved(), formulas())


def test_records_of_another_calibration_are_refused() -> None:
    cal = calibration()
    doc = json.loads(json.dumps(document(cal)))
    with pytest.raises(CalibrationFormatError, match="--records"):
        from_document(doc, [r for r in cal.records if r.params["height"] == 32], formulas())
