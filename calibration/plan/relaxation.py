"""The exact search's bound: its objective in one integer, and the linear relaxation over the
components' lower convex hulls (a multiple-choice knapsack's LP, solved by slope order) that bounds
it from below in exact arithmetic, rounded up (``calibration.plan.search`` prunes by it).
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

from attrs import frozen

if TYPE_CHECKING:  # types only, as in calibration.plan.search
    from calibration.plan.candidates import Candidate, Group


@frozen
class Hull:
    """A component's cheapest way to give up device bytes: the start point and convex steps."""

    start_bytes: int
    start_objective: int
    steps: tuple[tuple[int, int], ...]  # (bytes given up, objective added), cheapest per byte first


def hull(points: Sequence[tuple[int, int]]) -> Hull:
    """The lower convex hull of (device bytes, objective) points from the cheapest point down."""
    p0 = min(p for _, p in points)
    f0 = min(f for f, p in points if p == p0)
    cheapest: dict[int, int] = {}
    for f, p in points:
        if f < f0 and cheapest.get(f0 - f, p - p0 + 1) > p - p0:
            cheapest[f0 - f] = p - p0
    chain = [(0, 0)]
    for s in sorted(cheapest):
        e = cheapest[s]
        while len(chain) >= 2:
            (s1, e1), (s2, e2) = chain[-2], chain[-1]
            if (s2 - s1) * (e - e1) - (e2 - e1) * (s - s1) > 0:
                break
            chain.pop()
        chain.append((s, e))
    steps = tuple((b[0] - a[0], b[1] - a[1]) for a, b in itertools.pairwise(chain))
    return Hull(f0, p0, steps)


class Relaxation:
    """The LP bound of some components within a byte budget, from their hulls."""

    def __init__(self, hulls: Sequence[Hull]):
        self.start_bytes = sum(h.start_bytes for h in hulls)
        self.start_objective = sum(h.start_objective for h in hulls)
        steps = sorted((s for h in hulls for s in h.steps), key=lambda s: Fraction(s[1], s[0]))
        self.given = [0]  # bytes given up by the first i steps
        self.added = [0]
        for b, e in steps:
            self.given.append(self.given[-1] + b)
            self.added.append(self.added[-1] + e)
        self.steps = steps
        self.least_bytes = self.start_bytes - self.given[-1]  # the rest's smallest footprint

    def bound(self, room: int) -> int | None:
        """The least objective of these components within ``room`` bytes (None: cannot fit)."""
        short = self.start_bytes - room
        if short <= 0:
            return self.start_objective
        if short > self.given[-1]:
            return None
        t = bisect_left(self.given, short)
        b, e = self.steps[t - 1]
        part = -(-e * (short - self.given[t - 1]) // b)
        return self.start_objective + self.added[t - 1] + part


def objective_parts(
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


def loose_bound(
    per_component: Sequence[Sequence[Candidate]], groups: Sequence[Group], rank: Sequence[int]
) -> int:
    """The least cost any placement could have, from the relaxation alone: its always-bytes fit
    within the smallest group's limit (onloads left out). One sort of every hull's steps."""
    parts = objective_parts(per_component, rank)
    hulls = [
        hull([(c.always, parts[i][x]) for x, c in enumerate(cands)])
        for i, cands in enumerate(per_component)
    ]
    room = min((g.limit for g in groups), default=sum(h.start_bytes for h in hulls))
    bound = Relaxation(hulls).bound(room)
    base = 1 + max((c.always for cands in per_component for c in cands), default=0)
    return 0 if bound is None else bound // base ** len(per_component)
