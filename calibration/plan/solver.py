"""From inputs to an explained ``Plan``: validate, collapse phases, search, then say why.

Never raises on an infeasible problem: the ``Plan`` says so, with the phase and the bytes missing.
Inputs that describe no problem at all (an unknown component in a phase, a duplicate name) raise
``PlanInputError``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction

import attrs
from attrs import frozen

from artifact.limits import (
    MAX_PLAN_CANDIDATES,
    MAX_PLAN_COMPONENTS,
    MAX_PLAN_GROUPS,
    MAX_PLAN_LAYERS,
    MAX_PLAN_PAIRS,
    MAX_PLAN_PHASES,
    MAX_PLAN_TARGETS,
    MAX_SEARCH_NODES,
    MAX_SEARCH_WORK,
)
from artifact.units import show_bytes
from calibration.plan.answer import plan_of
from calibration.plan.candidates import Candidate, Group, candidates, offered, with_pageable
from calibration.plan.extras import Extra, broken, extras, reorder
from calibration.plan.greedy import greedy
from calibration.plan.model import (
    Component,
    Device,
    Plan,
    PlanInputError,
    PlanLimitError,
    Shortfall,
    Target,
)
from calibration.plan.search import search
from calibration.plan.shortfall import TOGETHER, diagnose


def _over(limit: str, value: int, most: int, what: str, advice: str) -> None:
    """Refuse a count past its limit (``artifact.limits``), before anything is built from it."""
    if value > most:
        raise PlanLimitError(f"{what}: {value:,}; the limit is {most:,} ({limit}): {advice}")


def check_limits(components: Sequence[Component], targets: Sequence[Target]) -> None:
    """Every count the inputs drive, bounded before a candidate is built (docs/planning.md)."""
    fewer = "plan fewer components at once (a pipeline's own, not a merge of many)"
    _over("MAX_PLAN_COMPONENTS", len(components), MAX_PLAN_COMPONENTS, "components", fewer)
    for c in components:
        _over(
            "MAX_PLAN_LAYERS",
            len(c.layer_bytes),
            MAX_PLAN_LAYERS,
            f"layers of component {c.name!r}",
            "group the layers into blocks",
        )
        _over(
            "MAX_PLAN_LAYERS",
            len(c.group_bytes),
            MAX_PLAN_LAYERS,
            f"block groups of component {c.name!r}",
            "group the blocks into fewer groups",
        )
    layers = sum(len(c.layer_bytes) for c in components)
    candidates_ = layers + sum(2 + bool(c.group_bytes) for c in components)
    _over("MAX_PLAN_CANDIDATES", candidates_, MAX_PLAN_CANDIDATES, "placements", fewer)
    _over("MAX_PLAN_TARGETS", len(targets), MAX_PLAN_TARGETS, "targets", "plan fewer shapes")
    phases = sum(len(t.phases) for t in targets)
    _over("MAX_PLAN_PHASES", phases, MAX_PLAN_PHASES, "phases", "plan fewer shapes")
    pairs = max(
        phases * len(components),
        len(targets) * candidates_,
        sum(len(p.present) for t in targets for p in t.phases),
    )
    _over(
        "MAX_PLAN_PAIRS",
        pairs,
        MAX_PLAN_PAIRS,
        "(phase, component) and (target, layer) pairs",
        "plan fewer shapes or components at once",
    )


def check_inputs(components: Sequence[Component], targets: Sequence[Target]) -> dict[str, int]:
    """The counts within their limits and the names consistent; each component's index."""
    check_limits(components, targets)
    return _check(components, targets)


def explain(
    components: Sequence[Component],
    picked: Sequence[Candidate],
    targets: Sequence[Target],
    device: Device,
    nodes: int = 0,
) -> Plan:
    """The plan of one candidate per component (in the components' order), explained."""
    return plan_of(components, picked, targets, check_inputs(components, targets), device, nodes)


def _check(components: Sequence[Component], targets: Sequence[Target]) -> dict[str, int]:
    index: dict[str, int] = {}
    for i, c in enumerate(components):
        if c.name in index:
            raise PlanInputError(f"component {c.name!r} is listed twice")
        index[c.name] = i
    if not targets:
        raise PlanInputError("no target to plan for")
    names: set[str] = set()
    for t in targets:
        if t.name in names:
            raise PlanInputError(f"target {t.name!r} is listed twice")
        names.add(t.name)
        for p in t.phases:
            for name in p.present:
                if name not in index:
                    raise PlanInputError(
                        f"target {t.name!r}, phase {p.label!r}: unknown component {name!r}; "
                        f"components: {sorted(index)}"
                    )
    return index


def _groups(
    targets: Sequence[Target],
    index: dict[str, int],
    order: Sequence[int],
    usable: Callable[[Target], int],
) -> list[Group]:
    """One constraint per active set: the tightest limit among its phases (first on ties)."""
    position = {component: k for k, component in enumerate(order)}
    tightest: dict[frozenset[int], tuple[int, str, str]] = {}
    for t in targets:
        room = usable(t)
        for p in t.phases:
            members = frozenset(position[index[n]] for n in p.present)
            limit = room - p.bound_bytes
            if members not in tightest or limit < tightest[members][0]:
                tightest[members] = (limit, p.label, t.name)
    return [
        Group(members, limit, label, target) for members, (limit, label, target) in tightest.items()
    ]


def _uses_per_byte(cands: Sequence[Candidate]) -> Fraction:
    """The most transfer a byte of this component costs per request when it is not resident."""
    best = Fraction(0)
    for c in cands:
        if c.pinned:
            best = max(best, Fraction(c.cost, c.pinned))
    return best


@frozen
class Problem:
    """A planning problem made ready to search: candidates, the search's order, the groups."""

    components: tuple[Component, ...]
    targets: tuple[Target, ...]
    index: dict[str, int]
    cands: tuple[tuple[Candidate, ...], ...]  # per component, in the components' order
    order: tuple[int, ...]  # component indices, most used first (the search's positions)
    groups: tuple[Group, ...]
    min_free: int  # the least bytes the pin budget leaves unpinned (0: none)
    unit: int = 1  # a cost's units per pinned byte moved (pageable candidates: the factor's den)
    # host memory, full-weight phases, transitions (``calibration.plan.extras``): in the
    # components' order
    extras: tuple[Extra, ...] = ()

    def picked(self, choice: Sequence[int]) -> list[Candidate]:
        """The candidates of a choice made in the search's positions, in the components' order."""
        out = [self.cands[i][0] for i in range(len(self.components))]
        for position, i in enumerate(self.order):
            out[i] = self.cands[i][choice[position]]
        return out


def problem(
    components: Sequence[Component],
    targets: Sequence[Target],
    device: Device,
    usable: Callable[[Target], int] | None = None,
) -> Problem:
    """Check the inputs, build every candidate and group (``usable``: a target's usable bytes,
    the device's by default; ranks plan each rank's targets against its own device)."""
    components, targets = tuple(components), tuple(targets)
    check_limits(components, targets)
    index = _check(components, targets)
    room = usable or (lambda _t: device.usable_bytes)
    base = tuple(offered(c, targets, room) for c in components)
    pin = device.pin_budget_bytes
    factor = Fraction(device.pageable_factor).limit_denominator(1000)
    # under a pin budget each host copy is pinned or pageable (never "resident or fail")
    cands = base if pin is None else tuple(with_pageable(cs, factor) for cs in base)
    # most used first: the most calls per byte (layer or whole), then the heaviest, then the name
    order = sorted(
        range(len(components)),
        key=lambda i: (-_uses_per_byte(base[i]), -components[i].weight_bytes, components[i].name),
    )
    groups = _groups(targets, index, order, room)
    more = extras(components, targets, device, room)
    _over(
        "MAX_PLAN_GROUPS",
        len(groups) + len(more),
        MAX_PLAN_GROUPS,
        "distinct sets of active components (and of full-weight or transition phases)",
        "plan fewer shapes at once",
    )
    _over(
        "MAX_PLAN_PAIRS",
        len(more) * sum(len(cs) for cs in cands),
        MAX_PLAN_PAIRS,
        "(constraint, placement) pairs of host memory, full-weight and transition phases",
        "plan fewer shapes or components at once",
    )
    total = sum(c.weight_bytes for c in components)
    min_free = 0 if pin is None else total - pin
    unit = 1 if pin is None else factor.denominator
    made = Problem(components, targets, index, cands, tuple(order), tuple(groups), min_free, unit)
    return attrs.evolve(made, extras=more)


def solve(
    components: Sequence[Component],
    targets: Sequence[Target],
    device: Device,
    *,
    search_limit: int = MAX_SEARCH_NODES,
    work_limit: int = MAX_SEARCH_WORK,
) -> Plan:
    """The least-transfer placement of every component that fits every phase of every target.

    Raises ``PlanLimitError`` when a count exceeds its limit (``check_limits``). The exact search
    stops past ``search_limit`` nodes or ``work_limit`` units of work (its cost is bounded for
    any input); stopped, it returns the best placement found, or else one a greedy pass finds,
    every constraint checked, with ``proven=False`` and the limit that stopped it
    (``stopped_by``); ``PlanLimitError`` only when neither found one."""
    return search_problem(problem(components, targets, device), device, search_limit, work_limit)[1]


def search_problem(
    made: Problem, device: Device, search_limit: int, work_limit: int
) -> tuple[tuple[int, ...] | None, Plan]:
    """The search's choice (the greedy pass's when it stopped without one; None: nothing fits)
    and its plan."""
    ordered = [made.cands[i] for i in made.order]
    more = reorder(made.extras, made.order)
    outcome = search(
        ordered, made.groups, made.min_free, range(len(ordered)), search_limit, work_limit, more
    )
    choice = outcome.choice
    if outcome.stopped is not None:  # the greedy pass's placement when it is cheaper, or alone
        held = _holds(made, ordered, more)
        found = greedy(ordered, made.groups, device.pin_budget_bytes, work_limit, held)
        if found is not None and (choice is None or _cost(ordered, found) < _cost(ordered, choice)):
            choice = found
        if choice is None:
            raise PlanLimitError(
                f"{outcome.stopped} and found no placement that fits, nor did a greedy pass: "
                f"{len(made.components)} components with "
                f"{sum(len(c) for c in made.cands):,} candidates whose layers differ in size "
                "and use defeat its bounds; group equal layers (same bytes, same uses) or plan "
                "fewer components at once"
            ) from None
    if choice is None:
        reason, short = _infeasible_reason(
            made.components, made.cands, made.targets, made.index, device
        )
        if short is None:  # every phase fits alone: host memory, or a transition, or together
            reason, short = diagnose(made, device, search_limit, work_limit)
        plan = Plan(False, reason, (), (), 0, 0.0, device, 0, outcome.nodes)
        return None, attrs.evolve(plan, shortfall=short)
    plan = plan_of(
        made.components, made.picked(choice), made.targets, made.index, device, outcome.nodes
    )
    # in pinned-equivalent bytes (a pageable byte counts the factor): the objective's unit
    own = sum(c.cost for c in made.picked(choice)) // made.unit
    if outcome.stopped is None:
        return choice, attrs.evolve(plan, lower_bound_bytes=own)
    lower = min(outcome.lower_cost // made.unit, own)
    return choice, attrs.evolve(
        plan,
        reason=unproven_reason(outcome.stopped.limit, str(outcome.stopped), own, lower),
        proven=False,
        stopped_by=outcome.stopped.limit,
        lower_bound_bytes=lower,
    )


def _cost(ordered: Sequence[Sequence[Candidate]], choice: Sequence[int]) -> int:
    return sum(cands[x].cost for cands, x in zip(ordered, choice))


def unproven_reason(limit: str, spent: str, cost: int, lower: int) -> str:
    """Why a plan that fits may not be the least transfer: the limit that stopped the proof, and
    how far from the least any placement could have it may be."""
    return (
        f"fits, not proven the least transfer: {spent}; the best placement found is kept, "
        f"at most {show_bytes(cost - lower)} a request above the least possible "
        f"({show_bytes(lower)}); to prove it, group equal layers or plan fewer components"
    )


def _holds(
    made: Problem, ordered: Sequence[Sequence[Candidate]], more: Sequence[Extra]
) -> Callable[[Sequence[int]], bool] | None:
    """Whether a choice (in the search's order) holds host memory, full weights, transitions."""
    if not more:
        return None
    components = [made.components[i] for i in made.order]

    def holds(choice: Sequence[int]) -> bool:
        picked = [cands[x] for cands, x in zip(ordered, choice)]
        return broken(more, components, picked) is None

    return holds


def _infeasible_reason(
    components: Sequence[Component],
    cands: Sequence[Sequence[Candidate]],
    targets: Sequence[Target],
    index: dict[str, int],
    device: Device,
) -> tuple[str, Shortfall | None]:
    """Why nothing fits: a phase that overflows alone (``Shortfall.DEVICE``), or the phases
    together (None: ``calibration.plan.shortfall`` looks further)."""
    usable = device.usable_bytes
    worst: tuple[int, str, bool] | None = None
    for t in targets:
        for p in t.phases:
            active, whole = set(p.present), set(p.whole_components)
            least = p.bound_bytes + sum(
                comp.weight_bytes
                if comp.name in whole
                else min(c.always + (c.onload if comp.name in active else 0) for c in cs)
                for comp, cs in zip(components, cands)
            )
            short = least - usable
            if short > 0 and (worst is None or short > worst[0]):
                worst = (short, f"{t.name}/{p.label}", bool(p.whole_components))
    if worst is not None:
        return (
            f"phase {worst[1]} needs {show_bytes(worst[0])} more than the device's usable "
            f"{show_bytes(usable)} (capacity {show_bytes(device.capacity_bytes)} - reserve "
            f"{show_bytes(device.reserve)}), "
            "even with every component offloaded or streamed"
            + (" but those it needs whole" if worst[2] else "")
        ), Shortfall.DEVICE
    # never the pin budget: over it, a host copy is pageable (slower, never refused)
    return TOGETHER, None


def most_conservative(
    components: Sequence[Component], targets: Sequence[Target], device: Device
) -> Plan:
    """Every component in its smallest footprint (offloaded whole, streamed or grouped, whichever
    needs least in its phases, grouped wherever it has block groups: the fallback weighs no copy),
    whatever it costs in transfer: the placement a worker falls back to.

    Feasible as a placement whether or not the estimates say it fits (``reason`` says which)."""
    components, targets = tuple(components), tuple(targets)
    index = _check(components, targets)
    picked = [
        min(candidates(c, targets), key=lambda k: (k.always + k.onload, k.always, k.cost))
        for c in components
    ]
    over = sum(c.pinned for c in picked) - (device.pin_budget_bytes or 0)
    for k in sorted(range(len(picked)), key=lambda k: -picked[k].pinned):
        if device.pin_budget_bytes is None or over <= 0:
            break
        over -= picked[k].pinned  # the largest host copies pageable until the rest fit the pins
        picked[k] = attrs.evolve(picked[k], pinned=0, pageable=True)
    plan = plan_of(components, picked, targets, index, device, 0)
    short = [
        u for u in plan.phases if u.headroom_bytes < 0 or (u.transition_headroom_bytes or 0) < 0
    ]
    reason = "the most conservative placement: every component offloaded or streamed" + (
        f"; the estimates say {len(short)} phase(s) overflow even so" if short else ""
    )
    host = device.host_memory_bytes
    if host is not None and plan.host_bytes > host:
        reason += (
            f"; its host copies ({show_bytes(plan.host_bytes)}) exceed the host memory "
            f"({show_bytes(host)})"
        )
    return attrs.evolve(plan, reason=reason)
