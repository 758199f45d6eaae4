"""Memory: per-iteration growth, phase peaks and the request's peak at the target.

The rules, in order of preference, for one phase constraint (and for the request):

1. a measurement at or above the target's ``memory ~`` measure bounds it directly (the smallest
   such measure, the tightest bound);
2. two or more measured sizes: fit ``peak = constant + slope × measure`` on the two largest (the
   constant floored at the active components' weight bytes), extrapolate; the bound pads only the
   linear part by the margin. A negative slope is noise: fall through to 3;
3. one size: scale what lies above the pre-request baseline (the baseline floored at the active
   components' weight bytes) by the measure ratio; the bound pads the scaled part by the margin.

None when the phase has no measure (outside every stage of the formulas), when nothing was measured,
or when a probe at or below the target failed. A stage whose per-iteration peaks grow with the
iteration index (a KV cache) first has its measured peaks carried on to the target's last iteration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from itertools import pairwise
from typing import Any

from runtime.estimate.points import Workload, ceil_bytes, fit_line, show_measure
from runtime.estimate.results import (
    IterationGrowth,
    LinearFit,
    MeasuredPoint,
    PeakEstimate,
    PhaseEstimate,
)
from runtime.record import Iteration, Phase, WarmupRecord

PhaseKey = tuple[str, str, str | None, tuple[str, ...], tuple[str, ...]]


# --- per-iteration growth ---------------------------------------------------------------------------


def iteration_growth(work: Workload) -> tuple[IterationGrowth, ...]:
    """Stages whose steady per-iteration peaks never fall and end higher than they start.

    The first iteration is dropped (it allocates what later iterations reuse), so at least three
    iterations are needed. The growth per iteration is the mean over the steady iterations.
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
            if len(steady) < 2:
                continue
            peaks = [i.peak_allocated for i in steady]
            if any(b < a for a, b in pairwise(peaks)) or peaks[-1] <= peaks[0]:
                continue
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
    """Growth bytes a phase of ``stage`` in record ``index`` carries (only if it spans the growing iterations)."""
    return max(
        (
            g.growth_bytes
            for g in growth
            if g.record_index == index and g.stage == stage and peak >= g.measured_last_peak_bytes
        ),
        default=0,
    )


# --- one constraint from its measured points --------------------------------------------------------


def none(reason: str, stage: str | None = None, target_measure: Any = None) -> PeakEstimate:
    return PeakEstimate("none", None, None, 1.0, reason, stage, target_measure)


def peak_from_points(
    points: Sequence[MeasuredPoint], target: Any, margin: Fraction, floor: int, stage: str | None
) -> PeakEstimate:
    """Rules 1-3 of the module docstring over the measured sizes of one constraint."""
    if not points:
        return none("no successful measurement", stage, target)
    show_t = show_measure(target)
    covering = [p for p in points if p.measure >= target]
    if covering:
        smallest = min(p.measure for p in covering)
        best = max(
            (p for p in covering if p.measure == smallest), key=lambda p: p.adjusted_peak_bytes
        )
        raw = best.adjusted_peak_bytes
        bound = best.peak_bytes + ceil_bytes(best.growth_bytes * margin)
        reason = f"measured at measure {show_measure(smallest)} >= target {show_t}"
        if best.growth_bytes:
            reason += f", plus {best.growth_bytes} B of per-iteration growth"
        return PeakEstimate(
            "measurement",
            raw,
            bound,
            float(margin) if best.growth_bytes else 1.0,
            reason,
            stage,
            target,
            tuple(points),
        )
    largest: dict[Any, MeasuredPoint] = {}
    for p in points:
        if (
            p.measure not in largest
            or p.adjusted_peak_bytes > largest[p.measure].adjusted_peak_bytes
        ):
            largest[p.measure] = p
    fallback = ""
    if len(largest) >= 2:
        small, large = (largest[m] for m in sorted(largest)[-2:])
        line = fit_line(
            (small.measure, small.adjusted_peak_bytes), (large.measure, large.adjusted_peak_bytes)
        )
        if line.slope >= 0:
            constant = max(line.constant, Fraction(min(floor, large.adjusted_peak_bytes)))
            line = LinearFit(constant, line.slope, line.measures)
            reason = (
                f"fit on measures {show_measure(small.measure)} and {show_measure(large.measure)}: "
                f"{float(constant):.0f} B + {float(line.slope):.6g} B x measure, at target {show_t}"
            )
            return PeakEstimate(
                "fit",
                ceil_bytes(line.at(target)),
                ceil_bytes(line.at(target, margin)),
                float(margin),
                reason,
                stage,
                target,
                tuple(points),
                line,
            )
        fallback = (
            f"; the fit on measures {show_measure(small.measure)} and {show_measure(large.measure)} "
            "has a negative slope (noise)"
        )
    best_estimate: PeakEstimate | None = None
    for p in points:
        if p.measure == 0:
            continue
        base = min(max(p.baseline_bytes, floor), p.adjusted_peak_bytes)
        above = Fraction(p.adjusted_peak_bytes - base) * Fraction(target) / Fraction(p.measure)
        raw, bound = base + ceil_bytes(above), base + ceil_bytes(above * margin)
        if best_estimate is None or bound > (best_estimate.bound_bytes or 0):
            reason = (
                f"scaled {p.adjusted_peak_bytes - base} B above the baseline {base} B by measure "
                f"{show_t} / {show_measure(p.measure)}{fallback}"
            )
            best_estimate = PeakEstimate(
                "scaled", raw, bound, float(margin), reason, stage, target, tuple(points)
            )
    if best_estimate is None:
        return none(
            f"measured only where the measure is 0; cannot scale to {show_t}", stage, target
        )
    return best_estimate


# --- phases and the request ---------------------------------------------------------------------------


def _key(phase: Phase) -> PhaseKey:
    return (
        phase.kind,
        phase.name,
        phase.stage,
        tuple(sorted(phase.active_components)),
        tuple(sorted(phase.used_components)),
    )


def _label(kind: str, name: str, stage: str | None) -> str:
    return f"{kind}:{name}" if kind == "stage" or stage is None else f"{kind}:{name}@{stage}"


def phase_peaks(
    work: Workload, margin: Fraction, weights: Mapping[str, int], growth: Sequence[IterationGrowth]
) -> tuple[PhaseEstimate, ...]:
    """One estimate per phase and component layout, in order of first appearance."""
    groups: dict[PhaseKey, list[tuple[int, WarmupRecord, Mapping[str, Any], Phase]]] = {}
    for index, record, values in work.ok:
        for phase in record.phases:
            groups.setdefault(_key(phase), []).append((index, record, values, phase))
    layouts: dict[tuple[str, str, str | None], int] = {}
    for kind, name, stage, _, _ in groups:
        layouts[(kind, name, stage)] = layouts.get((kind, name, stage), 0) + 1
    seen: dict[tuple[str, str, str | None], int] = {}
    blocking = work.blocking_reason()
    out: list[PhaseEstimate] = []
    for key, members in groups.items():
        kind, name, stage, active, used = key
        label = _label(kind, name, stage)
        if layouts[(kind, name, stage)] > 1:
            seen[(kind, name, stage)] = seen.get((kind, name, stage), 0) + 1
            label += f"#layout{seen[(kind, name, stage)]}"
        if blocking:
            peak = none(blocking, stage)
        elif stage is None or stage not in work.target_values:
            peak = none("outside every stage of the formulas: no memory measure to scale by", stage)
        else:
            points = [
                MeasuredPoint(
                    values[stage].memory,
                    phase.peak_allocated,
                    record.baseline_allocated,
                    _growth_for(growth, index, stage, phase.peak_allocated),
                )
                for index, record, values, phase in members
            ]
            floor = sum(weights.get(c, 0) for c in active)
            peak = peak_from_points(points, work.target_values[stage].memory, margin, floor, stage)
        out.append(PhaseEstimate(label, kind, name, stage, active, used, peak))
    return tuple(out)


def _dominant_stage(work: Workload) -> str | None:
    """The stage holding the highest stage peak of the largest successful request."""
    candidates = [(r.peak_allocated, i, r) for i, r, _ in work.ok]
    if not candidates:
        return None
    record = max(candidates, key=lambda c: (c[0], c[1]))[2]
    stages = [p for p in record.phases if p.kind == "stage" and p.stage in work.target_values]
    if not stages:
        return None
    return max(reversed(stages), key=lambda p: p.peak_allocated).stage


def request_peak(
    work: Workload,
    margin: Fraction,
    weights: Mapping[str, int],
    growth: Sequence[IterationGrowth],
    phases: Sequence[PhaseEstimate],
) -> PeakEstimate:
    """The request's peak: its own measured peaks scaled with the dominant stage, and at least every phase."""
    blocking = work.blocking_reason()
    if blocking:
        return none(blocking)
    if not work.ok:
        return none("no successful measurement")
    stage = _dominant_stage(work)
    candidates: list[tuple[str, PeakEstimate]] = []
    if stage is not None:
        points = [
            MeasuredPoint(
                values[stage].memory,
                record.peak_allocated,
                record.baseline_allocated,
                max(
                    (_growth_for(growth, index, g.stage, record.peak_allocated) for g in growth),
                    default=0,
                ),
            )
            for index, record, values in work.ok
        ]
        active = {c for _, r, _ in work.ok for p in r.phases for c in p.active_components}
        own = peak_from_points(
            points,
            work.target_values[stage].memory,
            margin,
            sum(weights.get(c, 0) for c in active),
            stage,
        )
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
    )
