"""A phase's peak at the target from its sizes' peaks under offload, where the weights on the device
change within the phase: per weights level (``peak_fit.by_level``), else each size carried to the
weights the size nearest the target held (``peak_fit.held_alike``). The fit itself is the caller's
(``peaks.peak_from_points`` through a closure), so this module never imports ``peaks``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from attrs import evolve

from runtime.estimate.peak_fit import by_level, held_alike, relative_size
from runtime.estimate.points import show_terms
from runtime.estimate.results import Measure, MeasuredPoint, PeakEstimate
from runtime.kinds import FitRule, Method
from runtime.record import Phase

Terms = tuple[Measure, ...]


class Fitted(Protocol):
    """A phase's fit at the target of sizes carried to some peaks, given the weights each held."""

    def __call__(
        self, carried: list[MeasuredPoint], held: list[int | None], rule: FitRule = ...
    ) -> PeakEstimate: ...


def phase_peak(
    points: Sequence[MeasuredPoint],
    phases: Sequence[Phase],
    target: Terms,
    fitted: Fitted,
) -> PeakEstimate:
    """A phase's peak at the target from ``points`` (one a phase of ``phases``), ``fitted`` given
    the weights each size held: where the records hold the activations' peak per weights level
    (``by_level``), the highest level's estimate (its bound the highest of theirs); else each size
    carried to the nearest size's weights."""
    series = by_level(phases, [p.terms for p in points], target)
    if not series:
        return fitted(as_nearest_held(points, phases, target), [p.weights_bytes for p in phases])
    estimates = [_level_peak(points, phases, w, s, fitted) for w, s in series]
    if any(not e.ok for e in estimates):
        return next(e for e in estimates if not e.ok)
    top = max(range(len(series)), key=lambda i: (estimates[i].raw_bytes or 0, i))
    bounding = max(range(len(series)), key=lambda i: (estimates[i].bound_bytes or 0, i))
    weights, levels = series[top][0], len(series)
    reason = (
        f"with {weights} B of weights on the device (the highest of {levels} levels at the "
        f"target): {estimates[top].reason}"
    )
    if estimates[bounding].bound_bytes != estimates[top].bound_bytes:
        reason += f"; the bound with {series[bounding][0]} B: {estimates[bounding].reason}"
    bound = estimates[bounding]
    return evolve(
        estimates[top], bound_bytes=bound.bound_bytes, reason=reason, lift_bytes=bound.lift_bytes
    )


def _level_peak(
    points: Sequence[MeasuredPoint],
    phases: Sequence[Phase],
    weights: int,
    peaks: Sequence[int],
    fitted: Fitted,
) -> PeakEstimate:
    """One weights level's peak at the target; where its own sizes give no fit (a level's
    activations need not follow the formula's terms: the phase's peak does), the fit through the
    nearest sizes with the terms of a negative slope left out, where every size of the level lies
    at or under it (``FitRule.LEVEL``); else the activations' own peak (at least the level's at
    every size) fitted on those weights, if lower. Its bound covers the level bending past the
    sizes (``_covered``)."""
    own_points = _carried(points, phases, peaks)
    highest = [weights + _activations(p) for p in phases]
    alike_points = _carried(points, phases, highest)
    alike = fitted(alike_points, [weights] * len(peaks))
    own = fitted(own_points, [weights] * len(peaks))
    if own.method == Method.SCALED:
        near = fitted(own_points, [weights] * len(peaks), FitRule.LEVEL)
        if near.method == Method.FIT:
            own = near
        elif alike.ok and (alike.raw_bytes or 0) < (own.raw_bytes or 0):
            return alike
    return _covered(own, own_points, alike_points, alike)


def _covered(
    level: PeakEstimate,
    own: Sequence[MeasuredPoint],
    activations: Sequence[MeasuredPoint],
    alike: PeakEstimate,
) -> PeakEstimate:
    """``level``'s bound at least the bound of the activations' own peak (``alike``, on the
    level's weights: the formula vouches for that series, not for a level's) less the gap between
    the two at the size nearest the target, never above it. A level is one part of the phase: its
    peak may move to another op past the largest size (the tiny FLUX's transformer under
    ``transformer_blocks.0``: 1,816 B a token over 16-36 tokens, 2,330 past them) while the
    phase's own peak follows the formula; the level then grows faster than its fit, never past
    the phase's activations (``a_l <= A`` at every size). Only ``a_l(T) <= A(T)`` holds for any
    ops (an op under the level's peak at every size measured may overtake it and reach ``A``);
    the gap at the nearest size is assumed not to shrink (the level's peak falls no further
    behind the phase's than measured), which the records can check and a bound of ``A`` itself on
    every level (the largest weights plus the phase's activations) would not be tight enough to
    plan with. The raw figure stays the level's own fit."""
    if level.method == Method.MEASUREMENT or not alike.ok or level.bound_bytes is None:
        return level
    target = alike.target_terms
    nearest = max(relative_size(p.terms, target) for p in own)
    pairs = [(o, a) for o, a in zip(own, activations) if relative_size(o.terms, target) == nearest]
    gap = max(0, min(a.adjusted_peak_bytes - o.adjusted_peak_bytes for o, a in pairs))
    ceiling = alike.bound_bytes or 0
    cover = ceiling - gap
    if cover <= level.bound_bytes:
        return level
    reason = (
        f"{level.reason}; bound {cover} B: the activations' own peak bound on these weights, "
        f"{ceiling} B, less the {gap} B the level lay under it at {show_terms(pairs[0][0].terms)} "
        "(past the sizes a level's peak may move to another op; it never passes the phase's)"
    )
    return evolve(level, bound_bytes=cover, reason=reason, lift_bytes=cover - level.bound_bytes)


def _activations(phase: Phase) -> int:
    """The activations' own peak over the phase: at least every level's (a record may lack it)."""
    levels = (a for _, a in phase.weight_levels or ())
    return max((phase.activations_bytes or 0, *levels))


def as_nearest_held(
    points: Sequence[MeasuredPoint], phases: Sequence[Phase], target: Terms
) -> list[MeasuredPoint]:
    """``points`` (one a phase of ``phases``) each carrying the weights the size nearest the target
    held at its peak (``held_alike``: the checks read the same numbers): under offload a small size
    peaks while a large group is onloaded, a large one where its activations are largest, and a fit
    over both would read the weights' difference as activations."""
    return _carried(points, phases, held_alike(phases, [p.terms for p in points], target))


def _carried(
    points: Sequence[MeasuredPoint], phases: Sequence[Phase], peaks: Sequence[int]
) -> list[MeasuredPoint]:
    """``points`` each at the peak in ``peaks`` in place of its phase's measured peak."""
    return [
        p if c == f.peak_allocated else evolve(p, above_bytes=p.above_bytes + c - f.peak_allocated)
        for p, f, c in zip(points, phases, peaks)
    ]
