"""The exact residency solver: dynamic programming over components with Pareto fronts, integer
bytes.

Every component has candidates (resident; layerwise with k of N layers resident, k = N-1 .. 0;
offloaded whole), each using ``always`` bytes in every phase and ``onload`` bytes in the phases
where the component is active, and costing ``cost`` transfer bytes per request. Phases with the
same active set collapse to their largest bound: one constraint per active set (a *group*).

The objective is lexicographic: least cost, then the most-used component's always-bytes largest,
then the next one's (``rank``), encoded exactly in one integer. The DP keeps, per the onload bytes
of the groups still open, the points (always-bytes, objective, room of the closed groups) that no
other point beats on all three; a group closes once its last member is placed. See
docs/planning.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from attrs import frozen

from calibration.plan import LAYERWISE, OFFLOADED, RESIDENT, Component, PlanInputError, Target


@frozen
class Candidate:
    """One way to place a component."""

    kind: str
    always: int  # on the device in every phase
    onload: int  # added in the phases where the component is active
    cost: int  # transfer bytes per request, weighted over targets
    pinned: int  # host bytes streamed or onloaded
    kept: int = 0  # layerwise: how many layers stay, the first ``kept`` of ``order``
    order: tuple[int, ...] = ()  # layer indices, most used first (the order layers are kept in)

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


def candidates(component: Component, targets: Sequence[Target]) -> tuple[Candidate, ...]:
    """The component's candidates, most resident first."""
    w = component.weight_bytes
    out = [Candidate(RESIDENT, w, 0, 0, 0)]
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
            out.append(Candidate(LAYERWISE, w - moved, largest, cost, moved, k, order))
    out.append(Candidate(OFFLOADED, 0, w, w * whole_uses(component, targets), w))
    return tuple(out)


_Point = tuple[int, int, int, tuple[int, ...]]  # always-bytes, objective, room, choices


def _objective_parts(
    per_component: Sequence[Sequence[Candidate]], rank: Sequence[int]
) -> list[list[int]]:
    """Each candidate's share of the objective: cost first, then rank-ordered missing bytes."""
    n = len(per_component)
    base = 1 + max((c.always for cands in per_component for c in cands), default=0)
    heaviest = [max(c.always for c in cands) for cands in per_component]
    scale = base**n
    return [
        [c.cost * scale + (heaviest[i] - c.always) * base ** (n - 1 - rank[i]) for c in cands]
        for i, cands in enumerate(per_component)
    ]


def search(
    per_component: Sequence[Sequence[Candidate]],
    groups: Sequence[Group],
    min_always: int,
    rank: Sequence[int],
) -> Outcome:
    """The best choice with every group within its limit and always-bytes >= min_always."""
    n, g = len(per_component), len(groups)
    parts = _objective_parts(per_component, rank)
    last = [max(grp.members, default=-1) for grp in groups]
    onload = [
        [[c.onload if i in grp.members else 0 for grp in groups] for c in cands]
        for i, cands in enumerate(per_component)
    ]
    # the least the components from i on add to always-bytes, to each group, and the most
    least_always = [0] * (n + 1)
    most_always = [0] * (n + 1)
    least_group = [[0] * g for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        cands = per_component[i]
        least_always[i] = least_always[i + 1] + min(c.always for c in cands)
        most_always[i] = most_always[i + 1] + max(c.always for c in cands)
        for j in range(g):
            least_group[i][j] = least_group[i + 1][j] + min(
                c.always + o[j] for c, o in zip(cands, onload[i])
            )
    unbounded = 1 << 100
    start_room = min((grp.limit for grp, end in zip(groups, last) if end < 0), default=unbounded)
    # a point: (always-bytes, objective, room of the closed groups, choices)
    fronts: dict[tuple[int, ...], list[_Point]] = {(0,) * g: [(0, 0, start_room, ())]}
    nodes = 1
    for i in range(n):
        closing = [j for j in range(g) if last[j] == i]
        still_open = [j for j in range(g) if last[j] > i]
        after, rest_group = least_always[i + 1], least_group[i + 1]
        floor = min_always - most_always[i + 1]
        grown: dict[tuple[int, ...], list[_Point]] = {}
        for loads, points in fronts.items():
            for index, cand in enumerate(per_component[i]):
                new_loads = [x + o for x, o in zip(loads, onload[i][index])]
                room_add = min((groups[j].limit - new_loads[j] for j in closing), default=unbounded)
                # the most always-bytes the open groups allow once the rest is placed at its least
                cap = min(
                    (groups[j].limit - new_loads[j] - rest_group[j] for j in still_open),
                    default=unbounded,
                )
                for j in closing:
                    new_loads[j] = 0
                bucket = grown.setdefault(tuple(new_loads), [])
                add, part = cand.always, parts[i][index]
                for always, objective, room, choice in points:
                    always += add
                    room = min(room, room_add)
                    if always + after > room or always > cap or always < floor:
                        continue
                    bucket.append((always, objective + part, room, (*choice, index)))
                nodes += len(points)
        fronts = {
            key: _pareto(points, min_always - least_always[i + 1])
            for key, points in grown.items()
            if points
        }
    finals = [p for points in fronts.values() for p in points if p[0] <= p[2]]
    if not finals:
        return Outcome(None, 0, nodes)
    best = min(finals, key=lambda p: p[1])
    cost = sum(per_component[i][c].cost for i, c in enumerate(best[3]))
    return Outcome(best[3], cost, nodes)


def _pareto(points: list[_Point], pin_safe_from: int) -> list[_Point]:
    """The points no other beats: less always-bytes, a smaller objective, at least the room.

    Less always-bytes is better only where every completion still meets the pin budget
    (``always >= pin_safe_from``); below that, only equal always-bytes compare.
    """
    points.sort(key=lambda p: (p[1], p[0], -p[2]))
    kept: list[_Point] = []
    best_room: dict[int, int] = {}  # per always-bytes kept, the most room
    least_always: dict[int, int] = {}  # per room of a kept pin-safe point, its least always-bytes
    for q in points:
        always, room = q[0], q[2]
        if best_room.get(always, -1) >= room:
            continue
        if any(r >= room and a <= always for r, a in least_always.items()):
            continue
        kept.append(q)
        best_room[always] = max(room, best_room.get(always, -1))
        if always >= pin_safe_from and always < least_always.get(room, always + 1):
            least_always[room] = always
    return kept
