"""The constraints beyond one bound per active set: host memory, full-weight phases, transitions.

Each is a sum over every component of a part its candidate sets, within a limit
(docs/planning.md "Host memory, full weights, transitions"):

- **host memory**: every host copy (what is not kept on the device: pinned or pageable) <= the
  host's memory;
- **a full-weight phase** (``Phase.whole_components``): a component needed whole counts its whole
  weights there, whatever its candidate; the others their resident bytes, and their onload where
  active;
- **a transition** (``Phase.transition_bytes``): at the moment a streamed layer arrives, what is
  resident, what is onloaded and the incoming layer fit beside what is live then; it counts only
  when a component active there streams (its candidate is layerwise).

Every part is >= 0, so a sum only grows as the search places components: a constraint broken by
the first components placed stays broken, which the search checks as it goes (exact: its bound
leaves these out, still a lower bound). Pure: no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import IntEnum

import attrs
from attrs import frozen

from calibration.plan.candidates import Candidate
from calibration.plan.model import Component, Device, PlacementKind, Shortfall, Target


class Role(IntEnum):
    """What a component's candidate adds to one constraint."""

    RESIDENT = 0  # the bytes it keeps on the device in every phase
    ACTIVE = 1  # those, and what it onloads where it runs
    NOTHING = 2  # nothing: counted whole in the limit (a full-weight phase's component)
    HOST = 3  # its host copy: the whole weights less what stays on the device


@frozen
class Extra:
    """One constraint: the parts of every component's candidate add up to at most ``limit``."""

    kind: Shortfall
    label: str  # ``target/phase`` (or ``host memory``): where it binds, for reasons
    roles: tuple[Role, ...]  # per component, in the components' order
    limit: int
    # components whose layerwise candidate makes the constraint count (empty: it always counts)
    triggers: frozenset[int] = frozenset()


def part(role: Role, cand: Candidate, whole: int) -> int:
    """One candidate's part in a constraint where its component has ``role``."""
    if role == Role.RESIDENT:
        return cand.always
    if role == Role.ACTIVE:
        return cand.always + cand.onload
    if role == Role.HOST:
        return whole - cand.always
    return 0


def extras(
    components: Sequence[Component],
    targets: Sequence[Target],
    device: Device,
    usable: Callable[[Target], int],
) -> tuple[Extra, ...]:
    """Every constraint the inputs add, the tightest one per shape (roles, triggers)."""
    index = {c.name: i for i, c in enumerate(components)}
    found: dict[tuple[Shortfall, tuple[Role, ...], frozenset[int]], Extra] = {}

    def keep(extra: Extra) -> None:
        key = (extra.kind, extra.roles, extra.triggers)
        if key not in found or extra.limit < found[key].limit:
            found[key] = extra

    if device.host_memory_bytes is not None:
        roles = (Role.HOST,) * len(components)
        keep(Extra(Shortfall.HOST, "host memory", roles, device.host_memory_bytes))
    for t in targets:
        room = usable(t)
        for p in t.phases:
            whole = {index[n] for n in p.whole_components}
            active = {index[n] for n in p.active_components} - whole
            moves = p.transition_bytes
            if not whole and (moves is None or moves <= p.bound_bytes):
                continue  # the group of its active set says all
            roles = tuple(
                Role.NOTHING if i in whole else Role.ACTIVE if i in active else Role.RESIDENT
                for i in range(len(components))
            )
            offset = sum(components[i].weight_bytes for i in whole)
            where = f"{t.name}/{p.label}"
            if whole:
                keep(Extra(Shortfall.DEVICE, where, roles, room - p.bound_bytes - offset))
            if moves is not None and moves > p.bound_bytes:
                streams = frozenset(i for i in active if components[i].layer_bytes)
                if streams:
                    limit = room - moves - offset
                    keep(Extra(Shortfall.TRANSITION, where, roles, limit, streams))
    return tuple(found.values())


def broken(
    constraints: Sequence[Extra], components: Sequence[Component], picked: Sequence[Candidate]
) -> tuple[Extra, int] | None:
    """The first constraint the picked candidates break, and by how many bytes; None: none."""
    for e in constraints:
        if e.triggers and not any(picked[i].kind == PlacementKind.LAYERWISE for i in e.triggers):
            continue
        used = sum(
            part(role, cand, c.weight_bytes) for role, cand, c in zip(e.roles, picked, components)
        )
        if used > e.limit:
            return e, used - e.limit
    return None


def reorder(constraints: Sequence[Extra], order: Sequence[int]) -> tuple[Extra, ...]:
    """The constraints over components listed in ``order`` (a permutation of their indices)."""
    at = {i: k for k, i in enumerate(order)}
    return tuple(
        attrs.evolve(
            e,
            roles=tuple(e.roles[i] for i in order),
            triggers=frozenset(at[i] for i in e.triggers),
        )
        for e in constraints
    )


State = tuple[tuple[int, ...], int]  # per constraint the bytes used so far; the counting ones


class Stepper:
    """The constraints in the search's order of components: one step per component placed."""

    def __init__(
        self,
        constraints: Sequence[Extra],
        per_component: Sequence[Sequence[Candidate]],
        order: Sequence[int],
    ):
        self.limits = [e.limit for e in constraints]
        wholes = [max(c.always for c in cands) for cands in per_component]  # the weights
        # parts[k][x]: per constraint, candidate x's part, for the component at position k
        self.parts = [
            [tuple(part(e.roles[i], c, wholes[i]) for e in constraints) for c in per_component[i]]
            for i in order
        ]
        self.sets = [
            [
                sum(
                    1 << j
                    for j, e in enumerate(constraints)
                    if not e.triggers or (i in e.triggers and c.kind == PlacementKind.LAYERWISE)
                )
                for c in per_component[i]
            ]
            for i in order
        ]
        # the least the components from position k on add to each constraint
        n, m = len(order), len(constraints)
        self.rest = [[0] * m for _ in range(n + 1)]
        for k in range(n - 1, -1, -1):
            least = [min(p[j] for p in self.parts[k]) for j in range(m)]
            self.rest[k] = [self.rest[k + 1][j] + least[j] for j in range(m)]
        self.start: State = ((0,) * m, 0)

    def step(self, state: State, k: int, x: int) -> State | None:
        """The state once position k takes candidate x; None when a counting constraint breaks
        (with what the later components add at least)."""
        used, counting = state
        counting |= self.sets[k][x]
        after = tuple(u + p for u, p in zip(used, self.parts[k][x]))
        rest = self.rest[k + 1]
        for j, limit in enumerate(self.limits):
            if counting >> j & 1 and after[j] + rest[j] > limit:
                return None
        return after, counting
