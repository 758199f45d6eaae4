"""A greedy placement for when the exact search stops before it found one (issue 33): feasible,
never proven the least.

From every component in its smallest footprint (offloaded whole or streamed, whichever needs less
where it runs), one pass in the search's order (the most transfer per byte first, as a knapsack's
greedy takes the densest items first) moves each component to its cheapest candidate that keeps
every group within its limit and the pinned bytes within the budget. Its cost is one scan of each
component's candidates and of the groups per component: bounded by the counts ``check_limits``
bounds, whatever the layers' sizes and uses.
"""

from __future__ import annotations

from collections.abc import Sequence

from calibration.plan.candidates import Candidate, Group


def _start(cands: Sequence[Candidate]) -> int:
    """The smallest footprint: the least bytes where it runs, then elsewhere, then pinned."""
    return min(
        range(len(cands)),
        key=lambda x: (cands[x].always + cands[x].onload, cands[x].always, cands[x].pinned),
    )


def greedy(
    per_component: Sequence[Sequence[Candidate]],
    groups: Sequence[Group],
    pin_budget: int | None,
) -> tuple[int, ...] | None:
    """One candidate index per component that fits every group and the pin budget, or None when
    the pass finds none (which proves nothing: the exact search may still find one)."""
    n = len(per_component)
    choice = [_start(cands) for cands in per_component]
    picked = [per_component[k][choice[k]] for k in range(n)]
    always = sum(c.always for c in picked)
    usage = [always + sum(picked[k].onload for k in g.members) for g in groups]
    pinned = sum(c.pinned for c in picked)
    of = [[j for j, g in enumerate(groups) if k in g.members] for k in range(n)]
    for k in range(n):
        slack = [g.limit - u for g, u in zip(groups, usage)]
        mine = set(of[k])
        room_in = min((slack[j] for j in of[k]), default=None)
        room_out = min((s for j, s in enumerate(slack) if j not in mine), default=None)
        cur = per_component[k][choice[k]]
        best = choice[k]
        for x, c in enumerate(per_component[k]):
            grow = c.always - cur.always
            if room_out is not None and grow > room_out:
                continue
            if room_in is not None and grow + c.onload - cur.onload > room_in:
                continue
            after = pinned - cur.pinned + c.pinned  # over the budget only if it pins less
            if pin_budget is not None and after > pin_budget and after > pinned:
                continue
            b = per_component[k][best]
            if (c.cost, -c.always) < (b.cost, -b.always):
                best = x
        new = per_component[k][best]
        for j in range(len(groups)):
            usage[j] += new.always - cur.always + (new.onload - cur.onload if j in mine else 0)
        pinned += new.pinned - cur.pinned
        choice[k] = best
    fits = all(u <= g.limit for g, u in zip(groups, usage))
    within = pin_budget is None or pinned <= pin_budget
    return tuple(choice) if fits and within else None
