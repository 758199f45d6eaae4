"""A brute-force planner for tests: every combination of candidates, checked from the definition."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from calibration.plan import Component, Device, Target
from calibration.plan_solve import Candidate, candidates


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
