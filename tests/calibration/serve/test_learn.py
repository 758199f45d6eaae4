"""Learning from traffic (calibration.serve.learn) on the tiny FLUX's shared calibration: served
points beyond its sizes that lie on the fit narrow the bound (the stage's margin from evidence) and
never leave it under a measured peak; the history stays bounded; the state folder keeps the points
atomically and refuses a hostile file."""

from __future__ import annotations

import functools
import json

import pytest
from attrs import evolve
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.calibrate.report import document
from calibration.lifecycle.validate import phase_label
from calibration.plan.inputs import CalibrationFormatError
from calibration.serve.learn import Evidence, History, Learner, learned_predictor, under_measured
from calibration.serve.predictor import from_calibration
from calibration.serve.state import LEARNED, StaleState, StateFolder
from runtime.kinds import MarginSource
from runtime.record import ErrorInfo, WarmupRecord
from tests.calibration.lifecycle_setup import calibration, formulas, session

#: Beyond every calibrated size (the target is 64x64): a request the bound extrapolates to.
FAR = {"steps": 2, "height": 128, "width": 128}
#: Served shapes larger than the calibration's, still under ``FAR``.
LARGER = [{"steps": 2, "height": h, "width": w} for h, w in ((64, 80), (80, 80), (80, 96))]


@functools.cache
def _served() -> tuple[tuple[WarmupRecord, ...], WarmupRecord]:
    """The ``LARGER`` requests and ``FAR`` measured on a fresh tiny FLUX (a warmup first)."""
    measured, _ = session()
    runs = [measured.run(p) for p in [LARGER[0], *LARGER, FAR]]
    assert all(r.ok for r in runs)
    return tuple(runs[1:-1]), runs[-1]


def _evidence() -> Evidence:
    return Evidence.of(calibration(), formulas())


def test_points_on_the_fit_beyond_the_sizes_narrow_the_bound_never_under_a_peak() -> None:
    evidence, pipeline = _evidence(), formulas()
    served, far = _served()
    points = [evidence.comparable(r, pipeline) for r in served]
    assert all(p is not None for p in points)
    before = from_calibration(calibration(), pipeline).predict(FAR)
    predictor, refitted = learned_predictor(evidence, [p for p in points if p], pipeline)
    after = predictor.predict(FAR)
    assert all(m.source != MarginSource.FIXED for m in refitted.margins)  # confirmed, every stage
    measured = {phase_label(p.kind, p.name, p.stage): p for p in far.phases}
    for old, new in zip(before.phases, after.phases):
        assert new.bound_bytes <= old.bound_bytes, new.label
        assert new.bound_bytes >= measured[new.label].peak_allocated, new.label
    # narrower where it extrapolates: the denoise's risk falls with the served points; the
    # decode's bound (the request's) is already at the evidence floor, so it stays
    assert after.bound_bytes <= before.bound_bytes
    assert any(n.bound_bytes < o.bound_bytes for o, n in zip(before.phases, after.phases))
    assert under_measured(predictor, [far], refitted.basis.phase_weights) == []


def test_a_failed_record_or_an_unknown_layout_is_no_point() -> None:
    evidence, pipeline = _evidence(), formulas()
    record = _served()[0][0]
    failed = evolve(record, error=ErrorInfo("RuntimeError", "boom"))
    moved = evolve(record, phases=[evolve(record.phases[0], active_components=("nothing",))])
    assert evidence.comparable(failed, pipeline) is None
    assert evidence.comparable(moved, pipeline) is None
    assert evidence.comparable(evolve(record, params={"steps": 10**9}), pipeline) is None
    assert evidence.comparable(record, pipeline) is record  # the same weights: as measured


def test_a_phase_measured_with_fewer_weights_is_shifted_to_the_calibrations() -> None:
    evidence, pipeline = _evidence(), formulas()
    record = _served()[0][0]
    labels = [phase_label(p.kind, p.name, p.stage) for p in record.phases]
    held = {label: 5000 for label in labels}  # as a placement that held 5000 B in every phase
    evidence = evolve(evidence, basis=evolve(evidence.basis, phase_weights=held))
    lighter = evolve(record, phases=[evolve(p, weights_bytes=4000) for p in record.phases])
    point = evidence.comparable(lighter, pipeline)
    assert point is not None
    assert [q.peak_allocated - p.peak_allocated for p, q in zip(record.phases, point.phases)] == [
        1000
    ] * len(labels)
    assert point.peak_allocated == record.peak_allocated + 1000


def _record(steps: int, k: int) -> WarmupRecord:
    """A point of shape ``steps``, the ``k``-th sent (its duration says which)."""
    return WarmupRecord("p", "cpu", "x", {"steps": steps}, None, 0, 0, 0, float(k))


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.integers(0, 9), max_size=60),
    st.integers(1, 4),
    st.integers(1, 5),
)
def test_the_history_keeps_the_newest_points_of_the_latest_shapes(
    shapes: list[int], per_shape: int, kept: int
) -> None:
    history = History(per_shape, kept)
    for k, shape in enumerate(shapes):
        history.add(_record(shape, k))
    points = history.points()
    by_shape: dict[int, list[int]] = {}
    for p in points:
        by_shape.setdefault(int(p.params["steps"]), []).append(int(p.duration_s))
    assert len(by_shape) <= kept and all(len(v) <= per_shape for v in by_shape.values())
    latest = list(dict.fromkeys(reversed(shapes)))[:kept]
    assert set(by_shape) == set(latest)
    evicted = len(set(shapes)) > kept  # some shape was dropped (and may have come back)
    for shape, ns in by_shape.items():
        sent = [k for k, s in enumerate(shapes) if s == shape]
        assert ns and ns == sent[-len(ns) :]  # the newest, oldest first
        if not evicted:
            assert ns == sent[-per_shape:]
    assert len(history) == len(points)


def test_the_points_round_trip_through_the_state_folder(tmp_path) -> None:
    state = StateFolder(tmp_path)
    assert state.read_learned() == ()
    served, _ = _served()
    learner = Learner(_evidence(), formulas(), state, every=len(served))
    assert all(learner.served(r) for r in served)
    assert learner.refit() is not None  # due after ``every`` points: written atomically
    assert state.read_learned() == served
    again = Learner(_evidence(), formulas())
    assert again.load(state.read_learned()) == len(served) and again.due
    state.forget_learned()
    assert state.read_learned() == ()


@pytest.mark.parametrize("data", [b"{not json", b'[{"pipeline": 1}]', b"[" + b" " * 2000 + b"]"])
def test_a_hostile_points_file_is_stale_state(tmp_path, monkeypatch, data: bytes) -> None:
    monkeypatch.setattr("calibration.serve.state.MAX_RECORDS_BYTES", 1000)  # a small file over it
    (tmp_path / LEARNED).write_bytes(data)
    with pytest.raises(StaleState, match=LEARNED):
        StateFolder(tmp_path).read_learned()


def test_a_saved_document_with_its_records_file_re_fits_as_the_calibration_does() -> None:
    cal, pipeline = calibration(), formulas()
    doc = json.loads(json.dumps(document(cal)))
    saved = [*cal.records, *([cal.measured] if cal.measured is not None else [])]
    evidence = Evidence.of_document(doc, saved, pipeline)
    points = list(_served()[0])
    from_doc, _ = learned_predictor(evidence, points, pipeline)
    in_memory, _ = learned_predictor(_evidence(), points, pipeline)
    assert from_doc.predict(FAR).phases == in_memory.predict(FAR).phases
    with pytest.raises(CalibrationFormatError, match="calibration document"):
        Evidence.of_document({k: v for k, v in doc.items() if k != "backend"}, saved, pipeline)
