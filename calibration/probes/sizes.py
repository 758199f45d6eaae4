"""Which sizes to measure beside the warmup and the probe: the candidates the probe policy
(``calibration.probes.policy``, ``calibration.probes.time_probe``) chooses from, between the
probe and the target.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

from calibration.probes.policy import mixes, next_probe, work
from calibration.session import Params
from runtime import Pipeline


def extra_probes(
    pipeline: Pipeline, warmup: Params, probe: Params, target: Params, at_most: int = 3
) -> list[dict[str, int | bool]]:
    """Sizes beside the warmup and the probe that pin down every declared term at the target.

    Candidates are the corners of the warmup-probe box (cheapest first), then the probe moved
    towards the target; ``calibration.probes.policy.next_probe`` picks one at a time.
    """
    chosen: list[dict[str, int | bool]] = []
    measured: list[Params] = [warmup, probe]
    for _ in range(at_most):
        candidates = [*mixes(warmup, probe), *towards(pipeline, probe, target)]
        candidates = [c for c in candidates if work(pipeline, c) < work(pipeline, target)]
        point = next_probe(pipeline, [*measured, *chosen], target, candidates)
        if point is None:
            break
        chosen.append(point)
    return chosen


def towards(pipeline: Pipeline, low: Params, high: Params) -> list[dict[str, int | bool]]:
    """``low`` with params moved halfway to ``high`` (up or down): each alone, then all together;
    and, for a param ``high`` has lower, ``low`` with ``high``'s value (cheaper still). Admissible
    points only."""
    moved: dict[str, int] = {}
    out: list[dict[str, int | bool]] = []
    for name, value in low.items():
        other = high.get(name, value)
        if isinstance(value, bool) or isinstance(other, bool) or other == value:
            continue
        others = {k: v for k, v in low.items() if k != name}
        if other < value:
            out.append({**low, name: other})
        mid = pipeline.largest_admissible(name, at_most=(value + other) // 2, **others)
        if mid is not None and min(value, other) < mid < max(value, other):
            moved[name] = mid
    out += [{**low, name: value} for name, value in moved.items()]
    if len(moved) > 1:
        out.append({**low, **moved})
    return [p for p in out if pipeline.is_admissible(**p)]


def ladder(
    pipeline: Pipeline, probe: Params, target: Params, at_most: int = 512
) -> list[dict[str, int | bool]]:
    """Sizes from the probe towards the target, for time: each param that differs takes its
    probe value, or the largest admissible value not past a half, three quarters or all of the
    way to the target's (where a contract leaves nothing between, only the target's value moves
    it); every combination but the probe itself, admissible points only, at most ``at_most``
    (the nearest first). The time policy weighs each one's cost against what it would buy."""
    levels: dict[str, list[int]] = {}
    for name, value in probe.items():
        other = target.get(name, value)
        if isinstance(value, bool) or isinstance(other, bool) or other == value:
            continue
        low, high = int(value), int(other)
        others = {k: v for k, v in probe.items() if k != name}
        found: list[int] = []
        for share in (Fraction(1, 2), Fraction(3, 4), Fraction(1)):
            moved = pipeline.largest_admissible(
                name, at_most=math.floor(low + (high - low) * share), **others
            )
            if (
                moved is not None
                and min(low, high) < moved <= max(low, high)
                and moved not in found
            ):
                found.append(moved)
        if found:
            levels[name] = [low, *found]
    names = list(levels)
    out: list[dict[str, int | bool]] = []
    for values in itertools.product(*(levels[n] for n in names)):
        point = {**probe, **dict(zip(names, values))}
        if point != dict(probe) and pipeline.is_admissible(**point):
            out.append(point)
    out.sort(key=lambda p: work(pipeline, p))
    return out[:at_most]


def larger_probe(
    pipeline: Pipeline, probe: Params, target: Params, measured: list[dict[str, int | bool]]
) -> dict[str, int | bool] | None:
    """The cheapest size between the probe and the target not measured yet (to confirm a fit)."""
    candidates = [
        c
        for c in towards(pipeline, probe, target)
        if c not in measured and work(pipeline, probe) < work(pipeline, c) < work(pipeline, target)
    ]
    return min(candidates, key=lambda c: work(pipeline, c), default=None)
