"""Every phase's peak, its bound and the request's time, for any admissible request, under a
placement: what a serving worker asks before it runs a request (docs/admission.md).

Built once from a calibration (in memory, or a ``--save``d document with its ``--records``) and
the loaded ``runtime.Pipeline``: each phase's model (``phase_model``), the weights the calibration
measured it with, its active components as the planner sees them, and each stage's time. A
prediction is then the formulas evaluated at the request and a few sums. No torch, lark or sympy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from types import MappingProxyType
from typing import NamedTuple

from attrs import field, frozen

from artifact.point import Point
from calibration.errors import CalibrationError
from calibration.plan.inputs import components_from_bytes, from_estimate
from calibration.plan.model import Component, Phase, Plan, Target
from calibration.serve.basis import Basis, CalibrationSource
from calibration.serve.phase_model import PhaseModel, Terms, phase_model
from calibration.serve.shape import ShapeTargets
from calibration.serve.timing import StageClock, stage_clock
from runtime import Pipeline
from runtime.estimate import PeakEstimate
from runtime.estimate.points import margin_fraction
from runtime.estimate.results import Measure
from runtime.kinds import Method


class PhasePrediction(NamedTuple):
    """One phase of a request under a placement: its peak and bound with the weights the
    placement keeps on the device then, and its activations alone (the planner's bound). A named
    tuple: a prediction makes one per phase, and a tuple is made in a fraction of the time."""

    label: str
    stage: str
    method: Method  # which of the estimator's rules gave it
    peak_bytes: int  # raw activations + ``weights_bytes``
    bound_bytes: int  # the activations' bound + ``weights_bytes``: what admission compares
    activation_bytes: int  # the bound without weights (``calibration.plan.model.Phase``'s)
    weights_bytes: int  # what the placement keeps on the device in this phase


@frozen
class RequestPrediction:
    """A request's prediction: every phase, and its time (compute plus exposed transfer)."""

    params: Point = field(hash=False)
    phases: tuple[PhasePrediction, ...]
    seconds: float | None  # None: the calibration has no time for some stage
    transfer_s: float  # the placement's transfer that no overlap hides

    @property
    def bound_bytes(self) -> int:
        """The largest phase bound: the request's."""
        return max((p.bound_bytes for p in self.phases), default=0)

    @property
    def peak_bytes(self) -> int:
        """The largest phase peak."""
        return max((p.peak_bytes for p in self.phases), default=0)

    def phase(self, label: str) -> PhasePrediction:
        """One phase by label."""
        for p in self.phases:
            if p.label == label:
                return p
        raise KeyError(label)

    def fits(self, usable_bytes: int) -> bool:
        """Whether every phase's bound fits ``usable_bytes`` (capacity minus the reserve)."""
        return all(p.bound_bytes <= usable_bytes for p in self.phases)


#: How many placements' weights a predictor remembers (the one in force, and a few re-placements).
HELD_CACHE = 8


@frozen
class _Phase:
    """A phase's precomputed parts: its model, the weights calibrated with, its members."""

    model: PhaseModel
    model_index: int  # in ``RequestPredictor.models``: phases with equal rules share one
    calibrated_weights: int
    members: tuple[str, ...]  # in the planner's order
    # what the calibration's bound holds beyond the rules: a memory finding's risk at its target,
    # added to the phase's bound at every request, as the estimator adds it
    risk_bytes: int = 0


def _frozen(value: Mapping[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(value))


@frozen
class RequestPredictor:
    """Predictions for any admissible request of one calibrated pipeline (build with
    ``from_calibration`` or ``basis.from_document``'s basis through ``from_basis``)."""

    pipeline: Pipeline = field(eq=False, repr=False)
    components: tuple[Component, ...]
    phases: tuple[_Phase, ...] = field(repr=False)
    models: tuple[PhaseModel, ...] = field(repr=False)  # each distinct phase model once
    clocks: tuple[StageClock, ...] = field(repr=False)
    untracked_s: float | None  # time outside stages; None: the calibration has no time
    multi_term: frozenset[str] = field(repr=False)  # stages whose memory has several terms
    weights: Mapping[str, int] = field(converter=_frozen, hash=False, repr=False)
    shapes: ShapeTargets = field(repr=False)
    # placement -> each phase's weights (``_held``): a cache, outside equality
    held_cache: dict[int, tuple[Plan | None, tuple[int, ...]]] = field(
        factory=dict, eq=False, hash=False, repr=False
    )

    @classmethod
    def from_basis(cls, basis: Basis, pipeline: Pipeline) -> RequestPredictor:
        """Everything a prediction needs, computed now; a phase without an estimate (nothing
        measured it) is a ``CalibrationError``: no request could be admitted by it."""
        if basis.estimate.pipeline != pipeline.name:
            raise CalibrationError(
                f"the calibration is of pipeline {basis.estimate.pipeline!r}, the formulas "
                f"loaded are {pipeline.name!r}"
            )
        components = components_from_bytes(basis.component_weight_bytes, basis.layer_bytes)
        try:
            target = from_estimate(
                basis.estimate,
                components,
                phase_weights=basis.phase_weights,
                unobserved=basis.unobserved,
            )
            phases = tuple(_phases(basis, target.phases))
        except ValueError as exc:
            raise CalibrationError(f"cannot predict from this calibration: {exc}") from None
        timing = basis.estimate.timing
        return cls(
            pipeline,
            components,
            phases,
            _distinct(phases),
            tuple(stage_clock(s) for s in timing.stages),
            None if timing.seconds is None else timing.untracked_s,
            frozenset(s for s in pipeline.stages if len(_terms(pipeline, s)) > 1),
            {c.name: c.weight_bytes for c in components},
            ShapeTargets.of(target, components, basis.estimate.layer_uses),
        )

    def predict(self, params: Point, placement: Plan | None = None) -> RequestPrediction:
        """Every phase under ``placement`` (None: every component resident) at ``params`` (the
        pipeline's defaults for the rest); an unknown name, a value out of range or a broken
        contract raises the runtime's ``FormulaError`` (``InadmissibleError``, ...)."""
        values = self.pipeline.evaluate(**params)
        terms: dict[str, tuple[Measure, ...]] = {s: (v.memory,) for s, v in values.items()}
        for stage in self.multi_term:
            terms[stage] = self.pipeline.memory_terms(stage, **params)
        held = self._held(placement)
        peaks = [m.at(terms[m.stage]) for m in self.models]
        out = []
        for p, weights in zip(self.phases, held):
            method, raw, bound = peaks[p.model_index]
            raw = max(0, raw - p.calibrated_weights)
            bound = max(0, bound + p.risk_bytes - p.calibrated_weights)
            out.append(
                PhasePrediction(
                    p.model.label,
                    p.model.stage,
                    method,
                    raw + weights,
                    bound + weights,
                    bound,
                    weights,
                )
            )
        transfer = _exposed(placement)
        seconds = None
        if self.untracked_s is not None:
            compute = sum(c.seconds(values[c.stage]) for c in self.clocks)
            seconds = compute + self.untracked_s + transfer
        return RequestPrediction(MappingProxyType(dict(params)), tuple(out), seconds, transfer)

    def target(self, params: Point) -> Target:
        """The request as the planner's ``Target``: each phase's activation bound at ``params``,
        its members, onloads and layer calls (for a plan of this request alone)."""
        prediction = self.predict(params)
        phases = [
            Phase(p.label, p.activation_bytes, q.members)
            for p, q in zip(prediction.phases, self.phases)
        ]
        values = self.pipeline.evaluate(**params)
        return self.shapes.target(params, phases, values, prediction.seconds)

    def _held(self, placement: Plan | None) -> tuple[int, ...]:
        """Each phase's weights on the device under ``placement``, remembered for the last few
        placements (a worker asks under the one in force, request after request)."""
        key = id(placement)
        found = self.held_cache.get(key)
        if found is not None and found[0] is placement:
            return found[1]
        always, onload = _residency(placement, self.weights)
        held = tuple(always + sum(onload.get(n, 0) for n in p.members) for p in self.phases)
        if len(self.held_cache) >= HELD_CACHE:
            self.held_cache.pop(next(iter(self.held_cache)))
        self.held_cache[key] = (placement, held)
        return held


def from_calibration(cal: CalibrationSource, pipeline: Pipeline) -> RequestPredictor:
    """The predictor of a calibration in memory (``calibration.calibrate.run.Calibration``)."""
    return RequestPredictor.from_basis(Basis.of(cal), pipeline)


def _terms(pipeline: Pipeline, stage: str) -> tuple[object, ...]:
    return pipeline.memory_terms(stage)


def _phases(basis: Basis, planned: Sequence[Phase]) -> list[_Phase]:
    """Each phase's model, with the weights its peak held and its members as the planner sees
    them (the components no phase saw are members of every phase)."""
    everything = sum(basis.component_weight_bytes.values())
    margins = {s: margin_fraction(m) for s, m in basis.stage_margins.items()}
    default = margin_fraction(basis.estimate.margin)
    seen: dict[tuple[object, ...], int] = {}
    out = []
    for estimate, phase in zip(basis.estimate.phases, planned):
        floor = sum(basis.component_weight_bytes.get(c, 0) for c in estimate.active_components)
        margin: Fraction = margins.get(estimate.stage or "", default)
        model = phase_model(estimate.label, estimate.peak, margin, floor)
        index = seen.setdefault(model.rules, len(seen))
        weights = basis.phase_weights.get(estimate.label, everything)
        risk = _risk(model, estimate.peak)
        out.append(_Phase(model, index, weights, tuple(phase.active_components), risk))
    return out


def _risk(model: PhaseModel, peak: PeakEstimate) -> int:
    """What the calibration's bound adds at its target beyond the estimator's rules: the risk of
    a memory finding (``calibration.probes.evidence.with_risks``), which the plan's bound holds
    and so the prediction must too."""
    terms: Terms = peak.target_terms or (
        () if peak.target_measure is None else (peak.target_measure,)
    )
    if not terms or peak.bound_bytes is None:
        return 0
    return max(0, peak.bound_bytes - model.at(terms).bound_bytes)


def _distinct(phases: Sequence[_Phase]) -> tuple[PhaseModel, ...]:
    """The first phase's model of each ``model_index``, in index order."""
    first: dict[int, PhaseModel] = {}
    for p in phases:
        first.setdefault(p.model_index, p.model)
    return tuple(first[k] for k in range(len(first)))


def _residency(plan: Plan | None, weights: Mapping[str, int]) -> tuple[int, dict[str, int]]:
    """What ``plan`` keeps on the device always, and what each component adds while active."""
    if plan is None:
        return sum(weights.values()), {}
    placed = {p.component: p for p in plan.placements}
    always = sum(p.device_bytes for p in placed.values())
    always += sum(w for name, w in weights.items() if name not in placed)  # unplanned: resident
    return always, {name: p.onload_bytes for name, p in placed.items() if p.onload_bytes}


def _exposed(plan: Plan | None) -> float:
    """The placement's transfer a request waits for (its plan's first target's)."""
    if plan is None or not plan.feasible:
        return 0.0
    if plan.times:
        return plan.times[0].exposed_s
    return plan.transfer_s
