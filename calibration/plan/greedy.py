"""A greedy placement for when the exact search stops before it found one (issue 33): feasible,
never proven the least.

From every component in its smallest footprint (offloaded whole or streamed, whichever needs less
where it runs, pageable before pinned), it takes, again and again, the move that saves the most
transfer per byte it adds on the device (as a knapsack's greedy takes the densest items first):
one component to a cheaper candidate, kept only when every group stays within its limit and the
pinned bytes within the budget; a move that does not fit is not tried again. Every move keeps the
placement feasible, so the pass may stop anywhere: it stops past its work budget (a move weighs
the component's candidates and the groups), whatever the layers' sizes and uses.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from fractions import Fraction

from artifact.limits import MAX_SEARCH_WORK
from calibration.plan.candidates import Candidate, Group


def _start(cands: Sequence[Candidate]) -> int:
    """The smallest footprint: the least bytes where it runs, then elsewhere, then pinned."""
    return min(
        range(len(cands)),
        key=lambda x: (cands[x].always + cands[x].onload, cands[x].always, cands[x].pinned),
    )


class _Greedy:
    """The state of one greedy run: each component's candidate, each group's free bytes."""

    def __init__(self, per_component: Sequence[Sequence[Candidate]], groups: Sequence[Group]):
        self.cands, self.groups = per_component, groups
        self.choice = [_start(cands) for cands in per_component]
        self.ruled_out: list[set[int]] = [set() for _ in per_component]
        picked = [c[x] for c, x in zip(per_component, self.choice)]
        always = sum(c.always for c in picked)
        # a group's room: its limit minus every placement's always-bytes and its onloads
        self.room = [g.limit - always - sum(picked[k].onload for k in g.members) for g in groups]
        self.pinned = sum(c.pinned for c in picked)
        self.of = [[j for j, g in enumerate(groups) if k in g.members] for k in range(len(picked))]

    def best_move(self, k: int) -> tuple[Fraction, int] | None:
        """Component k's cheaper candidate that saves the most per byte added, or None."""
        cands, now = self.cands[k], self.cands[k][self.choice[k]]
        best: tuple[Fraction, int] | None = None
        for x, c in enumerate(cands):
            if c.cost >= now.cost or x in self.ruled_out[k]:
                continue
            density = Fraction(now.cost - c.cost, max(1, c.always - now.always))
            if best is None or density > best[0]:
                best = (density, x)
        return best

    def fits(self, k: int, x: int, pin_budget: int | None) -> bool:
        """Whether moving component k to candidate x keeps every group and the pins within."""
        now, new = self.cands[k][self.choice[k]], self.cands[k][x]
        grow = new.always - now.always
        after = self.pinned - now.pinned + new.pinned  # over the budget only if it pins less
        if pin_budget is not None and after > pin_budget and after > self.pinned:
            return False
        if any(self.room[j] < grow + new.onload - now.onload for j in self.of[k]):
            return False
        mine = set(self.of[k])
        return grow <= 0 or all(r >= grow for j, r in enumerate(self.room) if j not in mine)

    def move(self, k: int, x: int) -> None:
        """Component k to candidate x: the groups' room and the pins follow."""
        now, new = self.cands[k][self.choice[k]], self.cands[k][x]
        grow, mine = new.always - now.always, set(self.of[k])
        for j in range(len(self.room)):
            self.room[j] -= grow + (new.onload - now.onload if j in mine else 0)
        self.pinned += new.pinned - now.pinned
        self.choice[k] = x


def greedy(
    per_component: Sequence[Sequence[Candidate]],
    groups: Sequence[Group],
    pin_budget: int | None,
    work_limit: int = MAX_SEARCH_WORK,
    holds: Callable[[Sequence[int]], bool] | None = None,
) -> tuple[int, ...] | None:
    """One candidate index per component that fits every group and the pin budget (and
    ``holds``: host memory, full-weight phases, transitions), or None when the pass finds none
    (which proves nothing: the exact search may still find one)."""
    run = _Greedy(per_component, groups)
    if any(r < 0 for r in run.room) or (pin_budget is not None and run.pinned > pin_budget):
        return None  # the smallest footprint does not fit: no move makes room
    if holds is not None and not holds(run.choice):
        return None  # it needs more host memory, or a transition breaks: proves nothing
    heap: list[tuple[Fraction, int, int]] = []
    work = 0
    for k in range(len(per_component)):
        found = run.best_move(k)
        if found is not None:
            heapq.heappush(heap, (-found[0], k, found[1]))
    while heap and work <= work_limit:
        _, k, x = heapq.heappop(heap)
        work += len(per_component[k]) + len(groups)
        tried = [*run.choice[:k], x, *run.choice[k + 1 :]]
        if run.fits(k, x, pin_budget) and (holds is None or holds(tried)):
            run.move(k, x)
        else:
            run.ruled_out[k].add(x)
        found = run.best_move(k)
        if found is not None:
            heapq.heappush(heap, (-found[0], k, found[1]))
    return tuple(run.choice)
