"""Memory: per-iteration growth, phase peaks and the request's peak at the target.

The rules, in order of preference, for one phase constraint (and for the request):

1. a measurement at or above the target's ``memory ~`` measure bounds it directly (the smallest
   such measure, the tightest bound); with a measure of several terms, every term at or above;
2. two or more measured sizes: fit ``peak = constant + slope × measure`` on the two largest (the
   constant floored at the active components' weight bytes, or at the fewest weights the records
   held on the device at the phase's peak: ``held_floor``; each size first carried to the weights
   the size nearest the target held: ``as_nearest_held``), extrapolate; the bound pads only the
   linear part by the margin. A negative slope is noise: fall through to 3. With several terms, the
   fit is the plane ``constant + Σ slope_i × term_i`` through the sizes nearest the target that add
   a direction, used only when they determine its value at the target (runtime/estimate/fit/
   exact.py); a term whose negative slope is worth at most 1 % of the plane at the target does not
   grow this phase: it is left out (slope 0) and the others fitted again; a larger one falls through
   to 3;
3. one size: scale what lies above the pre-request baseline (the baseline floored at the active
   components' weight bytes) by the measure ratio (with several terms, the largest term ratio);
   the bound pads the scaled part by the margin.

None when the phase has no measure (outside every stage of the formulas), when nothing was measured,
or when a probe at or below the target failed. A stage whose per-iteration peaks grow with the
iteration index (a KV cache) first has its measured peaks carried on to the target's last iteration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from itertools import pairwise

from attrs import evolve, frozen

from artifact.ir import StageValues
from runtime.estimate.fit.model import Modeler, Refit
from runtime.estimate.fit.noise import memory_slack
from runtime.estimate.level_peaks import Fitted, phase_peak
from runtime.estimate.peak_fit import (
    PeakPlace,
    fit_peak,
    held_floor,
    peak_samples,
    relative_size,
)
from runtime.estimate.points import Workload, ceil_bytes, show_measure, show_terms
from runtime.estimate.results import (
    IterationGrowth,
    LinearFit,
    Measure,
    MeasuredPoint,
    PeakEstimate,
    PhaseEstimate,
    PlaneFit,
)
from runtime.kinds import FitRule, Method, PhaseKind
from runtime.record import Iteration, Phase, WarmupRecord

Terms = tuple[Measure, ...]
PhaseKey = tuple[str, str, str | None, tuple[str, ...], tuple[str, ...]]


# --- per-iteration growth -------------------------------------------------------------------------


def iteration_growth(work: Workload) -> tuple[IterationGrowth, ...]:
    """Stages whose steady per-iteration peaks never fall and still rise in their second half.

    The first iteration is dropped (it allocates what later iterations reuse), and growth needs
    three steady iterations: a multistep scheduler's history (DPM-Solver keeps two model outputs,
    PNDM four) fills in its first steps and then stays, which two steady iterations cannot tell
    from a cache that keeps growing, and a rise confined to the first half is such a history. The
    growth per iteration is the mean over the steady iterations.
    """
    found: list[IterationGrowth] = []
    for index, record, _ in work.ok:
        by_stage: dict[str, list[Iteration]] = {}
        for it in record.iterations:
            by_stage.setdefault(it.stage, []).append(it)
        for stage, iterations in by_stage.items():
            if stage not in work.target_values:
                continue
            steady = sorted(iterations, key=lambda i: i.index)[1:]
            if len(steady) < 3:
                continue
            peaks = [i.peak_allocated for i in steady]
            rises = [i for i in range(1, len(peaks)) if peaks[i] > peaks[i - 1]]
            if any(b < a for a, b in pairwise(peaks)) or not rises or 2 * rises[-1] < len(peaks):
                continue  # never rose, or only in its first half: a history that filled
            per_iteration = Fraction(peaks[-1] - peaks[0], steady[-1].index - steady[0].index)
            last = work.target_iterations(stage) - 1
            if last <= steady[-1].index:
                continue
            extrapolated = ceil_bytes(peaks[-1] + per_iteration * (last - steady[-1].index))
            found.append(
                IterationGrowth(
                    stage, index, per_iteration, steady[-1].index, peaks[-1], last, extrapolated
                )
            )
    return tuple(found)


def _growth_for(growth: Sequence[IterationGrowth], index: int, stage: str | None, peak: int) -> int:
    """Growth bytes a phase of ``stage`` in record ``index`` carries (only if it spans the growing
    iterations).
    """
    return max(
        (
            g.growth_bytes
            for g in growth
            if g.record_index == index and g.stage == stage and peak >= g.measured_last_peak_bytes
        ),
        default=0,
    )


# --- one constraint from its measured points ------------------------------------------------------


def none(
    reason: str, stage: str | None = None, target_measure: Measure | None = None
) -> PeakEstimate:
    return PeakEstimate(Method.NONE, None, None, 1.0, reason, stage, target_measure)


@frozen
class _Where:
    """What every estimate of one constraint shares: its stage and the target's measure."""

    stage: str | None
    target_measure: Measure
    target_terms: Terms

    def estimate(
        self,
        method: str,
        raw: int | None,
        bound: int | None,
        margin: float,
        reason: str,
        points: Sequence[MeasuredPoint] = (),
        fit: LinearFit | PlaneFit | None = None,
    ) -> PeakEstimate:
        return PeakEstimate(
            method,
            raw,
            bound,
            margin,
            reason,
            self.stage,
            self.target_measure,
            tuple(points),
            fit,
            self.target_terms,
        )


def _covers(terms: Terms, target: Terms) -> bool:
    return all(t >= g for t, g in zip(terms, target))


def peak_from_points(
    points: Sequence[MeasuredPoint],
    target: Measure | Terms,
    margin: Fraction,
    floor: int,
    stage: str | None,
    place: PeakPlace | None = None,
) -> PeakEstimate:
    """Rules 1-3 of the module docstring over the measured sizes of one constraint.

    ``target`` is the target's measure, or the tuple of its terms when the measure has several (the
    points' ``terms`` then have as many); rule 2's fit is read from ``place``'s modeler (made once
    per samples whatever the margin), else fitted here.
    """
    target_terms: Terms = tuple(target) if isinstance(target, tuple) else (target,)
    target_measure = sum(target_terms) if isinstance(target, tuple) else target
    if any(len(p.terms) != len(target_terms) for p in points):
        raise ValueError(f"every measured size needs {len(target_terms)} memory terms")
    shown_t = show_terms(target_terms)
    base = _Where(stage, target_measure, target_terms)
    if not points:
        return base.estimate(Method.NONE, None, None, 1.0, "no successful measurement")
    covering = [p for p in points if _covers(p.terms, target_terms)]
    if covering:
        smallest = min(relative_size(p.terms, target_terms) for p in covering)
        best = max(
            (p for p in covering if relative_size(p.terms, target_terms) == smallest),
            key=lambda p: p.adjusted_peak_bytes,
        )
        raw = best.adjusted_peak_bytes
        bound = best.peak_bytes + ceil_bytes(best.growth_bytes * margin)
        reason = f"measured at measure {show_terms(best.terms)} >= target {shown_t}"
        if best.growth_bytes:
            reason += f", plus {best.growth_bytes} B of per-iteration growth"
        margin_used = float(margin) if best.growth_bytes else 1.0
        return base.estimate(Method.MEASUREMENT, raw, bound, margin_used, reason, points)
    if place is None or stage is None:
        fitted = fit_peak(peak_samples(points), target_terms, floor)
    else:
        fitted = place.fit(stage, points, target_terms, floor)
    if isinstance(fitted, str):
        return _scaled(points, target_terms, margin, floor, fitted, base)
    raw, bound = fitted.at(target_terms), fitted.at(target_terms, margin)
    return base.estimate(Method.FIT, raw, bound, float(margin), fitted.reason, points, fitted.fit)


def _scaled(
    points: Sequence[MeasuredPoint],
    target: Terms,
    margin: Fraction,
    floor: int,
    fallback: str,
    base: _Where,
) -> PeakEstimate:
    """Rule 3: scale what lies above the baseline by the measure's ratio (with several terms, the
    largest term ratio: an upper bound of every non-negative combination of the terms)."""
    best: PeakEstimate | None = None
    for p in points:
        if any(g and not t for t, g in zip(p.terms, target)):
            continue
        ratios = [Fraction(g) / Fraction(t) for t, g in zip(p.terms, target) if t]
        ratio = max(ratios, default=Fraction(0))
        floor_p = min(max(p.baseline_bytes, floor), p.adjusted_peak_bytes)
        above = Fraction(p.adjusted_peak_bytes - floor_p) * ratio
        raw, bound = floor_p + ceil_bytes(above), floor_p + ceil_bytes(above * margin)
        if best is None or bound > (best.bound_bytes or 0):
            if len(target) == 1:
                by = f"measure {show_measure(target[0])} / {show_measure(p.terms[0])}"
            else:
                term = ratios.index(ratio) + 1 if ratios else 1
                by = (
                    f"the largest term ratio ({show_measure(ratio)}, term {term}) of "
                    f"{show_terms(target)} / {show_terms(p.terms)}"
                )
            reason = (
                f"scaled {p.adjusted_peak_bytes - floor_p} B above the baseline {floor_p} B by "
                f"{by}{fallback}"
            )
            best = base.estimate(Method.SCALED, raw, bound, float(margin), reason, points)
    if best is None:
        reason = f"measured only where the measure is 0; cannot scale to {show_terms(target)}"
        return base.estimate(Method.NONE, None, None, 1.0, reason)
    return best


# --- phases and the request -----------------------------------------------------------------------


def phase_key(phase: Phase) -> PhaseKey:
    """Which phase of a request a recorded phase is: its kind, name, stage and components."""
    return (
        phase.kind,
        phase.name,
        phase.stage,
        tuple(sorted(phase.active_components)),
        tuple(sorted(phase.used_components)),
    )


def phase_label(kind: str, name: str, stage: str | None) -> str:
    """The one spelling of a record phase's label, the estimates', the plan's and the serving
    worker's (``component:vae@DecodingStage``; a stage's own phase without ``@``)."""
    return (
        f"{kind}:{name}" if kind == PhaseKind.STAGE or stage is None else f"{kind}:{name}@{stage}"
    )


def phase_peaks(
    work: Workload,
    margin: Fraction,
    weights: Mapping[str, int],
    growth: Sequence[IterationGrowth],
    stage_margins: Mapping[str, Fraction] | None = None,
    modeler: Modeler | None = None,
) -> tuple[PhaseEstimate, ...]:
    """One estimate per phase and component layout, in order of first appearance; a stage in
    ``stage_margins`` pads its phases by its own margin; fits read from ``modeler``."""
    groups: dict[PhaseKey, list[tuple[int, WarmupRecord, Mapping[str, StageValues], Phase]]] = {}
    for index, record, values in work.ok:
        for phase in record.phases:
            groups.setdefault(phase_key(phase), []).append((index, record, values, phase))
    layouts: dict[tuple[str, str, str | None], int] = {}
    for kind, name, stage, _, _ in groups:
        layouts[(kind, name, stage)] = layouts.get((kind, name, stage), 0) + 1
    seen: dict[tuple[str, str, str | None], int] = {}
    blocking = work.blocking_reason()
    out: list[PhaseEstimate] = []
    for key, members in groups.items():
        kind, name, stage, active, used = key
        label = phase_label(kind, name, stage)
        if layouts[(kind, name, stage)] > 1:
            seen[(kind, name, stage)] = seen.get((kind, name, stage), 0) + 1
            label += f"#layout{seen[(kind, name, stage)]}"
        if blocking:
            peak = none(blocking, stage)
        elif stage is None or stage not in work.target_values:
            peak = none("outside every stage of the formulas: no memory measure to scale by", stage)
        else:
            points = [
                MeasuredPoint.of(
                    record,
                    phase.peak_allocated,
                    values[stage].memory,
                    work.terms[index][stage],
                    _growth_for(growth, index, stage, phase.peak_allocated),
                )
                for index, record, values, phase in members
            ]
            phases = [p for *_, p in members]
            full = sum(weights.get(c, 0) for c in active)
            padding = (stage_margins or {}).get(stage, margin)
            place = PeakPlace(
                modeler or Refit(),
                tuple(work.target.items()),
                (kind, name),
                active,
                slack=max(memory_slack(r.backend) for _, r, _, _ in members),
            )
            fitted = _fitter(_target(work, stage), padding, full, stage, place)
            peak = phase_peak(points, phases, _target_terms(work, stage), fitted)
        out.append(PhaseEstimate(label, kind, name, stage, active, used, peak))
    return tuple(out)


def _top_phase(record: WarmupRecord) -> Phase | None:
    """The phase holding the request's own peak (None: no phase reached it)."""
    top = max(record.phases, key=lambda p: p.peak_allocated, default=None)
    return None if top is None or top.peak_allocated != record.peak_allocated else top


def _peak_weights(record: WarmupRecord) -> int | None:
    """The weights on the device at the request's own peak: its highest phase's, if measured."""
    top = _top_phase(record)
    return None if top is None else top.weights_bytes


def _fitter(
    target: Measure | Terms, margin: Fraction, full: int, stage: str, place: PeakPlace
) -> Fitted:
    """``peak_from_points`` at one phase's target, its floor the weights each size held (or all
    ``full`` weights of its active components: ``held_floor``), fitted by ``rule``."""

    def fitted(
        carried: list[MeasuredPoint], held: list[int | None], rule: FitRule = FitRule.PEAK
    ) -> PeakEstimate:
        floor, ruled = held_floor(full, held), evolve(place, rule=rule)
        return peak_from_points(carried, target, margin, floor, stage, ruled)

    return fitted


def _target_terms(work: Workload, stage: str) -> Terms:
    target = _target(work, stage)
    return target if isinstance(target, tuple) else (target,)


def _target(work: Workload, stage: str) -> Measure | Terms:
    """The target's memory measure of a stage: a number, or the tuple of its terms when several."""
    terms = work.target_terms[stage]
    return terms if len(terms) > 1 else work.target_values[stage].memory


def _dominant_stage(work: Workload) -> str | None:
    """The stage holding the highest stage peak of the largest successful request."""
    candidates = [(r.peak_allocated, i, r) for i, r, _ in work.ok]
    if not candidates:
        return None
    record = max(candidates, key=lambda c: (c[0], c[1]))[2]
    stages = [
        p for p in record.phases if p.kind == PhaseKind.STAGE and p.stage in work.target_values
    ]
    if not stages:
        return None
    return max(reversed(stages), key=lambda p: p.peak_allocated).stage


def request_peak(
    work: Workload,
    margin: Fraction,
    weights: Mapping[str, int],
    growth: Sequence[IterationGrowth],
    phases: Sequence[PhaseEstimate],
    stage_margins: Mapping[str, Fraction] | None = None,
    modeler: Modeler | None = None,
) -> PeakEstimate:
    """The request's peak: its own measured peaks scaled with the dominant stage (padded by its
    margin, fitted by ``modeler``), and at least every phase.
    """
    blocking = work.blocking_reason()
    if blocking:
        return none(blocking)
    if not work.ok:
        return none("no successful measurement")
    stage = _dominant_stage(work)
    candidates: list[tuple[str, PeakEstimate]] = []
    if stage is not None:
        padding = (stage_margins or {}).get(stage, margin)
        own = _scaled_with(work, stage, padding, weights, growth, modeler or Refit())
        candidates.append((f"the request, scaled with {stage}", own))
    candidates += [(f"phase {p.label}", p.peak) for p in phases if p.peak.ok]
    if not candidates:
        return none("no stage of the formulas was measured")
    by_raw = max(candidates, key=lambda c: c[1].raw_bytes or 0)
    by_bound = max(candidates, key=lambda c: c[1].bound_bytes or 0)
    label, chosen = by_bound
    reason = f"{label}: {chosen.reason}"
    if by_raw[1] is not chosen:
        reason += f"; raw figure from {by_raw[0]}"
    return PeakEstimate(
        chosen.method,
        by_raw[1].raw_bytes,
        chosen.bound_bytes,
        chosen.margin,
        reason,
        chosen.stage,
        chosen.target_measure,
        chosen.points,
        chosen.fit,
        chosen.target_terms,
    )


def _scaled_with(
    work: Workload,
    stage: str,
    margin: Fraction,
    weights: Mapping[str, int],
    growth: Sequence[IterationGrowth],
    modeler: Modeler,
) -> PeakEstimate:
    """The request's own measured peaks carried to the target along ``stage``'s memory."""
    points = [
        MeasuredPoint.of(
            record,
            record.peak_allocated,
            values[stage].memory,
            work.terms[index][stage],
            max(
                (_growth_for(growth, index, g.stage, record.peak_allocated) for g in growth),
                default=0,
            ),
        )
        for index, record, values in work.ok
    ]
    active = {c for _, r, _ in work.ok for p in r.phases for c in p.active_components}
    full = sum(weights.get(c, 0) for c in active)
    slack = max(memory_slack(r.backend) for _, r, _ in work.ok)
    place = PeakPlace(modeler, tuple(work.target.items()), slack=slack)
    fitted = _fitter(_target(work, stage), margin, full, stage, place)
    tops = [t for t in map(_top_phase, (r for _, r, _ in work.ok)) if t is not None]
    if len(tops) == len(points):  # as the phases: per weights level, or on the nearest's weights
        return phase_peak(points, tops, _target_terms(work, stage), fitted)
    return fitted(points, [_peak_weights(r) for _, r, _ in work.ok])
