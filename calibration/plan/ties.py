"""The last tie the objective leaves: a grouped component that could be offloaded whole instead.

Grouped and offloaded whole move the same bytes (the whole weights once per use of a component
without layers) and keep none resident, so the exact search may pick either at the same
objective. Offloaded whole is kept wherever it fits with the rest of the choice: one copy per use
rather than one per block group, and hooks that never split the module (docs/planning.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from calibration.plan.candidates import Candidate, Group
from calibration.plan.extras import Extra, broken
from calibration.plan.model import Component, PlacementKind


def fits(
    picked: Sequence[Candidate],
    groups: Sequence[Group],
    more: Sequence[Extra],
    components: Sequence[Component],
) -> bool:
    """Every group within its limit and every other constraint held (the search's positions)."""
    always = sum(c.always for c in picked)
    if any(always + sum(picked[m].onload for m in g.members) > g.limit for g in groups):
        return False
    return not more or broken(more, components, picked) is None


def one_copy(
    ordered: Sequence[Sequence[Candidate]],
    choice: Sequence[int],
    groups: Sequence[Group],
    more: Sequence[Extra],
    components: Sequence[Component],
) -> tuple[int, ...]:
    """``choice`` (the search's positions) with each grouped pick offloaded whole instead where
    that twin costs the same and the whole choice still fits."""
    out = list(choice)
    for k, cands in enumerate(ordered):
        mine = cands[out[k]]
        if mine.kind is not PlacementKind.GROUPED:
            continue
        for x, twin in enumerate(cands):
            same = twin.cost == mine.cost and twin.pageable == mine.pageable
            if twin.kind is PlacementKind.OFFLOADED and same:
                trial = [*out[:k], x, *out[k + 1 :]]
                if fits([c[i] for c, i in zip(ordered, trial)], groups, more, components):
                    out = trial
                break
    return tuple(out)
