"""Counterexample search: candidate points of a pipeline's domain, in a deterministic order.

Points come cheapest and most telling first: the default workload, then one param at a time
moved to an interesting value (range ends, near zero, near contract edges, other params' defaults),
then a bounded product of those values, then random points. A point here is only a candidate; the
prover checks admissibility and the violation with the interpreter before it reports anything.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction

from dslc.model import ResolvedParam
from dslc.passes.intervals import Abstract, Interval

Point = dict  # param name -> Fraction | bool
SNAP_WINDOW = 64  # how far a candidate moves to satisfy its param's own contracts
BIG_STEPS = (10, 100, 1000, 10**4, 10**6, 10**9, 10**12, 10**18, 10**24, 10**31)


def snap(value: int, lo: int, hi: int | None, ok: Callable[[int], bool] | None) -> list[int]:
    """`value` clamped into [lo, hi], or the nearest values on each side that pass `ok`."""
    value = max(lo, value if hi is None else min(hi, value))
    if ok is None or ok(value):
        return [value]
    found = []
    for step in (1, -1):
        v = value + step
        for _ in range(SNAP_WINDOW):
            if v < lo or (hi is not None and v > hi):
                break
            if ok(v):
                found.append(v)
                break
            v += step
    return found


def int_bounds(domain: Interval) -> tuple[int, int | None]:
    lo = int(domain.lo) if not isinstance(domain.lo, float) else -(10**6)
    hi = None if isinstance(domain.hi, float) else int(domain.hi)
    return lo, hi


def candidate_values(
    param: ResolvedParam,
    domain: Abstract,
    ok: Callable[[int], bool] | None,
    others: Sequence[int],
    rng: random.Random,
) -> list[Fraction | bool]:
    """Interesting values of one param, most telling first, each within its (refined) range."""
    if param.type == "bool":
        return [bool(param.default), not param.default]
    assert isinstance(domain, Interval)
    lo, hi = int_bounds(domain)
    d = int(param.default)
    raw: list[int] = [d, lo, lo + 1, lo + 2]
    if hi is not None:
        raw += [hi, hi - 1, hi - 2]
    raw += [0, 1, -1, 2, d - 1, d + 1]
    for other in others:
        raw += [other, other - 1, other + 1]
    if hi is None:
        raw += [lo + step for step in BIG_STEPS] + [2 * d, 10 * d]
        raw += [lo + rng.randrange(0, 10**4) for _ in range(3)]
    else:
        raw += [rng.randint(lo, hi) for _ in range(3)]
    out: dict[int, None] = {}
    for value in raw:
        if value < lo or (hi is not None and value > hi):
            continue
        for v in snap(value, lo, hi, ok):
            out.setdefault(v, None)
    return [Fraction(v) for v in out]


def heuristic_points(
    base: Mapping[str, Fraction | bool],
    relevant: Sequence[str],
    values: Mapping[str, Sequence[Fraction | bool]],
    rng: random.Random,
    cap: int,
) -> Iterator[Point]:
    """The default point, one param moved at a time, then a product of values (sampled past
    `cap`).
    """
    seen: set[tuple] = set()

    def fresh(point: Point) -> bool:
        key = tuple(point[name] for name in relevant)
        if key in seen:
            return False
        seen.add(key)
        return True

    point = dict(base)
    if fresh(point):
        yield point
    for name in relevant:
        for value in values[name]:
            point = {**base, name: value}
            if fresh(point):
                yield point
    lists = [values[name] for name in relevant]
    size = 1
    for values_of in lists:
        size *= len(values_of)
    if size <= cap:
        combos: Iterator[tuple] = itertools.product(*lists)
    else:
        combos = (tuple(rng.choice(values_of) for values_of in lists) for _ in range(cap))
    for combo in combos:
        point = {**base, **dict(zip(relevant, combo))}
        if fresh(point):
            yield point


def random_points(
    base: Mapping[str, Fraction | bool],
    params: Sequence[ResolvedParam],
    domains: Mapping[str, Abstract],
    oks: Mapping[str, Callable[[int], bool] | None],
    rng: random.Random,
    count: int,
) -> Iterator[Point]:
    """Points drawn uniformly from each param's range (log-uniformly up to 10**6 past an infinite
    end).
    """
    for _ in range(count):
        point = dict(base)
        for param in params:
            if param.type == "bool":
                point[param.name] = rng.random() < 0.5
                continue
            lo, hi = int_bounds(domains[param.name])  # type: ignore[arg-type]
            top = hi if hi is not None else lo + int(10 ** rng.uniform(0, 6))
            choices = snap(rng.randint(lo, top), lo, hi, oks.get(param.name))
            if choices:
                point[param.name] = Fraction(rng.choice(choices))
        yield point


def domain_size(params: Sequence[ResolvedParam], domains: Mapping[str, Abstract]) -> int | None:
    """How many points the box of `params` holds (None when infinite)."""
    size = 1
    for param in params:
        domain = domains[param.name]
        if not isinstance(domain, Interval):
            size *= len(domain)
            continue
        lo, hi = int_bounds(domain)
        if hi is None or isinstance(domain.lo, float):
            return None
        size *= hi - lo + 1
    return size


def all_points(
    base: Mapping[str, Fraction | bool],
    params: Sequence[ResolvedParam],
    domains: Mapping[str, Abstract],
) -> Iterator[Point]:
    """Every point of the box of `params` (others at `base`), lowest values first."""
    axes: list[list[Fraction | bool]] = []
    for param in params:
        domain = domains[param.name]
        if not isinstance(domain, Interval):
            axes.append(sorted(domain))
        else:
            lo, hi = int_bounds(domain)
            assert hi is not None
            axes.append([Fraction(v) for v in range(lo, hi + 1)])
    names = [p.name for p in params]
    for combo in itertools.product(*axes):
        yield {**base, **dict(zip(names, combo))}
