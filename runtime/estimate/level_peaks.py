"""A phase's peak at the target from its sizes' peaks under offload, where the weights on the device
change within the phase: per weights level (``peak_fit.by_level``), else each size carried to the
weights the size nearest the target held (``peak_fit.held_alike``). The fit itself is the caller's
(``peaks.peak_from_points`` through a closure), so this module never imports ``peaks``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from attrs import evolve

from runtime.estimate.peak_fit import by_level, held_alike
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
    weights, levels = series[top][0], len(series)
    return evolve(
        estimates[top],
        bound_bytes=max(e.bound_bytes or 0 for e in estimates),
        reason=f"with {weights} B of weights on the device (the highest of {levels} levels at "
        f"the target): {estimates[top].reason}",
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
    every size) fitted on those weights, if lower."""
    own = fitted(_carried(points, phases, peaks), [weights] * len(peaks))
    if own.method != Method.SCALED:
        return own
    near = fitted(_carried(points, phases, peaks), [weights] * len(peaks), FitRule.LEVEL)
    if near.method == Method.FIT:
        return near
    highest = [weights + (p.activations_bytes or 0) for p in phases]
    alike = fitted(_carried(points, phases, highest), [weights] * len(peaks))
    return alike if alike.ok and (alike.raw_bytes or 0) < (own.raw_bytes or 0) else own


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
