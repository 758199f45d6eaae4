"""The residency candidates: every way to place one component, and the problem's shapes.

Every component has candidates (resident; layerwise with k of N layers resident, k = N-1 .. 0;
offloaded whole; grouped, where it has block groups), each using ``always`` bytes in every phase
and ``onload`` bytes in the phases where the component is active, and costing ``cost`` transfer
bytes per request. Phases with the same active set collapse to their largest bound: one
constraint per active set (a *group*). The exact search over them is
``calibration.plan.search``; see docs/planning.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction

import attrs
from attrs import frozen

from calibration.plan.model import Component, PlacementKind, PlanInputError, Target


@frozen
class Candidate:
    """One way to place a component."""

    kind: PlacementKind
    always: int  # on the device in every phase
    onload: int  # added in the phases where the component is active
    cost: int  # transfer bytes per request, weighted over targets
    pinned: int  # host bytes streamed or onloaded
    kept: int = 0  # layerwise: how many layers stay, the first ``kept`` of ``order``
    order: tuple[int, ...] = ()  # layer indices, most used first (the order layers are kept in)
    pageable: bool = False  # the host copy in pageable memory: not pinned, slower per byte
    moved: int = -1  # transfer bytes per request, weighted over targets (-1: ``cost``)
    per_byte: int = 1  # ``cost`` is ``moved`` x this: a pageable byte costs more than a pinned one

    @property
    def moved_bytes(self) -> int:
        """The bytes this candidate moves per request, weighted over targets."""
        return self.cost if self.moved < 0 else self.moved

    @property
    def resident_layers(self) -> tuple[int, ...]:
        """The indices of the layers kept on the device (layerwise), ascending."""
        return tuple(sorted(self.order[: self.kept]))


@frozen
class Group:
    """Phases sharing one active set: the tightest of them is the constraint."""

    members: frozenset[int]  # component indices active in these phases
    limit: int  # usable bytes minus the largest bound among them
    label: str
    target: str


@frozen
class Outcome:
    """What the search found: one candidate index per component, or None, and the effort."""

    choice: tuple[int, ...] | None
    cost: int
    nodes: int


def whole_uses(component: Component, targets: Sequence[Target]) -> int:
    """Onloads per request when offloaded whole, weighted: given, or 1 per target that uses it."""
    total = 0
    for t in targets:
        if component.name in t.uses:
            n = t.uses[component.name]
        else:
            n = int(any(component.name in p.active_components for p in t.phases))
        total += t.weight * n
    return total


def layer_uses(component: Component, targets: Sequence[Target]) -> tuple[int, ...]:
    """Calls of each layer per request, weighted over targets (missing: once per onload)."""
    n = len(component.layer_bytes)
    totals = [0] * n
    for t in targets:
        calls = t.layer_uses.get(component.name)
        if calls is None:
            once = whole_uses(component, (Target(t.name, t.phases, t.uses),))
            calls = (once,) * n
        if len(calls) != n:
            raise PlanInputError(
                f"target {t.name!r}: {len(calls)} layer uses for component {component.name!r}, "
                f"which has {n} layers"
            )
        for i, c in enumerate(calls):
            if c < 0:
                raise PlanInputError(
                    f"target {t.name!r}: negative layer uses for {component.name!r}"
                )
            totals[i] += t.weight * c
    return tuple(totals)


def grouped_moved(component: Component, targets: Sequence[Target]) -> int:
    """Bytes moved per request when grouped, weighted: its whole weights once per call of the
    module (a component with layers: its most called layer's calls, a transformer's steps;
    without: once per onload, as offloaded whole)."""
    total = 0
    for t in targets:
        once = (Target(t.name, t.phases, t.uses, t.layer_uses),)
        calls = max(layer_uses(component, once), default=whole_uses(component, once))
        total += t.weight * calls * component.weight_bytes
    return total


def candidates(component: Component, targets: Sequence[Target]) -> tuple[Candidate, ...]:
    """The component's candidates, most resident first.

    Every component with block groups (``Component.group_bytes``) is also *grouped*: nothing on
    the device between its calls, its largest group and what lies outside its groups while it
    runs, its whole weights moved every call. A component with layers gets it too: layerwise
    with no layer kept still keeps the rest resident in every phase, which grouped does not (it
    moves more: the rest as well, every call). The planner offers it only where it is needed
    (``offered``)."""
    w = component.weight_bytes
    out = [Candidate(PlacementKind.RESIDENT, w, 0, 0, 0)]
    sizes = component.layer_bytes
    if sizes:
        uses = layer_uses(component, targets)
        order = tuple(sorted(range(len(sizes)), key=lambda i: (-uses[i], i)))  # most used stay
        moved = cost = largest = 0
        for k in range(len(sizes) - 1, -1, -1):  # stream one more layer each time
            i = order[k]
            moved += sizes[i]
            cost += sizes[i] * uses[i]
            largest = max(largest, sizes[i])
            out.append(
                Candidate(PlacementKind.LAYERWISE, w - moved, largest, cost, moved, k, order)
            )
    out.append(Candidate(PlacementKind.OFFLOADED, 0, w, w * whole_uses(component, targets), w))
    if component.group_bytes:
        moved = grouped_moved(component, targets)
        out.append(Candidate(PlacementKind.GROUPED, 0, component.grouped_onload_bytes, moved, w))
    return tuple(out)


def needs_groups(
    component: Component, targets: Sequence[Target], usable: Callable[[Target], int]
) -> bool:
    """Whether the component cannot be on the device whole beside the bound of some phase it runs
    in (``usable``: a target's usable bytes), even with every other component off it."""
    return any(
        component.weight_bytes + p.bound_bytes > usable(t)
        for t in targets
        for p in t.phases
        if component.name in p.active_components and component.name not in p.whole_components
    )


def offered(
    component: Component, targets: Sequence[Target], usable: Callable[[Target], int]
) -> tuple[Candidate, ...]:
    """The candidates the planner weighs: grouped only where the component needs it
    (``needs_groups``). Group offloading copies block by block, a synchronization each (no
    prefetch stream), which the objective, bytes moved, does not see: grouped is never traded
    for bytes elsewhere, only chosen where whole the component does not fit where it runs."""
    cands = candidates(component, targets)
    if needs_groups(component, targets, usable):
        return cands
    return tuple(c for c in cands if c.kind != PlacementKind.GROUPED)


def recost(component: Component, cand: Candidate, targets: Sequence[Target]) -> Candidate:
    """The same placement (same layers kept, same host memory) costed for other targets."""
    if cand.kind == PlacementKind.RESIDENT:
        return cand
    if cand.kind == PlacementKind.OFFLOADED:
        moved = component.weight_bytes * whole_uses(component, targets)
    elif cand.kind == PlacementKind.GROUPED:
        moved = grouped_moved(component, targets)
    else:
        uses = layer_uses(component, targets)
        moved = sum(component.layer_bytes[i] * uses[i] for i in cand.order[cand.kept :])
    return attrs.evolve(cand, moved=moved, cost=moved * cand.per_byte)


def with_pageable(cands: Sequence[Candidate], factor: Fraction) -> tuple[Candidate, ...]:
    """Under a pin budget: each candidate that leaves a host copy, pinned (``cost`` x the
    factor's denominator) or pageable (pins nothing; ``cost`` x its numerator), so the costs
    stay exact integers in one unit: a pinned byte's copy time over the denominator."""
    out = []
    for c in cands:
        moved = c.moved_bytes
        if c.kind == PlacementKind.RESIDENT:
            out.append(attrs.evolve(c, moved=moved, per_byte=factor.denominator, cost=moved))
            continue
        den, num = factor.denominator, factor.numerator
        out.append(attrs.evolve(c, moved=moved, per_byte=den, cost=moved * den))
        out.append(
            attrs.evolve(c, moved=moved, per_byte=num, cost=moved * num, pinned=0, pageable=True)
        )
    return tuple(out)
