"""A brute-force planner for tests: every combination of candidates, checked from the definition."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from fractions import Fraction

from calibration.plan import Component, Device, Target
from calibration.plan.candidates import Candidate, candidates


def fits(
    components: Sequence[Component],
    picked: Sequence[Candidate],
    targets: Sequence[Target],
    device: Device,
) -> bool:
    """Every phase of every target within capacity - reserve, pinned bytes within the budget."""
    names = [c.name for c in components]
    always = sum(c.always for c in picked)
    for t in targets:
        for p in t.phases:
            onload = sum(picked[names.index(n)].onload for n in set(p.active_components))
            if always + onload + p.bound_bytes > device.usable_bytes:
                return False
    pinned = sum(c.pinned for c in picked)
    return device.pin_budget_bytes is None or pinned <= device.pin_budget_bytes


def brute_force(
    components: Sequence[Component], targets: Sequence[Target], device: Device
) -> int | None:
    """The least total cost over all feasible combinations, or None."""
    options = [candidates(c, targets) for c in components]
    best = None
    for picked in itertools.product(*options):
        if fits(components, picked, targets, device):
            cost = sum(c.cost for c in picked)
            best = cost if best is None else min(best, cost)
    return best


def ranked(components: Sequence[Component], targets: Sequence[Target]) -> list[int]:
    """Component indices, most used first: the most transfer per byte were it not resident, then
    the heaviest, then the name (the tie-breaking order of docs/planning.md)."""

    def density(i: int) -> Fraction:
        cands = candidates(components[i], targets)
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
    options = [candidates(c, targets) for c in components]
    rank = ranked(components, targets)
    best: tuple[int, tuple[int, ...]] | None = None
    for picked in itertools.product(*options):
        if fits(components, picked, targets, device):
            key = (sum(c.cost for c in picked), tuple(-picked[i].always for i in rank))
            best = key if best is None or key < best else best
    return None if best is None else tuple(-best[1][rank.index(i)] for i in range(len(rank)))
