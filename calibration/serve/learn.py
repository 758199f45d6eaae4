"""Learning from traffic: each served request's measured phases become points of the calibration's
evidence, and the predictor is fitted again from the calibration's records plus them, through the
same path the calibration took (docs/serving.md, "Learning from traffic").

The points are a bounded history (``History``: at most ``per_shape`` records per shape, the oldest
dropped, and ``shapes`` shapes, the least recently served dropped). A re-fit (``refit``) checks the
records and the points against the formulas (``calibration.probes.findings.check``), gives each
stage its margin from that evidence (``calibration.probes.evidence.stage_margins``: points beyond
the calibration's sizes that lie on the fit confirm it and shorten the reach to the target) and
estimates again (``runtime.estimate.estimate``). A point above its old bound is in the new fit, so
the request it came from is predicted at or above what it measured (rule 1 covers it); a re-fit
that would leave any point's bound under its peak is refused (``LearnError``).
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from attrs import evolve, frozen

from artifact.point import Point, PointKey, point_key
from calibration.calibrate.settle import in_regime
from calibration.core.shapes import Shapes
from calibration.errors import CalibrationError
from calibration.plan.inputs import CalibrationFormatError, Json
from calibration.probes.evidence import (
    StageMargin,
    stage_margins,
    with_margin_risks,
    with_risks,
)
from calibration.probes.finding import Finding
from calibration.probes.findings import check
from calibration.serve.basis import Basis, CalibrationSource, estimate_records, from_document
from calibration.serve.predictor import RequestPredictor
from runtime import FormulaError, Pipeline
from runtime.estimate import estimate
from runtime.estimate.peaks import PhaseKey, phase_key, phase_label
from runtime.kinds import EARNED
from runtime.record import WarmupRecord

log = logging.getLogger(__name__)
#: Served records kept per shape (the newest): repeats of one shape say little more.
PER_SHAPE = 4
#: Shapes kept (the most recently served): the history, and the state folder's file, stay bounded.
SHAPES = 64
#: New points after which an idle moment re-fits even without a drift (confirming points narrow).
REFIT_EVERY = 8


class LearnError(CalibrationError):
    """A re-fit that cannot replace the predictor in force (the message says why)."""


class Learnable(CalibrationSource, Protocol):
    """What a re-fit reads of a ``calibration.calibrate.run.Calibration`` beyond the predictor's."""

    @property
    def records(self) -> Sequence[WarmupRecord]: ...
    @property
    def findings(self) -> Sequence[Finding]: ...
    @property
    def shapes(self) -> Shapes: ...
    @property
    def uncovered(self) -> Sequence[str]: ...
    @property
    def backend(self) -> str: ...


@frozen
class Evidence:
    """What a re-fit starts from: the records the calibration estimated from, the session's
    first request (the checks leave it out: it pays one-time costs), the target, the fixed
    margin, the params no size moved, the backend, and the calibration as a predictor reads it."""

    records: tuple[WarmupRecord, ...]
    first: WarmupRecord | None  # when the regime left it out of ``records``
    target: Point
    margin: float
    uncovered: tuple[str, ...]
    backend: str
    basis: Basis
    layouts: frozenset[PhaseKey]  # each phase's component layout the records measured

    @classmethod
    def of(cls, cal: Learnable, pipeline: Pipeline) -> Evidence:
        """A calibration in memory (its records in the formulas' regime, as it estimated)."""
        kept = tuple(in_regime(pipeline, cal.records, cal.findings, cal.shapes.target))
        first = (
            cal.records[0] if cal.records and (not kept or kept[0] is not cal.records[0]) else None
        )
        layouts = frozenset(phase_key(p) for r in kept if r.ok for p in r.phases)
        basis = Basis.of(cal)
        return cls(
            kept,
            first,
            dict(cal.shapes.target),
            basis.estimate.margin,
            tuple(cal.uncovered),
            cal.backend,
            basis,
            layouts,
        )

    @classmethod
    def of_document(
        cls, doc: Mapping[str, Json], records: Sequence[WarmupRecord], pipeline: Pipeline
    ) -> Evidence:
        """A ``--save``d document and its ``--records`` file (``basis.from_document``'s checks:
        ``CalibrationFormatError`` for anything but the pair one calibration wrote)."""
        basis = from_document(doc, records, pipeline)
        try:
            kept = tuple(estimate_records(doc, records))
            target, backend = dict(doc["target"]), str(doc["backend"])
            uncovered = tuple(str(u) for u in doc.get("uncovered") or ())
        except (KeyError, TypeError, ValueError) as exc:
            raise CalibrationFormatError(f"calibration document: {exc}") from None
        first = records[0] if records and (not kept or kept[0] is not records[0]) else None
        layouts = frozenset(phase_key(p) for r in kept if r.ok for p in r.phases)
        margin = basis.estimate.margin
        return cls(kept, first, target, margin, uncovered, backend, basis, layouts)

    def comparable(self, record: WarmupRecord, pipeline: Pipeline) -> WarmupRecord | None:
        """``record`` as the calibration would have measured it: each phase's peak with the
        weights the calibration measured that phase with (a placement that streamed more held
        fewer); None when it failed, is of another pipeline or params, or ran a phase layout the
        calibration never measured (its points would make a phase of their own)."""
        if not record.ok or record.pipeline != pipeline.name:
            return None
        try:
            pipeline.evaluate(**{**pipeline.default_workload, **record.params})
        except (FormulaError, TypeError):
            return None
        if not record.phases or any(phase_key(p) not in self.layouts for p in record.phases):
            return None
        weights = self.basis.phase_weights
        shifted, top = [], (0, record.peak_allocated)
        for p in record.phases:
            held = weights.get(phase_label(p.kind, p.name, p.stage))
            delta = 0 if held is None or p.weights_bytes is None else held - p.weights_bytes
            shifted.append(
                evolve(p, peak_allocated=p.peak_allocated + delta, weights_bytes=held)
                if delta
                else p
            )
            top = max(top, (p.peak_allocated, p.peak_allocated + delta))
        if all(a is b for a, b in zip(shifted, record.phases)):
            return record
        return evolve(record, phases=tuple(shifted), peak_allocated=max(top[1], 0))


class History:
    """The served points, bounded (see the module docstring), oldest first within a shape."""

    def __init__(self, per_shape: int = PER_SHAPE, shapes: int = SHAPES) -> None:
        if per_shape < 1 or shapes < 1:
            raise ValueError("a history keeps at least one point of one shape")
        self.per_shape, self.shapes = per_shape, shapes
        self._by_shape: OrderedDict[PointKey, deque[WarmupRecord]] = OrderedDict()
        self.added = 0  # points added since the last fit

    def add(self, record: WarmupRecord) -> None:
        """One point (already ``Evidence.comparable``)."""
        key = point_key(record.params)
        kept = self._by_shape.pop(key, None) or deque(maxlen=self.per_shape)
        kept.append(record)
        self._by_shape[key] = kept
        while len(self._by_shape) > self.shapes:
            self._by_shape.popitem(last=False)
        self.added += 1

    def extend(self, records: Iterable[WarmupRecord]) -> None:
        for record in records:
            self.add(record)

    def points(self) -> tuple[WarmupRecord, ...]:
        return tuple(r for kept in self._by_shape.values() for r in kept)

    def __len__(self) -> int:
        return sum(len(kept) for kept in self._by_shape.values())


@frozen
class Refitted:
    """A re-fit's outcome: the calibration as a predictor reads it, and each stage's margin."""

    basis: Basis
    margins: tuple[StageMargin, ...]
    points: int  # the served points in it


def refit(evidence: Evidence, points: Sequence[WarmupRecord], pipeline: Pipeline) -> Refitted:
    """The calibration's records plus ``points`` (comparable ones) checked, margined and
    estimated at the calibration's target, as ``calibration.calibrate.settle`` did."""
    kept = [*evidence.records, *points]
    fitted = kept if evidence.first is None else [evidence.first, *kept]
    try:
        checked = check(pipeline, fitted, evidence.target, evidence.backend)
        margins = stage_margins(pipeline, checked, evidence.uncovered, evidence.margin)
        by_evidence = {m.stage: m.margin for m in margins if m.source in EARNED}
        result = estimate(
            kept,
            pipeline,
            target=evidence.target,
            margin=evidence.margin,
            component_weight_bytes=evidence.basis.component_weight_bytes,
            stage_margins=by_evidence,
        )
    except (FormulaError, ValueError, ArithmeticError) as exc:
        raise LearnError(f"the served points could not be fitted: {exc}") from None
    at_risk = (*checked.findings, *checked.quiet)
    result = with_risks(result, at_risk, margins)
    margins = with_margin_risks(margins, at_risk)
    before = [p.label for p in evidence.basis.estimate.phases]
    if [p.label for p in result.phases] != before:
        raise LearnError("the re-fit's phases are not the calibration's")
    basis = evolve(evidence.basis, estimate=result, stage_margins=by_evidence)
    return Refitted(basis, margins, len(points))


def under_measured(
    predictor: RequestPredictor, points: Sequence[WarmupRecord], weights: Mapping[str, int]
) -> list[str]:
    """Each point's phase whose bound (with the weights the calibration measured it with,
    ``weights``) is under its measured peak: a predictor that must not be put in force."""
    out = []
    for record in points:
        prediction = predictor.predict(dict(record.params))
        for p in record.phases:
            label = phase_label(p.kind, p.name, p.stage)
            try:
                got = prediction.phase(label)
            except KeyError:
                continue
            held = weights.get(label, sum(predictor.weights.values()))
            if got.activation_bytes + held < p.peak_allocated:
                out.append(f"{label} at {dict(record.params)}")
    return out


def learned_predictor(
    evidence: Evidence, points: Sequence[WarmupRecord], pipeline: Pipeline
) -> tuple[RequestPredictor, Refitted]:
    """The predictor of ``refit``, checked never to bound a point under its peak."""
    refitted = refit(evidence, points, pipeline)
    try:
        predictor = RequestPredictor.from_basis(refitted.basis, pipeline)
    except CalibrationError as exc:
        raise LearnError(str(exc)) from None
    under = under_measured(predictor, points, refitted.basis.phase_weights)
    if under:
        raise LearnError(f"the re-fit bounds a served point under its peak: {under[0]}")
    return predictor, refitted


class Learner:
    """A worker's learning: each served record a point (when comparable), and at an idle moment
    after a drift or ``every`` new points, the predictor fitted again with them; the points
    written to the state folder whenever a re-fit is put in force."""

    def __init__(
        self,
        evidence: Evidence,
        pipeline: Pipeline,
        state: LearnedStore | None = None,
        every: int = REFIT_EVERY,
        history: History | None = None,
    ) -> None:
        self.evidence, self.pipeline, self.state = evidence, pipeline, state
        self.every, self.history = every, history or History()
        self.urgent = False  # a point above its bound waits to enter the fit
        self.refits = 0

    def served(self, record: WarmupRecord, *, drift: bool = False) -> bool:
        """Take one served record; whether it became a point (a drift's makes the re-fit due)."""
        point = self.evidence.comparable(record, self.pipeline)
        if point is None:
            return False
        self.history.add(point)
        self.urgent = self.urgent or drift
        return True

    def load(self, records: Iterable[WarmupRecord]) -> int:
        """Points stored by a worker before this one (warm start); how many were comparable."""
        before = len(self.history)
        for record in records:
            self.served(record)
        self.urgent = self.urgent or len(self.history) > before
        return len(self.history) - before

    @property
    def due(self) -> bool:
        return self.urgent or self.history.added >= self.every

    def refit(self) -> RequestPredictor | None:
        """The re-fitted predictor when one is due; None when none is, or it was refused (the
        log says why; the points stay for the next try)."""
        if not self.due:
            return None
        points = self.history.points()
        self.urgent, self.history.added = False, 0
        try:
            predictor, refitted = learned_predictor(self.evidence, points, self.pipeline)
        except LearnError as exc:
            log.warning("re-fit with %d served points refused: %s", len(points), exc)
            return None
        self.refits += 1
        log.info("re-fitted with %d served points: %s", refitted.points, _margins(refitted))
        if self.state is not None:
            try:
                self.state.write_learned(points)
            except OSError as exc:
                log.warning("the served points were not written: %s", exc)
        return predictor


class LearnedStore(Protocol):
    """Where the points are kept between starts (``calibration.serve.state.StateFolder``)."""

    def write_learned(self, records: Sequence[WarmupRecord]) -> None: ...


def _margins(refitted: Refitted) -> str:
    return ", ".join(f"{m.stage} x{m.margin:.3g} ({m.source})" for m in refitted.margins)
