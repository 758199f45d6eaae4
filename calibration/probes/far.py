"""A target far beyond the measured sizes along one axis: where to measure it, or how to name it.

A fit through sizes whose largest value of some param is ``m`` says nothing of the memory past
``m`` along it: a chunk that stops growing, a cache that starts, a clamp -- each changes the growth
there and no size sees it (a decode declared ``memory ~ frames * height * width`` without its chunk,
fitted from sizes of at most 20 frames, was +46 % over at 24 and silent). The evidence margin pads
the growing part's reach as a whole (``calibration.probes.evidence.PER_EFOLD``), not a change of
slope along one axis, so a target past ``FAR`` times the largest measured value of a param some
stage's memory grows in is *far* along it: the loop (``calibration.calibrate.loop``) measures one
size at the target's value of that param, cheapest elsewhere, within the cost budget; if none can
be afforded, a ``far-axis`` finding names the param, the distance and the memory at risk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction

from attrs import frozen

from artifact.point import Point
from calibration.probes.finding import Finding
from calibration.probes.policy import memory_terms, work
from calibration.probes.residuals import StageFit
from calibration.probes.sizes import coverage_probes
from runtime import Pipeline
from runtime.kinds import FindingKind, Quantity

#: A target past this many times the largest measured value of a param (one some stage's memory
#: grows in) is far along it: a third of its value or more lies beyond every size, and a chunk or
#: a clamp there changes up to that share of the growth unseen, where the evidence margin pads
#: the reach by ``PER_EFOLD x ln(1.5)``, 1.6 % (``calibration.probes.evidence``).
FAR = 1.5


@frozen
class FarAxis:
    """A param the target lies far beyond every measured size in, and the stages it grows."""

    name: str
    largest: int  # the largest measured value
    goal: int  # the target's value
    stages: tuple[str, ...]  # the stages whose memory at the target changes along it

    @property
    def distance(self) -> float:
        return self.goal / self.largest if self.largest else float("inf")


def far_axes(pipeline: Pipeline, measured: Sequence[Point], target: Point) -> list[FarAxis]:
    """The integer params the target lies past ``FAR`` times every measured value of, in which
    some stage's memory terms at the target change (taking the largest measured value there)."""
    out: list[FarAxis] = []
    for name, goal in target.items() if measured else ():
        if isinstance(goal, bool) or any(isinstance(m[name], bool) for m in measured):
            continue
        largest = max(int(m[name]) for m in measured)
        if goal <= FAR * largest:
            continue
        stages = _growing(pipeline, {**target, name: largest}, target)
        if stages:
            out.append(FarAxis(name, largest, int(goal), stages))
    return out


def _growing(pipeline: Pipeline, nearer: Point, target: Point) -> tuple[str, ...]:
    """The stages whose memory terms differ between ``nearer`` and ``target`` (every stage where
    ``nearer`` is inadmissible: nothing says it does not grow)."""
    admissible = pipeline.is_admissible(**nearer)
    return tuple(
        stage
        for stage in pipeline.stages
        if not admissible
        or memory_terms(pipeline, stage, nearer) != memory_terms(pipeline, stage, target)
    )


def at_axis(
    pipeline: Pipeline, measured: Sequence[Point], axis: FarAxis, target: Point
) -> list[dict[str, int | bool]]:
    """Measured sizes with the param moved to the target's value (the largest admissible value
    not past it, no longer far), lighter than the target: the cheapest first."""
    ceiling = work(pipeline, target)
    out: list[dict[str, int | bool]] = []
    for base in measured:
        others = {k: v for k, v in base.items() if k != axis.name}
        value = pipeline.largest_admissible(axis.name, at_most=axis.goal, **others)
        if value is None or axis.goal > FAR * value:
            continue
        moved = {**base, axis.name: value}
        if moved not in out and work(pipeline, moved) < ceiling:
            out.append(moved)
    return sorted(out, key=lambda p: work(pipeline, p))


Planned = list[tuple[dict[str, int | bool], str]]


def far_first(
    pipeline: Pipeline,
    measured: Sequence[Point],
    bases: Sequence[Point],
    target: Point,
    cost: Callable[[Point], Fraction],
    left: Fraction,
    covering: Planned,
) -> Planned | None:
    """Sizes that serve two purposes, in place of ``covering`` (``coverage_probes``' plan): each
    far axis ``covering`` leaves no affordable size for, measured first at the target's value (a
    measured size with that param alone moved there, so it moves the param for coverage too), the
    other params covered in what ``left`` (the budget) then holds (``bases``: the warmup, then the
    probe). None unless every param is
    covered within it and some far axis is reached that the loop could not afford after
    ``covering``."""
    sizes = [*measured, *(p for p, _ in covering)]
    after = left - sum((cost(p) for p, _ in covering), Fraction(0))
    unmet = [
        axis
        for axis in far_axes(pipeline, sizes, target)
        if not any(cost(c) < after for c in at_axis(pipeline, sizes, axis, target))
    ]
    first: Planned = []
    spent = Fraction(0)
    for axis in unmet:
        nearer = [*measured, *(p for p, _ in first)]
        if axis.name not in {a.name for a in far_axes(pipeline, nearer, target)}:
            continue
        fits = [c for c in at_axis(pipeline, nearer, axis, target) if spent + cost(c) < left]
        if fits:
            first.append((fits[0], f"measuring {axis.name} at the target's value"))
            spent += cost(fits[0])
    if not first:
        return None
    now = [*measured, *(p for p, _ in first)]
    rest, uncovered = coverage_probes(pipeline, now, bases, bases[-1], target, cost, left - spent)
    if uncovered or spent + sum((cost(p) for p, _ in rest), Fraction(0)) >= left:
        return None
    return [*first, *rest]


def far_findings(
    pipeline: Pipeline, axes: Sequence[FarAxis], fits: Sequence[StageFit], target: Point
) -> list[Finding]:
    """One ``far-axis`` finding a stage and far param no size could be afforded at: the risk is
    the fit's growth at the target past the largest measured value (what a kink there could take
    away or double)."""
    out: list[Finding] = []
    for axis in axes:
        for stage in axis.stages:
            memory = (f for f in fits if f.stage == stage and f.quantity == Quantity.MEMORY)
            fit = next(memory, None)
            risk = 0.0 if fit is None else _past(pipeline, fit, axis, target)
            share = risk / fit.at_target if fit is not None and fit.at_target > 0 else 0.0
            message = (
                f"{stage} memory: the target's {axis.name}={axis.goal} lies {axis.distance:.3g}x "
                f"beyond the largest measured {axis.name}={axis.largest}, farther than the fit "
                f"vouches for ({FAR}x): a chunk or clamp past {axis.largest} would go unseen; "
                f"{risk / 1024:,.1f} KiB ({share:.2%} of the stage's growth) lie past it"
            )
            step = (
                f"measure a size with {axis.name}={axis.goal} (a --probe with it, the other "
                "params small), or check that the formula holds past "
                f"{axis.name}={axis.largest}"
            )
            out.append(
                Finding(
                    FindingKind.FAR_AXIS,
                    stage,
                    Quantity.MEMORY,
                    message,
                    (),
                    direction=axis.name,
                    risk=risk,
                    share=share,
                    next_step=step,
                )
            )
    return out


def _past(pipeline: Pipeline, fit: StageFit, axis: FarAxis, target: Point) -> float:
    """The fit's growing part at the target minus at the largest measured value of the axis."""
    nearer = {**target, axis.name: axis.largest}
    if not pipeline.is_admissible(**nearer):
        return max(fit.growing_at_target, 0.0)
    there = fit.growing_at(memory_terms(pipeline, fit.stage, nearer))
    return max(fit.growing_at_target - there, 0.0)
