"""A bound under its measured peak, named at verification: the stage, the bytes under, the share
of its activations the formula missed and the growth it lacks (issue 41).

A phase whose bound is under what ``--verify`` measured at the target already fails the verdict;
this says why. The fit through the measured sizes predicted the stage's memory above the baseline,
the target's run measured more: the difference grew past the largest measured size along the
params the target moves further, faster than the declared terms. Which term it follows is read
from the sizes and the target's run together: each candidate term (every product of two declared
terms, each direction times each declared term, each direction alone: ``calibration.probes.
directions``) joins the declared ones in one least-squares fit over all of them, weighted by
each value's inverse square (the fitting core's ``exact.least_squares``; non-negative slopes),
and the one leaving the smallest relative residual is named. Where the
measured sizes already left residuals, the term follows them too; where they lay exactly on the
declared terms, the growth starts past them, and the term is the best of those the target allows.
A declared term is never proposed: a candidate collinear with the declared ones is undetermined.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction

from attrs import frozen

from artifact.point import Point
from artifact.spelling import point_text
from artifact.units import show_bytes
from calibration.probes.directions import directions, size_along
from calibration.probes.finding import Finding
from calibration.probes.policy import memory_terms
from calibration.probes.residuals import SizePoint, StageFit
from runtime import Pipeline
from runtime.estimate import PhaseEstimate, WorkloadEstimate
from runtime.estimate.fit.exact import Row, least_squares, predict, row
from runtime.estimate.fit.samples import memory_above_baseline
from runtime.kinds import FindingKind, Quantity
from runtime.record import WarmupRecord

#: The most candidate terms tried (a pipeline has a handful of params and terms).
MOST_CANDIDATES = 64


@frozen
class Term:
    """A candidate extra term: its text and its value at a point."""

    text: str
    at: Callable[[Point], Fraction]


def bound_under(
    pipeline: Pipeline,
    result: WorkloadEstimate,
    fits: Sequence[StageFit],
    measured: WarmupRecord | None,
    target: Point,
) -> list[Finding]:
    """One ``bound-under`` finding a stage whose phase's bound is under the target's measured
    peak (its phase the furthest under), naming the stage, the bytes and the growth missing."""
    if measured is None or not measured.ok:
        return []
    peaks = {(p.kind, p.name, p.stage): p.peak_allocated for p in measured.phases}
    worst: dict[str, tuple[int, PhaseEstimate]] = {}
    for phase in result.phases:
        bound, peak = phase.peak.bound_bytes, peaks.get((phase.kind, phase.name, phase.stage))
        if phase.stage is None or bound is None or peak is None or bound >= peak:
            continue
        if phase.stage not in worst or peak - bound > worst[phase.stage][0]:
            worst[phase.stage] = (peak - bound, phase)
    out = []
    for under, phase in worst.values():
        fit = next(
            (f for f in fits if f.phase == phase.label and f.quantity == Quantity.MEMORY), None
        )
        out.append(_finding(pipeline, phase, under, fit, measured, target))
    return out


def _finding(
    pipeline: Pipeline,
    phase: PhaseEstimate,
    under: int,
    fit: StageFit | None,
    measured: WarmupRecord,
    target: Point,
) -> Finding:
    stage = phase.stage or ""
    above = memory_above_baseline(measured, stage, phase.kind, phase.name) or 0
    raw = phase.peak.raw_bytes or 0
    predicted = fit.at_target if fit is not None else raw - measured.baseline_allocated
    missed = max(above - predicted, 0.0)
    texts = pipeline.memory_texts(stage)
    named = [t for t in texts if t is not None]
    declared = f"`{' + '.join(named)}`" if len(named) == len(texts) else "its declared terms"
    bound = phase.peak.bound_bytes or 0
    message = (
        f"{stage} memory ({phase.label}): the bound {show_bytes(bound)} is {show_bytes(under)} "
        f"under the peak the target measured, {show_bytes(bound + under)}: the formula "
        f"predicted {show_bytes(predicted)} above the baseline, the target measured "
        f"{show_bytes(above)}, so it missed {show_bytes(missed)} "
        f"({missed / above if above else 1.0:.1%} of the stage's activations)"
    )
    points: tuple[SizePoint, ...] = ()
    grows, term = "", None
    if fit is not None:
        largest = fit.points[0].params
        term = best_term(pipeline, fit, target, float(above))
        grows = ", ".join(_growing(pipeline, stage, largest, target, term))
        message += f"; it grows faster than {declared} from the largest measured size "
        message += f"({point_text(largest)}) to the target" + (f" along {grows}" if grows else "")
        if term is not None:
            message += (
                f"; the measured sizes leave residuals that rise with size, and with them and the "
                f"target the unexplained bytes follow `{term.text}` best"
                if fit.off
                else f"; the measured sizes follow {declared}, so the extra growth starts past "
                f"them: of the candidate terms, `{term.text}` fits the sizes and the target best"
            )
        target_point = SizePoint(target, fit.target_terms, float(above), fit.at_target)
        points = (*fit.points, target_point)
    step = f"add a term to {stage}'s `memory ~` in the formula file that grows faster than "
    step += declared + (f" along {grows}" if grows else "")
    step += (f", such as `{term.text}`" if term is not None else "") + ", then calibrate again"
    share = missed / (above + measured.baseline_allocated) if above else 1.0
    return Finding(
        FindingKind.BOUND_UNDER,
        stage,
        Quantity.MEMORY,
        message,
        points,
        direction=grows or None,
        risk=missed,
        share=share,
        next_step=step,
    )


def _growing(
    pipeline: Pipeline, stage: str, largest: Point, target: Point, term: Term | None
) -> list[str]:
    """The integer params the target holds more of than the largest measured size, the most
    grown first: those along which the stage's declared terms or ``term`` change (all of them
    where none does)."""
    grown = [
        (int(v) / int(largest[k]) if int(largest[k]) else float("inf"), k)
        for k, v in target.items()
        if not isinstance(v, bool) and k in largest and int(v) > int(largest[k])
    ]
    names = [k for _, k in sorted(grown, key=lambda g: (-g[0], g[1]))]

    def moves(name: str) -> bool:
        nearer = {**target, name: largest[name]}
        if not pipeline.is_admissible(**nearer):
            return True
        here, there = memory_terms(pipeline, stage, target), memory_terms(pipeline, stage, nearer)
        return here != there or (term is not None and term.at(target) != term.at(nearer))

    return [k for k in names if moves(k)] or names


def candidates(pipeline: Pipeline, stage: str) -> list[Term]:
    """The terms tried beside the declared ones: products of two declared terms, each integer
    direction times each declared term, and each direction alone (at most ``MOST_CANDIDATES``)."""
    texts = pipeline.memory_texts(stage)
    named = [(j, t) for j, t in enumerate(texts) if t is not None]
    out = [
        Term(f"{_factor(a, ' ')} * {_factor(b, ' ')}", _product(pipeline, stage, i, j))
        for n, (i, a) in enumerate(named)
        for j, b in named[n:]
    ]
    groups = [
        g for g in directions(pipeline).values() if all(pipeline.params[p].type == "int" for p in g)
    ]
    for group in groups:
        along = " * ".join(group)
        out += [
            Term(f"{along} * {_factor(t)}", _scaled(pipeline, stage, group, j)) for j, t in named
        ]
    out += [Term(" * ".join(g), _along(g)) for g in groups]
    return out[:MOST_CANDIDATES]


def _factor(text: str, tight: str = "") -> str:
    """A term as a factor: in parentheses where it holds a sum, a quotient (or ``tight``)."""
    return text if not any(c in text for c in "+-/%" + tight) else f"({text})"


def _product(pipeline: Pipeline, stage: str, i: int, j: int) -> Callable[[Point], Fraction]:
    def at(point: Point) -> Fraction:
        terms = memory_terms(pipeline, stage, point)
        return terms[i] * terms[j]

    return at


def _scaled(
    pipeline: Pipeline, stage: str, group: Sequence[str], j: int
) -> Callable[[Point], Fraction]:
    def at(point: Point) -> Fraction:
        return size_along(group, point) * memory_terms(pipeline, stage, point)[j]

    return at


def _along(group: Sequence[str]) -> Callable[[Point], Fraction]:
    return lambda point: size_along(group, point)


def best_term(pipeline: Pipeline, fit: StageFit, target: Point, above: float) -> Term | None:
    """The candidate term that, beside the declared ones, best fits the measured sizes and the
    target's run together: least squares weighted by each value's inverse square (a memory's
    error matters against its size: a term that explains the target by missing a small size by a
    fifth is no explanation), non-negative slopes and its own positive; the smallest largest
    relative residual wins. None when none leaves less than the declared terms alone."""
    points = [p.params for p in fit.points] + [target]
    values = [Fraction(p.value) for p in fit.points] + [Fraction(above)]
    if any(v <= 0 for v in values):
        return None
    declared = [memory_terms(pipeline, fit.stage, p) for p in points]
    found = candidates(pipeline, fit.stage)
    alone = _misfit([row(d) for d in declared], values)
    best: tuple[Fraction, Term] | None = None
    for term in found:
        rows = [row((*d, term.at(p))) for d, p in zip(declared, points)]
        left = _misfit(rows, values, extra=True)
        if left is None or (alone is not None and left >= alone):
            continue
        if best is None or left < best[0]:
            best = (left, term)
    return None if best is None else best[1]


def _misfit(
    rows: Sequence[Row], values: Sequence[Fraction], extra: bool = False
) -> Fraction | None:
    """The largest relative residual of the weighted fit of ``rows`` (None: a slope negative or
    undetermined; with ``extra``, the last term's slope not positive)."""
    solved = least_squares(rows, values, [1 / (v * v) for v in values])
    if solved is None:
        return None
    coefficients, kept = solved
    slopes = coefficients[1:]
    if len(kept) < len(coefficients) or any(s < 0 for s in slopes) or (extra and slopes[-1] <= 0):
        return None
    return max(abs(predict(coefficients, r) - v) / v for r, v in zip(rows, values))
