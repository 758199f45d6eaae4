"""A probe for time: when the measured sizes leave a stage's time at the target too uncertain.

Memory is exact, so two sizes pin a memory term down; time is noisy, and a small probe's time per
iteration is mostly fixed per-call cost, so the slope that carries it to the target rests on small
differences between small sizes. The estimators say how uncertain the result is
(``runtime.estimate.fit.time_plane``: a one-sigma ``spread`` per stage). A stage is *uncertain* when
two sigma of its time exceed ``TIME_TOLERANCE`` of the request's, or when no fit carries it at all:
one measured size (or sizes along one line) scales it by a ratio, fixed per-call cost included, and
nothing says how wrong that is. The policy then picks, among sizes between the probe and the target,
lighter than the target in work and in every growing stage's memory, nearer the target in some
uncertain stage's time terms than every measured size (one within them, a repeat or a mirror
image narrows the noise only, as ``--repeat`` does), the cheapest one whose
measurement (``repeat`` runs, assumed to land on the current fit) would bring every uncertain stage
within the tolerance -- or, when none would, the one that narrows them most, if it narrows them by a
quarter or more. Before running anything: the spread a size would leave is computed from the design
alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

from attrs import frozen

from artifact.point import Point
from calibration.probes.policy import memory_terms, time_terms, work
from runtime import Pipeline
from runtime.estimate import WorkloadEstimate
from runtime.estimate.fit.noise import distance
from runtime.estimate.fit.time_plane import predicted_spread
from runtime.estimate.points import Workload
from runtime.estimate.timing import stage_sizes
from runtime.kinds import Method
from runtime.record import WarmupRecord

#: Two sigma of a stage's time may be at most this share of the request's predicted time.
TIME_TOLERANCE = 0.05
#: A probe that cannot meet the tolerance is still run if it narrows the worst stage this much.
WORTH_IT = 0.75


def uncertain_stages(
    result: WorkloadEstimate, tolerance: float = TIME_TOLERANCE
) -> tuple[str, ...]:
    """Stages fitted with two sigma over ``tolerance`` of the request's predicted time."""
    total = result.timing.seconds
    if not total:
        return ()
    return tuple(
        s.stage
        for s in result.timing.stages
        if s.method == Method.FIT and s.spread_s is not None and 2 * s.spread_s > tolerance * total
    )


def scaled_stages(
    pipeline: Pipeline, workload: Workload, result: WorkloadEstimate, target: Point
) -> tuple[str, ...]:
    """Stages carried to the target by a ratio (no fit) from sizes whose time terms all differ
    from the target's: their spread is unknown, so they are uncertain whatever the tolerance."""
    out = []
    for s in result.timing.stages:
        if s.method != Method.SCALED:
            continue
        want = time_terms(pipeline, s.stage, target)
        if all(size.terms != want for size in stage_sizes(workload, s.stage, s.repeated)):
            out.append(s.stage)
    return tuple(out)


def _samples_at(pipeline: Pipeline, stage: str, point: Point, repeat: int) -> int:
    """How many samples ``repeat`` runs at ``point`` give: one a run where the stage runs."""
    return repeat if pipeline.evaluate(**point)[stage].iterations > 0 else 0


def covers_memory(
    pipeline: Pipeline, point: Point, target: Point, records: Sequence[WarmupRecord]
) -> bool:
    """Whether ``point`` needs the target's memory in some stage whose memory grows: a probe must
    stay lighter than the target (the point is not to run it: on a device, it might not fit), and
    such a run would bound that stage's memory as a measurement of another request (fewer steps)."""
    for stage in pipeline.stages:
        want = memory_terms(pipeline, stage, target)
        if all(memory_terms(pipeline, stage, r.params) == want for r in records):
            continue  # the same at every size (a fixed prompt): nothing to extrapolate
        if all(h >= w for h, w in zip(memory_terms(pipeline, stage, point), want)):
            return True
    return False


@frozen
class _Reach:
    """What an uncertain stage's measured sizes already tell: their time terms, and (for a stage
    a fit carries) how near the target's the nearest of them is (``distance``, in e-folds)."""

    scaled: bool  # no fit carries the stage yet: any terms no size has are news
    known: frozenset[tuple[Fraction, ...]]
    target: tuple[Fraction, ...]
    nearest: float


def _reaches(
    pipeline: Pipeline,
    stages: Sequence[str],
    scaled: Sequence[str],
    measured: Sequence[Point],
    target: Point,
) -> dict[str, _Reach]:
    """Each uncertain stage's ``_Reach``, computed once for every candidate."""
    out = {}
    for stage in stages:
        known = [time_terms(pipeline, stage, m) for m in measured]
        want = time_terms(pipeline, stage, target)
        nearest = min((distance(k, want) for k in known), default=math.inf)
        out[stage] = _Reach(stage in scaled, frozenset(known), want, nearest)
    return out


def _informative(pipeline: Pipeline, reaches: Mapping[str, _Reach], point: Point) -> bool:
    """Whether ``point`` tells some uncertain stage more than the noise: a fitted stage's time
    terms nearer the target than every measured size's (the reach its model error grows with),
    or a scaled stage's terms no size has. A size within the measured ones, a repeat or a mirror
    image of a measured area narrows only the noise, as ``--repeat`` does."""
    values = pipeline.evaluate(**point)
    for stage, reach in reaches.items():
        if values[stage].iterations == 0:
            continue
        terms = time_terms(pipeline, stage, point)
        if reach.scaled and terms not in reach.known:
            return True
        if not reach.scaled and distance(terms, reach.target) < reach.nearest:
            return True
    return False


def time_probe(
    pipeline: Pipeline,
    records: Sequence[WarmupRecord],
    result: WorkloadEstimate,
    target: Point,
    candidates: Iterable[Point],
    repeat: int,
    tolerance: float = TIME_TOLERANCE,
) -> dict[str, int | bool] | None:
    """The size to measure next for time (see the module docstring), or None."""
    workload = Workload(records, pipeline, target)
    scaled = scaled_stages(pipeline, workload, result, target)
    stages = (*uncertain_stages(result, tolerance), *scaled)
    total = result.timing.seconds
    if not stages or not total:
        return None
    by_stage = {s.stage: s for s in result.timing.stages}
    limit = tolerance * total

    def worst(point: Point | None) -> float:
        """The largest ratio of two sigma to the limit over the uncertain stages."""
        ratios = []
        for stage in stages:
            timed = by_stage[stage]
            sizes = stage_sizes(workload, stage, timed.repeated)
            extra = []
            if point is not None:
                count = _samples_at(pipeline, stage, point, repeat)
                extra = [(time_terms(pipeline, stage, point), count)] if count else []
            spread = predicted_spread(sizes, extra, time_terms(pipeline, stage, target))
            if spread is None:
                return float("inf")
            ratios.append(2 * spread * timed.target_iterations / limit)
        return max(ratios)

    measured = [dict(r.params) for r in records]
    reaches = _reaches(pipeline, stages, scaled, measured, target)
    ceiling = work(pipeline, target)
    scored: list[tuple[float, Fraction, dict[str, int | bool]]] = []
    for candidate in candidates:
        point = dict(candidate)
        if point in measured or not pipeline.is_admissible(**point):
            continue
        if not _informative(pipeline, reaches, point):
            continue
        cost = work(pipeline, point)
        if cost >= ceiling or covers_memory(pipeline, point, target, records):
            continue
        scored.append((worst(point), cost, point))
    if not scored:
        return None
    enough = [s for s in scored if s[0] <= 1]
    if enough:
        return min(enough, key=lambda s: s[1])[2]
    best = min(scored, key=lambda s: (s[0], s[1]))
    return best[2] if best[0] <= WORTH_IT * worst(None) else None
