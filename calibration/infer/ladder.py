"""The sizes `dslc infer` measures: a bounded ladder of cheap admissible points around a base.

Each int param gets its own levels from its range, contract and cost: a level is a multiple of
its contract's modulus, at least ``MIN_STRIDE`` for a wide range (pixels) but a third of the way
from the base to the default at most, so a small or non-pixel range (an audio length in
[1, 60], default 10) gets steps of its own and its held-out level stays at or below the default.
From the base: the steps param from its smallest value up to ``STEPS_UP`` above the base, a
frame-like param (a `P % k == 1` contract) from its smallest values, the others two levels up;
then a two-level factorial over the non-steps params (products need joint moves) and a held-out
size every param two levels up (a lone param: ``HELD_OUT`` levels, past its fitted ones). No
size costs more than the default workload (``cost``: the product of the int params), and every
value is found by walking its level's grid from the base, at most ``MAX_LADDER_POINTS``
admissibility checks a ladder: never by listing a range. ``DEFAULT_SIZES`` bounds the count
unless asked (``MAX_SIZES`` at most): where the ladder holds more, the base, the held-out sizes,
each param's first levels alone and the factorial stay, and the rest go in by cost, cheapest
first (``choose``); the second part gets what the first leaves.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice, product

from attrs import define, frozen

from artifact.limits import MAX_LADDER_POINTS
from artifact.point import Point
from calibration.infer.terms import contract_modulus
from calibration.probes.minimums import raise_to_minimums, smallest_at_or_above
from runtime import FormulaError, Pipeline

#: The most sizes one ladder may hold (both parts together), asked for or not.
MAX_SIZES = 48
#: The sizes one ladder holds unless asked for more (``dslc infer --max-sizes``).
DEFAULT_SIZES = 20
#: The most step counts tried for one part of the steps ladder (a base of 10**9 steps: not all).
MAX_TRIES = 1024
#: How far above the base the steps param climbs (a scheduler's history saturates within 4).
STEPS_UP = 4
#: How many values a frame-like param takes from its smallest up.
FRAME_LEVELS = 7
#: The least a wide param moves a level: pixels by 32 keep the latents a multiple of a UNet's
#: downsampling (at 8-pixel strides, a 3-level UNet's activations round).
MIN_STRIDE = 32
#: Levels a param moves alone (fitted), and the level of the held-out size (checks the fits).
LEVELS = 2
HELD_OUT = LEVELS + 1
#: Grid points one level may skip where a contract other than the modulus refuses them.
SKIPS = 8


@frozen
class Size:
    """One size to measure and why; ``held_out`` sizes check the fits but never enter them."""

    point: Point
    why: str
    held_out: bool = False


@define
class Budget:
    """The admissibility checks a ladder may still make (``MAX_LADDER_POINTS`` in all)."""

    left: int = MAX_LADDER_POINTS

    def admissible(self, pipeline: Pipeline, point: Point) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return pipeline.is_admissible(**point)


def int_params(pipeline: Pipeline) -> list[str]:
    return [n for n, p in pipeline.params.items() if p.type == "int"]


def cost(pipeline: Pipeline, point: Point) -> int:
    """What a size costs, to bound the ladder: the product of its int params (work grows with
    each of them: steps, frames, pixels, seconds)."""
    out = 1
    for name in int_params(pipeline):
        out *= max(1, int(point[name]))
    return out


def cheapest_base(pipeline: Pipeline) -> dict[str, int | bool]:
    """The base where neither ``--base`` nor a module's ``WARMUP`` gives one: every int param at
    its smallest admissible value from 1 up (as calibrate's demo sizes, raised to a declared probe
    minimum), the bool params at their defaults."""
    point = dict(pipeline.default_workload)
    for name in int_params(pipeline):
        low = pipeline.params[name].min
        # from 1 at least: a count or a size of 0 runs nothing (a param without a range has 0)
        point[name] = smallest_at_or_above(pipeline, point, name, max(1, low or 0))
    point = raise_to_minimums(pipeline, point)
    return point if pipeline.is_admissible(**point) else dict(pipeline.default_workload)


def steps_param(pipeline: Pipeline) -> str | None:
    """The param passed as ``num_inference_steps`` (else one named ``steps``)."""
    for name in int_params(pipeline):
        try:
            args = pipeline.call_arguments(**{**pipeline.default_workload, name: 1})
            again = pipeline.call_arguments(**{**pipeline.default_workload, name: 2})
        except FormulaError:  # an inadmissible point: not this param
            continue
        if args.get("num_inference_steps") == 1 and again.get("num_inference_steps") == 2:
            return name
    return "steps" if "steps" in int_params(pipeline) else None  # a bool `steps` is no count


def _frame_like(pipeline: Pipeline, param: str) -> bool:
    modulus = contract_modulus(pipeline.params[param].contracts, param)
    return modulus is not None and modulus[1] == 1


def _high(pipeline: Pipeline, param: str, base: Point) -> int:
    """The largest value a level of ``param`` may take: the default (the base's if above)."""
    return max(int(pipeline.default_workload[param]), int(base[param]))


def stride(pipeline: Pipeline, param: str, base: Point) -> int:
    """A level of ``param``: its contract's modulus ``k`` for a frame-like one; else a multiple
    of ``k``, ``MIN_STRIDE`` at most and a ``HELD_OUT``-th of the way from the base to the default
    at most (at least ``k``)."""
    modulus = contract_modulus(pipeline.params[param].contracts, param)
    k = modulus[0] if modulus is not None else 1
    if modulus is not None and modulus[1] == 1:
        return k
    span = _high(pipeline, param, base) - int(base[param])
    return k * max(1, min(-(-MIN_STRIDE // k), span // (HELD_OUT * k)))


def _walk(pipeline: Pipeline, base: Point, param: str, budget: Budget, step: int) -> Iterator[int]:
    """The admissible values of ``param`` on its grid from the base in the direction of
    ``step`` (others at the base), within its range and the default, lazily."""
    info = pipeline.params[param]
    high, low = _high(pipeline, param, base), info.min if info.min is not None else 1
    value, skipped = int(base[param]), 0
    while skipped <= SKIPS:
        value += step
        if not low <= value <= high:
            return
        if budget.admissible(pipeline, {**base, param: value}):
            skipped = 0
            yield value
        else:
            skipped += 1


def levels(pipeline: Pipeline, base: Point, param: str, budget: Budget) -> list[int]:
    """``param``'s values beside the base, ``HELD_OUT`` at most, nearest first: up the grid, then
    down where the default leaves no room above; the last one is the held-out level."""
    d = stride(pipeline, param, base)
    out: list[int] = []
    for direction in (d, -d):
        for value in _walk(pipeline, base, param, budget, direction):
            if len(out) >= HELD_OUT:
                break
            out.append(value)
    return out


def frame_values(pipeline: Pipeline, base: Point, param: str, budget: Budget) -> list[int]:
    """A frame-like param's values beside the base, ``FRAME_LEVELS - 1`` of them on its grid:
    ``LEVELS`` up and the rest down towards its smallest (a video VAE's first frames are where
    it departs); more up where the base is at the bottom."""
    d = stride(pipeline, param, base)
    down = list(_bounded(_walk(pipeline, base, param, budget, -d), FRAME_LEVELS - 1 - LEVELS))
    more = LEVELS if len(down) >= LEVELS else FRAME_LEVELS - 1 - len(down)
    up = list(_bounded(_walk(pipeline, base, param, budget, d), more))
    return sorted(down) + up


def _bounded(values: Iterator[int], most: int) -> Iterator[int]:
    for k, value in enumerate(values):
        if k >= most:
            return
        yield value


@define
class _Ladder:
    """The sizes planned so far, each admissible, distinct, at most the default's cost and no
    param above its default (or the base's value, where that is above)."""

    pipeline: Pipeline
    budget: Budget
    ceiling: int
    highs: dict[str, int]
    sizes: list[Size]

    def add(self, point: Point, why: str, held_out: bool = False) -> None:
        if len(self.sizes) >= MAX_SIZES or any(dict(s.point) == point for s in self.sizes):
            return
        if self.sizes and (
            cost(self.pipeline, point) > self.ceiling
            or any(int(point[p]) > high for p, high in self.highs.items())
        ):
            return
        if self.budget.admissible(self.pipeline, point):
            self.sizes.append(Size(dict(point), why, held_out))


def _new(
    pipeline: Pipeline, base: Point, sizes: Sequence[Size] = (), budget: Budget | None = None
) -> _Ladder:
    ceiling = max(cost(pipeline, pipeline.default_workload), cost(pipeline, base))
    highs = {p: _high(pipeline, p, base) for p in int_params(pipeline)}
    return _Ladder(pipeline, budget or Budget(), ceiling, highs, list(sizes))


def plan(
    pipeline: Pipeline, base: Point, budget: Budget | None = None, most: int = DEFAULT_SIZES
) -> list[Size]:
    """The first part of the ladder: base, one param at a time, the factorial, the held-out,
    ``most`` sizes at most (``choose``); ``budget`` counts the admissibility checks it makes."""
    base = dict(base)
    ladder = _new(pipeline, base, (), budget)
    ladder.add(base, "base")
    steps = steps_param(pipeline)
    axes = [p for p in int_params(pipeline) if p != steps]
    if steps is not None:
        _steps_ladder(ladder, base, steps, f"{steps} alone")
    moves = {p: levels(pipeline, base, p, ladder.budget) for p in axes}
    for p in axes:
        frames = _frame_like(pipeline, p)
        values = frame_values(pipeline, base, p, ladder.budget) if frames else moves[p][:LEVELS]
        for v in values:
            ladder.add({**base, p: v}, f"{p} alone")
    moved = [p for p in axes if moves[p]]
    for picks in product((0, 1), repeat=len(moved)):
        point = {**base, **{p: moves[p][0] for p, j in zip(moved, picks, strict=True) if j}}
        ladder.add(point, "jointly (" + ", ".join(moved) + ")")
    # two levels up in every param; one param alone has those: its own held-out level then
    far = {p: moves[p][min(LEVELS, len(moves[p])) - 1] for p in moved}
    if len(moved) == 1:
        far = {p: moves[p][-1] for p in moved}
    ladder.add({**base, **far}, "held out: every param up", True)
    if steps is not None:
        up = {**base, **far, steps: int(base[steps]) + 2}
        ladder.add(up, f"held out: {steps} with every param up", True)
    return choose(pipeline, ladder.sizes, most)


def _tier(size: Size, seen: dict[str, int]) -> int:
    """How much a size is needed: the base, a held-out size, a param's first ``LEVELS`` alone,
    the factorial, then the rest."""
    if size.why == "base" or size.held_out:
        return 0
    if size.why.endswith(" alone"):
        seen[size.why] = seen.get(size.why, 0) + 1
        return 1 if seen[size.why] <= LEVELS else 3
    return 2 if size.why.startswith("jointly") else 3


def choose(pipeline: Pipeline, sizes: Sequence[Size], most: int) -> list[Size]:
    """``most`` of ``sizes`` in their order: the most needed first (``_tier``), then the
    cheapest (``cost``): more steps or frames only where there is room."""
    if len(sizes) <= most:
        return list(sizes)
    seen: dict[str, int] = {}
    tiers = [_tier(s, seen) for s in sizes]
    ranked = sorted(range(len(sizes)), key=lambda k: (tiers[k], cost(pipeline, sizes[k].point), k))
    return [sizes[k] for k in sorted(ranked[: max(1, most)])]


def _steps_ladder(ladder: _Ladder, point: Point, steps: str, why: str) -> None:
    low = ladder.pipeline.params[steps].min or 1
    for v in islice(range(low, int(point[steps]) + STEPS_UP + 1), MAX_TRIES):
        ladder.add({**point, steps: v}, why)


def steps_across(
    pipeline: Pipeline, base: Point, measured: Sequence[Size], most: int = DEFAULT_SIZES
) -> list[Size]:
    """The second part, when memory moves with steps: the steps ladder again one level up in
    every other param (a history term multiplies the latent size), within ``most`` sizes in
    all."""
    steps = steps_param(pipeline)
    if steps is None:
        return []
    ladder = _new(pipeline, base, measured)
    axes = [p for p in int_params(pipeline) if p != steps]
    up = {p: moved[0] for p in axes if (moved := levels(pipeline, base, p, ladder.budget))}
    _steps_ladder(ladder, {**dict(base), **up}, steps, f"{steps} one level up")
    return ladder.sizes[len(measured) : max(len(measured), min(most, MAX_SIZES))]
