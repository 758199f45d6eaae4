"""A brute-force planner for tests: every combination of candidates and, under a pin budget, of
pinned or pageable host copies, checked from the definition (docs/planning.md "The model")."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction

from calibration.plan import Component, Device, PlacementKind, Plan, Target
from calibration.plan.candidates import Candidate, offered


def _onload(component: Component, cand: Candidate) -> int:
    """What a candidate adds in the phases it is active in, from the definition: a grouped
    component its largest block group and every byte outside its groups."""
    if cand.kind == PlacementKind.GROUPED:
        groups = component.group_bytes
        return component.weight_bytes - sum(groups) + max(groups)
    return cand.onload


def _cost(component: Component, cand: Candidate, targets: Sequence[Target]) -> int:
    """What a candidate moves per request, weighted, from the definition: grouped, its whole
    weights every call (its layers' most calls, else its onloads, else 1 where a phase uses it)."""
    if cand.kind != PlacementKind.GROUPED:
        return cand.cost
    total = 0
    for t in targets:
        used = any(component.name in p.active_components for p in t.phases)
        calls = t.uses.get(component.name, int(used))
        layer_calls = t.layer_uses.get(component.name, ())
        if component.layer_bytes and layer_calls:
            calls = max(layer_calls)
        total += t.weight * calls * component.weight_bytes
    return total


def fits(
    components: Sequence[Component],
    picked: Sequence[Candidate],
    targets: Sequence[Target],
    device: Device,
    pageable: Sequence[bool] | None = None,
) -> bool:
    """Every phase of every target within capacity - reserve (a component it needs whole counts
    its whole weights; at the moment a streamed layer arrives, its transition bytes in place of
    the bound), pinned bytes within the budget (a pageable host copy pins nothing), every host
    copy within the host memory."""
    names = [c.name for c in components]
    always = sum(c.always for c in picked)
    for t in targets:
        for p in t.phases:
            whole = set(p.whole_components)
            onload = sum(
                components[names.index(n)].weight_bytes - picked[names.index(n)].always
                if n in whole
                else _onload(components[names.index(n)], picked[names.index(n)])
                for n in set(p.active_components)
            )
            if always + onload + p.bound_bytes > device.usable_bytes:
                return False
            streams = any(
                picked[names.index(n)].kind == PlacementKind.LAYERWISE
                for n in set(p.active_components) - whole
            )
            moves = p.transition_bytes
            if streams and moves is not None and always + onload + moves > device.usable_bytes:
                return False
    host = sum(c.weight_bytes - k.always for c, k in zip(components, picked))
    if device.host_memory_bytes is not None and host > device.host_memory_bytes:
        return False
    flags = pageable or [False] * len(picked)
    pinned = sum(c.pinned for c, paged in zip(picked, flags) if not paged)
    return device.pin_budget_bytes is None or pinned <= device.pin_budget_bytes


def _usable(device: Device) -> Callable[[Target], int]:
    """Every target's usable bytes: the device's."""
    return lambda _target: device.usable_bytes


def _factor(device: Device) -> Fraction:
    return Fraction(device.pageable_factor)


def _copies(picked: Sequence[Candidate], device: Device) -> Iterator[tuple[bool, ...]]:
    """Every choice of pageable host copies: none without a pin budget (pinned is never worse),
    each component that keeps a host copy either way under one."""
    if device.pin_budget_bytes is None:
        yield (False,) * len(picked)
        return
    yield from itertools.product(*[(False, True) if c.pinned else (False,) for c in picked])


def _options(
    components: Sequence[Component], targets: Sequence[Target], device: Device
) -> Iterator[tuple[Fraction, tuple[Candidate, ...]]]:
    """Every feasible combination and its transfer time in pinned bytes' time (a pageable byte
    counts the device's factor)."""
    factor = _factor(device)
    room = _usable(device)
    for picked in itertools.product(*[offered(c, targets, room) for c in components]):
        for paged in _copies(picked, device):
            if fits(components, picked, targets, device, paged):
                yield (
                    sum(
                        (
                            _cost(k, c, targets) * (factor if p else Fraction(1))
                            for k, c, p in zip(components, picked, paged)
                        ),
                        Fraction(0),
                    ),
                    picked,
                )


def brute_force(
    components: Sequence[Component], targets: Sequence[Target], device: Device
) -> Fraction | None:
    """The least total cost over all feasible combinations, or None."""
    return min((cost for cost, _ in _options(components, targets, device)), default=None)


def objective(plan: Plan) -> Fraction:
    """A plan's cost as the brute force counts it: pinned bytes moved + factor x pageable ones."""
    factor = _factor(plan.device)
    return sum(
        (p.transfer_bytes * (factor if p.pageable else Fraction(1)) for p in plan.placements),
        Fraction(0),
    )


def ranked(components: Sequence[Component], targets: Sequence[Target], device: Device) -> list[int]:
    """Component indices, most used first: the most transfer per byte were it not resident, then
    the heaviest, then the name (the tie-breaking order of docs/planning.md)."""

    def density(i: int) -> Fraction:
        cands = offered(components[i], targets, _usable(device))
        return max((Fraction(c.cost, c.pinned) for c in cands if c.pinned), default=Fraction(0))

    return sorted(
        range(len(components)),
        key=lambda i: (-density(i), -components[i].weight_bytes, components[i].name),
    )


def brute_force_ties(
    components: Sequence[Component], targets: Sequence[Target], device: Device
) -> tuple[int, ...] | None:
    """The always-bytes per component of the best combination with ties broken as documented:
    least cost, then the most used component's always-bytes largest, then the next one's."""
    rank = ranked(components, targets, device)
    best: tuple[Fraction, tuple[int, ...]] | None = None
    for cost, picked in _options(components, targets, device):
        key = (cost, tuple(-picked[i].always for i in rank))
        best = key if best is None or key < best else best
    return None if best is None else tuple(-best[1][rank.index(i)] for i in range(len(rank)))
