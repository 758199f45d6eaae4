"""Every phase's peak, its bound and the request's time, for any admissible request, under a
placement: what a serving worker asks before it runs a request (docs/admission.md).

Built once from a calibration (in memory, or a ``--save``d document with its ``--records``) and
the loaded ``runtime.Pipeline``: each phase's model (``phase_model``), the weights the calibration
measured it with, its active components as the planner sees them, and each stage's time. A
prediction is then the formulas evaluated at the request and a few sums. No torch, lark or sympy.
"""

from __future__ import annotations

import functools
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
from calibration.serve.phase_model import Peak, PhaseModel, Terms, phase_model
from calibration.serve.shape import ShapeTargets
from calibration.serve.timing import StageClock, stage_clock
from runtime import Pipeline
from runtime.estimate import PeakEstimate
from runtime.estimate.points import margin_fraction
from runtime.flat import Slots
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


#: A ``PhasePrediction`` from its seven values, made in C (a named tuple's ``__new__`` is Python).
_new_phase = functools.partial(tuple.__new__, PhasePrediction)

#: How many placements' weights a predictor remembers (the one in force, and a few re-placements).
HELD_CACHE = 8
#: How many requests' points a predictor remembers the activations of (serving repeats shapes).
POINTS_KEPT = 1024

#: A request's params bound: every param's value in declaration order (``Pipeline.point``).
_Point = tuple[int | bool, ...]
#: Every distinct phase model's peak at a point, and the time before transfer (None: unknown).
_Peaks = tuple[tuple[Peak, ...], float | None]
#: Every phase at a point under a placement, and the request's time (None: unknown).
_Placed = tuple[tuple[PhasePrediction, ...], float | None]


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
    # placement -> each phase's weights and the exposed transfer (``_held``): a cache
    held_cache: dict[int, tuple[Plan | None, tuple[int, ...], float]] = field(
        factory=dict, eq=False, hash=False, repr=False
    )
    # where each distinct model's terms lie in ``Pipeline.measures`` (its stage's memory terms
    # when it lists several, else its memory), and each clock's time and iterations
    term_slices: tuple[slice, ...] = field(default=(), eq=False, repr=False)
    # each phase flat: label, stage, model index, weights calibrated with, risk at the target
    rows: tuple[tuple[str, str, int, int, int], ...] = field(default=(), eq=False, repr=False)
    # each clock flat: its fixed time, time per iteration, target measure, and where its stage's
    # time measure and iterations lie in ``Pipeline.measures``
    clock_slots: tuple[tuple[float, float, float, int, int], ...] = field(
        default=(), eq=False, repr=False
    )
    # a request's point -> its phase models' peaks and time but the transfer (``_peaks``),
    # and (point, weights held, transfer) -> its phases and time (``_placed``): bounded caches
    at_point: functools._lru_cache_wrapper[_Peaks] = field(
        init=False, eq=False, hash=False, repr=False
    )
    placed: functools._lru_cache_wrapper[_Placed] = field(
        init=False, eq=False, hash=False, repr=False
    )

    def __attrs_post_init__(self) -> None:
        kept = functools.lru_cache(maxsize=POINTS_KEPT)
        object.__setattr__(self, "at_point", kept(self._peaks))
        object.__setattr__(self, "placed", kept(self._placed))

    def forget(self) -> None:
        """Drop the figures kept by point: the next prediction of each request computes them."""
        self.at_point.cache_clear()
        self.placed.cache_clear()

    @classmethod
    def from_basis(cls, basis: Basis, pipeline: Pipeline) -> RequestPredictor:
        """Everything a prediction needs, computed now; a phase without an estimate (nothing
        measured it) is a ``CalibrationError``: no request could be admitted by it."""
        if basis.estimate.pipeline != pipeline.name:
            raise CalibrationError(
                f"the calibration is of pipeline {basis.estimate.pipeline!r}, the formulas "
                f"loaded are {pipeline.name!r}"
            )
        components = components_from_bytes(
            basis.component_weight_bytes, basis.layer_bytes, basis.group_bytes
        )
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
        models = _distinct(phases)
        clocks = tuple(stage_clock(s) for s in timing.stages)
        slots = _slots(pipeline, {m.stage for m in models} | {c.stage for c in clocks})
        return cls(
            pipeline,
            components,
            phases,
            models,
            clocks,
            None if timing.seconds is None else timing.untracked_s,
            frozenset(s for s, slot in slots.items() if slot.listed > 1),
            {c.name: c.weight_bytes for c in components},
            ShapeTargets.of(target, components, basis.estimate.layer_uses),
            term_slices=tuple(_terms_at(slots[m.stage]) for m in models),
            rows=tuple(
                (p.model.label, p.model.stage, p.model_index, p.calibrated_weights, p.risk_bytes)
                for p in phases
            ),
            clock_slots=tuple(
                (c.fixed_s, c.per_iteration_s, c.target_measure, slot.time, slot.iterations)
                for c in clocks
                for slot in (slots[c.stage],)
            ),
        )

    def predict(self, params: Point, placement: Plan | None = None) -> RequestPrediction:
        """Every phase under ``placement`` (None: every component resident) at ``params`` (the
        pipeline's defaults for the rest); an unknown name, a value out of range or a broken
        contract raises the runtime's ``FormulaError`` (``InadmissibleError``, ...)."""
        held, transfer = self._held(placement)
        phases, seconds = self.placed(self.pipeline.point(params), held, transfer)
        return RequestPrediction(MappingProxyType(dict(params)), phases, seconds, transfer)

    def _placed(self, point: _Point, held: tuple[int, ...], transfer: float) -> _Placed:
        """Every phase at a request's point with the weights ``held`` in each, and its time with
        ``transfer`` exposed."""
        peaks, before = self.at_point(point)
        phases = []
        for (label, stage, index, weights, risk), w in zip(self.rows, held):
            method, raw, bound = peaks[index]
            raw -= weights
            bound += risk - weights
            # `if`, not max(): a builtin call per figure was a third of this loop (bench/README)
            if raw < 0:  # noqa: PLR1730
                raw = 0
            if bound < 0:  # noqa: PLR1730
                bound = 0
            phases.append(_new_phase((label, stage, method, raw + w, bound + w, bound, w)))
        return tuple(phases), None if before is None else before + transfer

    def _peaks(self, point: _Point) -> _Peaks:
        """Each distinct phase model's peak at a request's point, and the request's time but the
        transfer (None: no time): what no placement changes, kept by point."""
        values = self.pipeline.measures(point)
        peaks = tuple([m.at(values[terms]) for m, terms in zip(self.models, self.term_slices)])
        if self.untracked_s is None:
            return peaks, None
        compute: float = 0  # ``StageClock.at`` of each, inline and in its order: the same floats
        for fixed, per, measure, t, i in self.clock_slots:
            if measure:
                per *= float(values[t]) / measure
            compute += fixed + per * values[i]  # iterations: an int (``plain``)
        return peaks, compute + self.untracked_s

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

    def _held(self, placement: Plan | None) -> tuple[tuple[int, ...], float]:
        """Each phase's weights on the device under ``placement`` and the transfer it exposes,
        remembered for the last few placements (a worker asks under the one in force, request
        after request)."""
        key = id(placement)
        found = self.held_cache.get(key)
        if found is not None and found[0] is placement:
            return found[1], found[2]
        always, onload = _residency(placement, self.weights)
        held = tuple(always + sum(onload.get(n, 0) for n in p.members) for p in self.phases)
        if len(self.held_cache) >= HELD_CACHE:
            self.held_cache.pop(next(iter(self.held_cache)))
        transfer = _exposed(placement)
        self.held_cache[key] = (placement, held, transfer)
        return held, transfer


def from_calibration(cal: CalibrationSource, pipeline: Pipeline) -> RequestPredictor:
    """The predictor of a calibration in memory (``calibration.calibrate.run.Calibration``)."""
    return RequestPredictor.from_basis(Basis.of(cal), pipeline)


def _slots(pipeline: Pipeline, stages: set[str]) -> Mapping[str, Slots]:
    """Where the formulas' measures of ``stages`` lie; a stage they lack is a ``CalibrationError``
    (the calibration is of other formulas)."""
    slots = pipeline.measure_slots
    unknown = sorted(stages - set(slots))
    if unknown:
        raise CalibrationError(
            f"the calibration names stages {unknown} the formulas of {pipeline.name!r} lack"
        )
    return slots


def _terms_at(slot: Slots) -> slice:
    """Where a phase model's terms lie in ``Pipeline.measures``: its stage's memory terms when
    the formulas list several, else its memory alone."""
    return slot.terms if slot.listed > 1 else slice(slot.memory, slot.memory + 1)


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
