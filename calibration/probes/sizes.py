"""Which sizes to measure beside the warmup and the probe: the candidates the probe policy
(``calibration.probes.policy``, ``calibration.probes.time_probe``) chooses from, between the
probe and the target.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction

from artifact.limits import MAX_LADDER_POINTS
from artifact.point import Point
from calibration.probes.policy import mixes, next_probe, open_stages, work
from runtime import Pipeline


def extra_probes(
    pipeline: Pipeline,
    warmup: Point,
    probe: Point,
    target: Point,
    at_most: int = 4,
    cost: Callable[[Point], Fraction] | None = None,
    budget: Fraction = Fraction(1),
) -> list[dict[str, int | bool]]:
    """Sizes beside the warmup and the probe that pin down every declared term at the target.

    Candidates are the corners of the warmup-probe box (cheapest first), the probe moved towards
    the target, and one size just past each kink between a base and the target (``past_kinks``);
    ``calibration.probes.policy.next_probe`` picks one at a time, from the formulas alone. With
    ``cost`` (one run's, over the target's), the chosen sizes' total stays under ``budget``.
    """
    chosen: list[dict[str, int | bool]] = []
    measured: list[Point] = [warmup, probe]
    ceiling = work(pipeline, target)
    spent = Fraction(0)
    for _ in range(at_most):
        sizes = [*measured, *chosen]
        candidates = (
            c
            for c in itertools.chain(
                mixes(warmup, probe),
                towards(pipeline, probe, target),
                past_kinks(pipeline, sizes, (warmup, probe), target),
            )
            if work(pipeline, c) < ceiling and (cost is None or spent + cost(c) < budget)
        )
        point = next_probe(pipeline, sizes, target, candidates)
        if point is None:
            break
        chosen.append(point)
        spent += cost(point) if cost is not None else 0
    return chosen


def past_kinks(
    pipeline: Pipeline, measured: Sequence[Point], bases: Sequence[Point], target: Point
) -> Iterator[dict[str, int | bool]]:
    """For each base and each integer param the target lies above it in, the smallest admissible
    value that determines some open (stage, quantity) pair at the target when that param alone
    moves there: one size just past a ``min``/``max``/clamp/``if`` threshold or a contract
    (bisection: ``log2`` of the range of evaluations, none of the values enumerated)."""
    still_open = set(open_stages(pipeline, measured, target))
    if not still_open:
        return

    def closes(point: Point) -> bool:
        return bool(still_open - set(open_stages(pipeline, [*measured, point], target)))

    for base in bases:
        for name in departures(base, target):
            low, goal = base[name], target[name]
            if isinstance(low, bool) or isinstance(goal, bool) or goal <= low:
                continue
            found = _first_closing(pipeline, base, name, int(low), int(goal), closes)
            if found is not None:
                yield found


def _first_closing(
    pipeline: Pipeline,
    base: Point,
    name: str,
    low: int,
    goal: int,
    closes: Callable[[Point], bool],
) -> dict[str, int | bool] | None:
    """The smallest admissible value of ``name`` in ``(low, goal]`` whose size closes something,
    by bisection (assuming, as past a kink, that larger values close it too)."""
    others = {k: v for k, v in base.items() if k != name}
    top = pipeline.largest_admissible(name, at_most=goal, **others)
    if top is None or top <= low or not closes({**base, name: top}):
        return None
    while True:
        mid = (low + top) // 2
        below = pipeline.largest_admissible(name, at_most=mid, **others)
        if below is None or below <= low:
            if mid + 1 >= top:
                return {**base, name: top}
            low = mid
        elif closes({**base, name: below}):
            top = below
        else:
            low = below
        if top - low <= 1:
            return {**base, name: top}


def towards(pipeline: Pipeline, low: Point, high: Point) -> list[dict[str, int | bool]]:
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
    pipeline: Pipeline, probe: Point, target: Point, at_most: int = 512
) -> list[dict[str, int | bool]]:
    """Sizes from the probe towards the target, for time: each param that differs takes its
    probe value, or the largest admissible value not past a half, three quarters or all of the
    way to the target's (where a contract leaves nothing between, only the target's value moves
    it); every combination but the probe itself, admissible points only, at most ``at_most``
    (the nearest first). The time policy weighs each one's cost against what it would buy.

    At most ``MAX_LADDER_POINTS`` combinations are weighed, generated lazily: all of them when
    there are no more (4 levels of 5 params), else those moving the fewest params first."""
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
    out: list[dict[str, int | bool]] = []
    for combination in itertools.islice(_combinations(levels), MAX_LADDER_POINTS):
        point = {**probe, **combination}
        if point != dict(probe) and pipeline.is_admissible(**point):
            out.append(point)
    out.sort(key=lambda p: work(pipeline, p))
    return out[:at_most]


def _combinations(levels: Mapping[str, Sequence[int]]) -> Iterator[dict[str, int]]:
    """The params' level combinations (each list starts at the probe's value), lazily: in product
    order when they are few, else by how many params move (one, then two, ...)."""
    names = list(levels)
    if math.prod(len(v) for v in levels.values()) <= MAX_LADDER_POINTS:
        for values in itertools.product(*(levels[n] for n in names)):
            yield dict(zip(names, values))
        return
    for count in range(len(names) + 1):
        for subset in itertools.combinations(names, count):
            for values in itertools.product(*(levels[n][1:] for n in subset)):
                yield dict(zip(subset, values))


# --- coverage: every direction the target departs in is moved by some size ----------------------

#: How many values above a param's current one are tried for the next admissible one (a contract
#: such as `frames % 8 == 1` skips 7); past it, the largest admissible value up to the goal.
SCAN = 64


def departures(probe: Point, target: Point) -> tuple[str, ...]:
    """The params in which the target departs from the probe (steps and booleans included)."""
    return tuple(name for name, value in probe.items() if target.get(name, value) != value)


def moves_alone(a: Point, b: Point, name: str) -> bool:
    """Whether ``a`` and ``b`` differ in ``name`` and nowhere else."""
    return a[name] != b[name] and all(a[k] == b[k] for k in a if k != name)


def covered(name: str, measured: Sequence[Point]) -> bool:
    """Whether two measured sizes differ in ``name`` alone: a dependence on it then shows as a
    difference between them whatever the formula declares."""
    return any(moves_alone(a, b, name) for i, a in enumerate(measured) for b in measured[i + 1 :])


def _twos(value: int) -> int:
    """How many times 2 divides ``value`` (0 counts as often as any)."""
    return (value & -value).bit_length() - 1 if value else 64


def step_towards(
    pipeline: Pipeline, point: Point, name: str, goal: int | bool, regular: int = 0
) -> dict[str, int | bool] | None:
    """``point`` with ``name`` moved one admissible step towards ``goal`` (a boolean: to it),
    upwards to a value at least as even as both ends and ``regular`` (the probe's value, which is
    measured anyway; 0: any) (a 64-pixel side moves to 128, not to 72: a size less regular than
    both the probe and the target measures padding that neither has; beside a 96-pixel probe, to
    96: a padding the probe has, at half the cost)."""
    value = point[name]
    if isinstance(value, bool) or isinstance(goal, bool):
        moved: dict[str, int | bool] = {**point, name: goal}
        return moved if pipeline.is_admissible(**moved) else None
    others = {k: v for k, v in point.items() if k != name}
    grain = 1 << min(_twos(value), _twos(goal), _twos(int(regular)))
    if goal > value:
        first = (value // grain + 1) * grain
        for candidate in range(first, min(goal, value + SCAN * grain) + 1, grain):
            if pipeline.is_admissible(**{**point, name: candidate}):
                return {**point, name: candidate}
        found = pipeline.largest_admissible(name, goal, **others)
        return {**point, name: found} if found is not None and found > value else None
    found = pipeline.largest_admissible(name, value - 1, **others)
    return {**point, name: found} if found is not None and found >= goal else None


def coverage_probes(
    pipeline: Pipeline,
    measured: Sequence[Point],
    bases: Sequence[Point],
    probe: Point,
    target: Point,
    cost: Callable[[Point], Fraction] | None = None,
    budget: Fraction = Fraction(0),
) -> tuple[list[tuple[dict[str, int | bool], str]], tuple[str, ...]]:
    """For each param the target departs in that no two measured sizes move alone, a size that
    does: a base (the warmup, the probe) with that param one admissible step towards the target,
    cheaper than the target. Returns (size, why) pairs and the params no size could move.

    The cheapest such size, or -- with ``cost`` (one run's, over the target's) -- the probe's own
    step while ``budget`` still holds it beside the cheapest of every param after it: a size the
    others stay at the probe's in is also nearer the target, so it tests the fit past the probe
    for what the cheapest costs less (``calibration.calibrate.loop`` need not add one). Where the
    cheapest would pass ``budget`` beside the cheapest of every param still unmoved, the costliest
    of the cheaper steps (``smaller_steps``) that fits: the extra sizes stay under the budget."""
    sizes: list[Point] = list(measured)
    options, cheaper = _steps(pipeline, sizes, bases, probe, target)
    added: list[tuple[dict[str, int | bool], str]] = []
    uncovered: list[str] = []
    spent = Fraction(0)
    for k, (name, candidates) in enumerate(options.items()):
        if covered(name, sizes):
            continue
        if not candidates:
            uncovered.append(name)
            continue
        best = min(candidates, key=lambda c: work(pipeline, c))
        if cost is not None:
            rest = list(options.items())[k + 1 :]
            later = sum((min(map(cost, c)) for _, c in rest if c), Fraction(0))
            nearer = [c for c in candidates if moves_alone(c, probe, name)]
            least = sum(  # the cheapest step of every later param no size moves yet
                (min(map(cost, [*c, *cheaper[n]])) for n, c in rest if c and not covered(n, sizes)),
                Fraction(0),
            )
            if nearer and spent + cost(nearer[0]) + later < budget:
                best = nearer[0]
            elif spent + cost(best) + least >= budget:
                steps = [c for c in cheaper[name] if cost(c) < cost(best)]
                best = _fitting([best, *steps], cost, budget - spent - least)
            spent += cost(best)
        sizes.append(best)
        value, goal = best[name], target[name]
        down = not isinstance(value, bool) and value < min(goal, *(b[name] for b in bases))
        added.append((best, f"moving {name} " + ("down" if down else "towards the target")))
    return added, tuple(uncovered)


Steps = dict[str, list[dict[str, int | bool]]]


def _steps(
    pipeline: Pipeline, sizes: Sequence[Point], bases: Sequence[Point], probe: Point, target: Point
) -> tuple[Steps, Steps]:
    """For each param the target departs in: the bases moved one step towards it
    (``step_towards``), and the cheaper steps (``smaller_steps``); new sizes lighter than the
    target only."""
    ceiling = work(pipeline, target)
    seen = [dict(s) for s in sizes]
    options: Steps = {}
    cheaper: Steps = {}
    for name in departures(probe, target):
        options[name] = [
            moved
            for base in bases
            if (moved := step_towards(pipeline, base, name, target[name], probe[name])) is not None
            and moved not in seen
            and work(pipeline, moved) < ceiling
        ]
        cheaper[name] = [
            c
            for base in bases
            for c in smaller_steps(pipeline, base, name, target[name])
            if c not in seen and work(pipeline, c) < ceiling
        ]
    return options, cheaper


def smaller_steps(
    pipeline: Pipeline, base: Point, name: str, goal: int | bool
) -> list[dict[str, int | bool]]:
    """Cheaper ways to move ``name`` alone from ``base`` than ``step_towards``: the next admissible
    value towards ``goal`` whatever its evenness, and the next one below (a dependence shows as
    well in a step down; never below the formulas' probe minimum, where the regime differs)."""
    value = base[name]
    if isinstance(value, bool) or isinstance(goal, bool):
        return []
    others = {k: v for k, v in base.items() if k != name}
    out: list[dict[str, int | bool]] = []
    if goal > value:
        up = next(
            (
                v
                for v in range(value + 1, min(goal, value + SCAN) + 1)
                if pipeline.is_admissible(**others, **{name: v})
            ),
            None,
        )
        if up is not None:
            out.append({**base, name: up})
    down = pipeline.largest_admissible(name, value - 1, **others)
    if down is not None and 0 < down < value and down >= pipeline.probe_minimums.get(name, 0):
        out.append({**base, name: down})
    return out


def _fitting(
    options: Sequence[dict[str, int | bool]], cost: Callable[[Point], Fraction], left: Fraction
) -> dict[str, int | bool]:
    """The costliest of ``options`` (the nearest the target) that costs under ``left``; where none
    does, the cheapest (a param no size moves costs every stage the fixed margin)."""
    fits = [c for c in options if cost(c) < left]
    return max(fits, key=cost) if fits else min(options, key=cost)


def _grows_with(pipeline: Pipeline, name: str, probe: Point, target: Point) -> bool:
    """Whether some stage's memory terms at the target change when ``name`` takes the probe's
    value: a dependence the sizes must test the shape of, not only its slope."""
    moved = {**target, name: probe[name]}
    if not pipeline.is_admissible(**moved):
        return True
    return any(
        pipeline.memory_terms(stage, **moved) != pipeline.memory_terms(stage, **target)
        for stage in pipeline.stages
    )


def shape_probe(
    pipeline: Pipeline, measured: Sequence[Point], probe: Point, target: Point
) -> tuple[dict[str, int | bool], str] | None:
    """A size that tests the shape of the fit along a param the memory grows with: where the sizes
    hold fewer than three values of it (two fix a slope, a third tests it), the cheapest measured
    size nearest the target in it, moved one admissible step further towards the target."""
    ceiling = work(pipeline, target)
    seen = [dict(m) for m in measured]
    best: tuple[Fraction, dict[str, int | bool], str] | None = None
    for name in departures(probe, target):
        if isinstance(target[name], bool) or len({m[name] for m in measured}) >= 3:
            continue
        if not _grows_with(pipeline, name, probe, target):
            continue
        nearest = min(abs(int(target[name]) - int(m[name])) for m in measured)
        bases = [m for m in measured if abs(int(target[name]) - int(m[name])) == nearest]
        for base in sorted(bases, key=lambda m: work(pipeline, m)):
            moved = step_towards(pipeline, base, name, target[name])
            if moved is None or moved in seen or moved == dict(target):
                continue
            cost = work(pipeline, moved)
            if cost < ceiling and (best is None or cost < best[0]):
                best = (cost, moved, name)
            break
    return None if best is None else (best[1], best[2])
