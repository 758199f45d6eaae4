"""The one probe policy: which sizes pin down every declared term at the target, and whether the
measured sizes agree with the formulas.

Both the serving warmup (``calibration.calibrate.warmup``) and ``dslc calibrate``
(``calibration.calibrate.run``) ask these questions, each with its own candidate shapes (the warmup:
lighter shapes of its lighten sequence; calibrate: mixes of its warmup and probe, and shapes between
the probe and the target).

A quantity of a stage (its peak memory, its time per iteration) is modelled as
``constant + Σ slope_i × term_i`` over the terms of its ``memory ~`` / ``time ~`` measure. It is
*determined* at the target when the target's row ``(1, terms...)`` lies in the span of the measured
rows (``runtime.estimate.fit.exact``). Sizes beyond those needed test the model: see ``check``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from fractions import Fraction

from artifact.limits import MAX_PROBE_GROUP
from artifact.point import Point, point_key
from calibration.errors import CalibrationLimitError
from runtime import Pipeline
from runtime.estimate.fit.exact import estimable, row
from runtime.estimate.points import time_terms
from runtime.kinds import Quantity

Terms = tuple[Fraction, ...]


def memory_terms(pipeline: Pipeline, stage: str, params: Point) -> Terms:
    """The stage's memory terms at ``params``."""
    return tuple(Fraction(t) for t in pipeline.memory_terms(stage, **params))


TermsOf = Callable[[Pipeline, str, Point], Terms]
QUANTITIES: Mapping[str, TermsOf] = {Quantity.MEMORY: memory_terms, Quantity.TIME: time_terms}


def _determined(rows: Sequence[tuple[Fraction, ...]], target: tuple[Fraction, ...]) -> bool:
    return bool(rows) and estimable(rows, target)


def open_stages(
    pipeline: Pipeline, measured: Sequence[Point], target: Point
) -> tuple[tuple[str, str], ...]:
    """``(stage, quantity)`` pairs the ``measured`` sizes do not determine at ``target``.

    A quantity whose terms are the same at every size (a text encoder's fixed prompt) is
    determined by any one size; one that grows needs the target's row in the measured span. A
    stage with zero iterations at the target needs nothing.
    """
    out = []
    target_values = pipeline.evaluate(**target)
    for stage in pipeline.stages:
        if target_values[stage].iterations == 0:
            continue
        for quantity, terms_of in QUANTITIES.items():
            wanted = row(terms_of(pipeline, stage, target))
            rows = [row(terms_of(pipeline, stage, p)) for p in measured]
            if not _determined(rows, wanted):
                out.append((stage, quantity))
    return tuple(out)


def work(pipeline: Pipeline, point: Point) -> Fraction:
    """What a request costs, to compare candidates: Σ over stages of iterations × each measure."""
    values = pipeline.evaluate(**point)
    return sum(
        (Fraction(v.iterations) * (Fraction(v.memory) + Fraction(v.time)) for v in values.values()),
        Fraction(0),
    )


def next_probe(
    pipeline: Pipeline,
    measured: Sequence[Point],
    target: Point,
    candidates: Iterable[Point],
) -> dict[str, int | bool] | None:
    """The candidate that closes the most open (stage, quantity) pairs, the cheapest on ties.

    None when nothing is open, or no admissible candidate closes anything.
    """
    still_open = set(open_stages(pipeline, measured, target))
    if not still_open:
        return None
    best: tuple[int, Fraction, dict[str, int | bool]] | None = None
    seen = {point_key(p) for p in measured}  # a set: candidates may number in the hundreds
    for candidate in candidates:
        point = dict(candidate)
        if point_key(point) in seen or not pipeline.is_admissible(**point):
            continue
        seen.add(point_key(point))
        closed = len(still_open - set(open_stages(pipeline, [*measured, point], target)))
        if not closed:
            continue
        key = (-closed, work(pipeline, point), point)
        if best is None or key[:2] < best[:2]:
            best = key
    return None if best is None else best[2]


def mixes(a: Point, b: Point) -> Iterator[dict[str, int | bool]]:
    """Every point taking each param from ``a`` or ``b`` (the corners of their box), a and b
    excluded, generated one at a time.

    Raises ``CalibrationLimitError`` (before generating any) when ``a`` and ``b`` differ in more
    than ``MAX_PROBE_GROUP`` params: their ``2**n - 2`` corners are each weighed by the policy.
    """
    differing = [k for k in a if a[k] != b.get(k, a[k])]
    if len(differing) > MAX_PROBE_GROUP:
        raise CalibrationLimitError(
            f"the warmup and the probe differ in {len(differing)} params "
            f"({', '.join(differing[:4])}, ...); calibration weighs the corners of their box, "
            f"so they may differ in at most {MAX_PROBE_GROUP} (MAX_PROBE_GROUP): give a --warmup "
            f"closer to the probe, or a probe group of at most {MAX_PROBE_GROUP} params"
        )
    return _corners(a, b, differing)


def _corners(a: Point, b: Point, differing: Sequence[str]) -> Iterator[dict[str, int | bool]]:
    for mask in range(1, (1 << len(differing)) - 1):
        point = dict(a)
        for i, name in enumerate(differing):
            if mask >> i & 1:
                point[name] = b[name]
        yield point
