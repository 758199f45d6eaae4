"""Which direction a stage's unexplained part follows, and what it is worth at the target.

When the declared terms leave residuals, each candidate term is tried beside them: for every
direction (a probe axis group such as ``height*width``, or any other param, ``steps`` and booleans
included) the size along it alone, and that size times the stage's declared measure (a history of
latents that grows with ``steps``: ``steps x latent_pixels``). The candidate whose exact fit leaves
the smallest residual names the direction; the difference its fit makes at the target is what the
formula may miss by there (the finding's risk), plus the largest residual still left. Exact fits
through the independent sizes, largest first, as the checks themselves (``residuals``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from attrs import frozen

from artifact.point import Point
from calibration.probes.policy import QUANTITIES
from calibration.probes.residuals import StageFit
from runtime import Pipeline
from runtime.estimate.fit.exact import fit_rows, predict, row


def directions(pipeline: Pipeline) -> dict[str, tuple[str, ...]]:
    """Named growth directions: each probe axis group (``height*width``), then every other param."""
    out: dict[str, tuple[str, ...]] = {}
    grouped: set[str] = set()
    for group in getattr(pipeline, "probe_axes", ()):
        out["*".join(group)] = tuple(group)
        grouped.update(group)
    for name in pipeline.default_workload:
        if name not in grouped:
            out[name] = (name,)
    return out


def size_along(group: Sequence[str], params: Point) -> Fraction:
    """A point's size along a direction (a boolean counts 1 for false, 2 for true)."""
    return Fraction(
        math.prod(int(params[g]) + (1 if isinstance(params[g], bool) else 0) for g in group)
    )


@frozen
class Explanation:
    """The best candidate term beside the declared ones, and what its fit says at the target."""

    direction: str
    group: tuple[str, ...]
    scaled: bool  # the size along the direction times the stage's declared measure
    change_at_target: float  # the fit with the candidate minus the declared fit, at the target
    left_over: float  # the largest residual the candidate's fit still leaves
    declared: bool  # whether the stage's declared terms already vary along the direction


def _with(
    terms: tuple[Fraction, ...], params: Point, group: Sequence[str], scaled: bool
) -> tuple[Fraction, ...]:
    extra = size_along(group, params) * (sum(terms, Fraction(0)) if scaled else 1)
    return (*terms, extra)


def explanations(pipeline: Pipeline, fit: StageFit, target: Point) -> list[Explanation]:
    """Every candidate that reduces the residuals, the best first (the smallest left over; on a
    tie, the one that moves the target most: the sizes cannot tell them apart, so the cautious
    reading names the direction)."""
    terms_of = QUANTITIES[fit.quantity]
    target_terms = terms_of(pipeline, fit.stage, target)
    base = max((abs(p.residual) for p in fit.points), default=0.0)
    found: list[Explanation] = []
    for name, group in directions(pipeline).items():
        if all(size_along(group, p.params) == size_along(group, target) for p in fit.points):
            continue  # no size moves it: nothing can say
        for scaled in (False, True):
            rows = [row(_with(p.terms, p.params, group, scaled)) for p in fit.points]
            values = [Fraction(p.value) for p in fit.points]
            coefficients, chosen = fit_rows(rows, values)
            if len(chosen) >= len(rows):
                continue  # it passes through every size: no evidence either way
            left = max(float(abs(predict(coefficients, r) - v)) for r, v in zip(rows, values))
            if left >= base:
                continue
            try:
                at_target = float(
                    predict(coefficients, row(_with(target_terms, target, group, scaled)))
                )
            except OverflowError:  # beyond a float at the target: no reading of the sizes
                continue
            declared = _varies(pipeline, fit, group, target)
            found.append(
                Explanation(name, group, scaled, at_target - fit.at_target, left, declared)
            )
    return sorted(found, key=lambda e: (e.left_over, -abs(e.change_at_target)))


def declared_along(pipeline: Pipeline, fit: StageFit, name: str, target: Point) -> bool:
    """Whether the stage's declared terms already vary along the direction ``name`` (a probe axis
    group such as ``height*width``, or a param): a hint must then revise them, not add one."""
    return _varies(pipeline, fit, directions(pipeline).get(name, (name,)), target)


def _varies(pipeline: Pipeline, fit: StageFit, group: Sequence[str], target: Point) -> bool:
    """Whether the stage's declared terms change when only ``group`` moves (from the target)."""
    terms_of = QUANTITIES[fit.quantity]
    here = terms_of(pipeline, fit.stage, target)
    for p in fit.points:
        moved = {**target, **{g: p.params[g] for g in group}}
        if pipeline.is_admissible(**moved) and terms_of(pipeline, fit.stage, moved) != here:
            return True
    return False
