"""The exact residency search: depth-first branch and bound over components, integer bytes.

The objective is lexicographic: least cost, then the most-used component's always-bytes largest,
then the next one's (``rank``), encoded exactly in one integer. A node fixes the first components;
its lower bound is the best linear relaxation over the groups: for each group, the rest's
candidates as points (bytes on the device in that group's phases, objective), the cheapest bytes
to give up first on their lower convex hulls (a multiple-choice knapsack's LP, solved by slope
order: ``calibration.plan.relaxation``). The bound is exact arithmetic rounded up, so pruning
never drops an optimum; children are tried best bound first, which finds a good incumbent on the
first dive. See docs/planning.md.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import TYPE_CHECKING

from attrs import define, frozen

from artifact.limits import MAX_SEARCH_NODES, MAX_SEARCH_WORK
from calibration.plan.extras import Stepper
from calibration.plan.relaxation import Hull, Relaxation, hull, loose_bound, objective_parts

if TYPE_CHECKING:  # types only: calibration.plan.model imports the search through plan_explain
    from calibration.plan.candidates import Candidate, Group
    from calibration.plan.extras import Extra, State


class SearchExhausted(Exception):
    """The search spent its node or work limit (``artifact.limits``, or the caller's) unfinished."""

    def __init__(self, nodes: int, work: int = 0, limit: str = "MAX_SEARCH_NODES"):
        spent = (
            f"visited {nodes:,} nodes"
            if limit == "MAX_SEARCH_NODES"
            else f"spent {work:,} work units"
        )
        super().__init__(f"the exact search {spent} without finishing ({limit})")
        self.nodes, self.work, self.limit = nodes, work, limit


@frozen
class Outcome:
    """What the search found: one candidate index per component, or None, and the effort.

    ``stopped`` names the limit that ended an unfinished search whose incumbent this is (None:
    proven the least); ``lower_cost`` is then the least cost any placement could have."""

    choice: tuple[int, ...] | None
    cost: int
    nodes: int
    stopped: SearchExhausted | None = None
    lower_cost: int = 0


_Option = tuple[int, int, int, int]  # always-bytes, onload bytes, objective, candidate index
# bound, index, always, onload, objective, unpinned, the other constraints' state
_Child = tuple[int, int, int, int, int, int, "State"]


def _free(cands: Sequence[Candidate]) -> list[int]:
    """Each candidate's bytes not pinned on the host: resident, or pageable (the whole weights,
    the most resident candidate's always-bytes, minus what it pins)."""
    whole = max(c.always for c in cands)
    return [whole - c.pinned for c in cands]


_MAX_CEILINGS = 256  # onload sums of one group made into ceilings; beyond, checked as it is


class _Search:
    """One branch-and-bound run; components are searched in rank order (positions 0..n-1)."""

    def __init__(
        self,
        per_component: Sequence[Sequence[Candidate]],
        groups: Sequence[Group],
        min_free: int,
        rank: Sequence[int],
        limit: int = MAX_SEARCH_NODES,
        work_limit: int = MAX_SEARCH_WORK,
        extras: Sequence[Extra] = (),
    ):
        self.limit, self.work_limit = limit, work_limit
        self.nodes = self.work = 0
        self.scale = 1  # a unit's weight: the objective's words (it grows with the components)
        self.charge(sum(len(c) for c in per_component) * 16)  # objective parts, sorts, onloads
        parts = objective_parts(per_component, rank)
        base = 1 + max((c.always for cands in per_component for c in cands), default=0)
        self.cost_scale = base ** len(per_component)  # objective // cost_scale is the cost
        self.stopped: SearchExhausted | None = None
        self.lower = 0  # the least objective of any placement, once the search stops unfinished
        self.scale = 1 + max((p for ps in parts for p in ps), default=0).bit_length() // 2048
        n = len(per_component)
        # the most used first (as a knapsack's branch and bound takes the densest items first)
        self.order = sorted(range(n), key=lambda i: rank[i])
        # the constraints beyond the groups (``calibration.plan.extras``), in the search's order
        self.stepper = Stepper(extras, per_component, self.order) if extras else None
        self.per_node = 32 + len(extras)  # a node's work: its groups and those constraints
        at = {i: k for k, i in enumerate(self.order)}
        self.members = [frozenset(at[m] for m in g.members) for g in groups]
        self.limits = [g.limit for g in groups]
        self.options: list[list[_Option]] = [
            sorted(
                ((c.always, c.onload, parts[i][x], x) for x, c in enumerate(per_component[i])),
                key=lambda opt: (-opt[0], opt[2]),
            )
            for i in self.order
        ]
        # the pin budget: the bytes not pinned (resident, or pageable) add up to min_free at
        # least; ``free[k][x]``: candidate x's. Without pageable candidates they are always-bytes
        self.min_free = min_free
        self.free = [_free(per_component[i]) for i in self.order]
        self.free_is_always = all(
            self.free[k][index] == a
            for k, opts in enumerate(self.options)
            for a, _, _, index in opts
        )
        self.onloads = [sorted({o for _, o, _, _ in opts}) for opts in self.options]
        self.of_component = [[j for j, m in enumerate(self.members) if k in m] for k in range(n)]
        self.hulls: dict[tuple[int, int], Hull] = {}
        self.whole: set[int] = set()  # groups with too many onload sums to split into ceilings
        self.shared: list[list[int]] = []
        self.others_whole: list[list[int]] = []
        self.best: int | None = None
        self.best_choice: tuple[int, ...] | None = None

    def charge(self, units: int) -> None:
        """Count ``units`` of work (an option scanned, a bound's step built); past the work limit,
        stop: the node limit alone leaves the work per node unbounded."""
        self.work += units * self.scale
        if self.work > self.work_limit:
            raise SearchExhausted(self.nodes, self.work, "MAX_SEARCH_WORK")

    def ceilings(self) -> list[int]:
        """The always-bytes ceilings to try: every value limit - onload sum of a group, clamped.

        At ceiling T a placement may keep at most T bytes always and must onload at most
        limit - T in every group; the best placement's own ceiling is one of these values.
        A group whose members' onloads add up to too many sums is left out (``self.whole``)
        and checked as it is (resident + onloaded <= limit) in the search instead.
        """
        top = sum(max(a for a, _, _, _ in opts) for opts in self.options)
        values = {top}
        for j, (members, limit) in enumerate(zip(self.members, self.limits)):
            sums = {0}
            for k in members:
                self.charge(len(sums) * len(self.onloads[k]) + 1)
                sums = {x + o for x in sums for o in self.onloads[k]}
                if len(sums) > _MAX_CEILINGS:
                    self.whole.add(j)
                    break
            else:
                values.update(min(limit - x, top) for x in sums)
        highest = min((self.limits[j] for j in self.split()), default=top)
        least = max(0, self.min_free) if self.free_is_always else 0
        return sorted(v for v in values if least <= v <= highest)

    def split(self) -> list[int]:
        """The groups turned into onload rooms under a ceiling."""
        return [j for j in range(len(self.limits)) if j not in self.whole]

    def hull(self, k: int, allowed: int) -> Hull:
        """Component k's hull over the candidates with one of its ``allowed`` smallest onloads."""
        key = (k, allowed)
        if key not in self.hulls:
            self.charge(8 * len(self.options[k]))
            cut = self.onloads[k][allowed - 1]
            self.hulls[key] = hull([(a, p) for a, o, p, _ in self.options[k] if o <= cut])
        return self.hulls[key]

    def run(self) -> tuple[tuple[int, ...] | None, int]:
        """The best choice in the callers' order, and the nodes evaluated."""
        n = len(self.options)
        if n == 0:
            fits = all(limit >= 0 for limit in self.limits) and self.min_free <= 0
            return ((), 1) if fits else (None, 1)
        dives = []
        ceilings = self.ceilings()
        split = self.split()
        # per component: the groups to check as it is placed (shared, or whole) and the other
        # whole groups (its always-bytes count there too)
        self.shared = [
            [j for j in self.of_component[k] if len(self.members[j]) > 1 or j in self.whole]
            for k in range(n)
        ]
        self.others_whole = [[j for j in self.whole if k not in self.members[j]] for k in range(n)]
        for ceiling in ceilings:
            self.charge(4 * (n + sum(len(g) for g in self.of_component)))
            allowed = []
            for k in range(n):
                rooms = [self.limits[j] - ceiling for j in self.of_component[k] if j in split]
                count = len(self.onloads[k])
                allowed.append(bisect_left(self.onloads[k], min(rooms) + 1) if rooms else count)
            if 0 in allowed:
                continue
            dive = _Dive(self, ceiling, allowed)
            root = dive.relaxation(0).bound(ceiling)
            if root is not None:
                dives.append((root, ceiling, dive))
        ordered = sorted(dives, key=lambda d: d[:2])
        for at, (root, _, dive) in enumerate(ordered):
            if self.best is not None and root >= self.best:
                break
            try:
                dive.dive()
            except SearchExhausted as exc:
                # the incumbent (if any) stands, unproven: what is left unsearched is this dive's
                # open children and the later dives, none below its bound
                later = [r for r, _, _ in ordered[at + 1 :]]
                found = [] if self.best is None else [self.best]
                self.lower = min([*found, *later, *dive.open_bounds(root)], default=root)
                self.stopped = exc
                break
        if self.best_choice is None:
            return None, self.nodes
        choice = [0] * n
        for k, i in enumerate(self.order):
            choice[i] = self.best_choice[k]
        return tuple(choice), self.nodes


class _Dive:
    """The branch and bound at one ceiling: a knapsack of always-bytes with onload rooms."""

    def __init__(self, search: _Search, ceiling: int, allowed: list[int]):
        self.search, self.ceiling, self.allowed = search, ceiling, allowed
        n = len(allowed)
        search.charge(24 * sum(len(opts) for opts in search.options) + len(search.limits))
        self.options = [
            [opt for opt in search.options[k] if opt[1] <= search.onloads[k][allowed[k] - 1]]
            for k in range(n)
        ]
        self.most = [0] * (n + 1)  # the most unpinned bytes the components from k on can have
        for k in range(n - 1, -1, -1):
            free = search.free[k]
            self.most[k] = self.most[k + 1] + max(free[x] for _, _, _, x in self.options[k])
        split = search.split()
        # what each shared group may still onload (split), or its limit (whole)
        self.rooms = [
            limit - ceiling if j in split else limit for j, limit in enumerate(search.limits)
        ]
        self.fall = [[-a for a, _, _, _ in opts] for opts in self.options]
        self.cheaper = [_next_cheaper(opts) for opts in self.options]
        self.relaxations: dict[int, Relaxation] = {}
        # per depth and rooms: the (always-bytes, objective) front of the nodes already searched
        self.seen: dict[tuple[int, tuple[object, ...]], tuple[list[int], list[int]]] = {}
        self.seen_exact: dict[tuple[int, tuple[object, ...], int, int], int] = {}

    def covered(self, depth: int, always: int, objective: int, free: int, state: State) -> bool:
        """Whether a node already searched covers this one: the same depth and rooms, at most its
        always-bytes (exactly them, and the same unpinned bytes, under a pin budget: fewer might
        not complete) and at most its objective. Every completion of this node completes that
        one as well, no dearer, and that search kept or bounded away all of them; best only
        falls since. The other constraints' state must be the same."""
        self.search.charge(8 + len(self.rooms))
        rooms = (*self.rooms, state) if self.search.stepper else tuple(self.rooms)
        if self.search.min_free > 0:
            key = (depth, rooms, always, free)
            if self.seen_exact.get(key, objective + 1) <= objective:
                return True
            self.seen_exact[key] = objective
            return False
        sizes, values = self.seen.setdefault((depth, rooms), ([], []))
        i = bisect_right(sizes, always)  # sizes ascend, values strictly fall
        if i and values[i - 1] <= objective:
            return True
        k, j = bisect_left(sizes, always), i
        while j < len(sizes) and values[j] >= objective:
            j += 1
        sizes[k:j], values[k:j] = [always], [objective]
        return False

    def relaxation(self, depth: int) -> Relaxation:
        """The LP bound of the components from ``depth`` on (built on first use)."""
        if depth not in self.relaxations:
            s, n = self.search, len(self.allowed)
            hulls = [s.hull(k, self.allowed[k]) for k in range(depth, n)]
            steps = sum(len(h.steps) for h in hulls)
            s.charge(4 * (n - depth) + steps * (16 + 4 * steps.bit_length()))  # a sort
            self.relaxations[depth] = Relaxation(hulls)
        return self.relaxations[depth]

    def children(
        self, depth: int, always: int, objective: int, free: int, state: State
    ) -> list[_Child]:
        """Component ``depth``'s candidates that may still beat the best, best bound first, as
        (bound, index, always-bytes, onload bytes, objective, unpinned bytes); the last
        component's best one
        becomes the incumbent instead (and none is returned)."""
        if depth and self.covered(depth, always, objective, free, state):
            return []
        s = self.search
        relax = self.relaxation(depth + 1)
        floor = s.min_free - self.most[depth + 1] - free  # the least unpinned bytes to keep
        unpinned = s.free[depth]
        shared, whole = s.shared[depth], s.others_whole[depth]
        options, cheaper, fall = self.options[depth], self.cheaper[depth], self.fall[depth]
        rooms, whole_set = self.rooms, s.whole
        # options fall in always-bytes: skip those that leave the rest no room
        x = bisect_left(fall, always + relax.least_bytes - self.ceiling)
        children = []
        scanned = counted = 0
        while x < len(options):
            scanned += 1
            a, o, p, index = options[x]
            if unpinned[index] < floor:
                if s.free_is_always:  # options fall in always-bytes: so do the rest
                    break
                x += 1
                continue
            value = objective + p
            if s.best is not None and value >= s.best:
                x = cheaper[x]  # the next option with a smaller objective
                continue
            x += 1
            total = always + a
            scanned += len(shared) + len(whole)
            if shared and any(o + (total if j in whole_set else 0) > rooms[j] for j in shared):
                continue
            if whole and any(total > rooms[j] for j in whole):
                continue
            after = state if s.stepper is None else s.stepper.step(state, depth, index)
            if after is None:
                continue
            s.nodes += 1
            counted += 1
            if s.nodes > s.limit:
                raise SearchExhausted(s.nodes, s.work)
            rest = relax.bound(self.ceiling - total)
            if rest is not None and (s.best is None or value + rest < s.best):
                children.append((value + rest, index, a, o, p, unpinned[index], after))
        # a call's own cost (the cover check, the bound lookup, the scan's set-up): ~10 us
        s.charge(256 + 4 * scanned + s.per_node * counted + 8 * len(children))
        children.sort()
        if depth + 1 == len(self.options):
            if children and (s.best is None or children[0][0] < s.best):
                s.best = children[0][0]
                s.best_choice = (*self.path, children[0][1])
            return []
        return children

    def open_bounds(self, root: int) -> list[int]:
        """Lower bounds of every node a stopped dive left unsearched: per level, the child being
        searched and those after it (children ascend in bound); the root's before any frame."""
        if not self.stack:
            return [root]
        return [f.children[max(f.next - 1, 0)][0] for f in self.stack if f.children]

    def dive(self) -> None:
        """Depth first over the components, best bound first, with an explicit stack (no
        recursion: its depth is the number of components, which the input sets)."""
        s = self.search
        self.path: list[int] = []  # the candidate index chosen at each depth above the top
        self.stack: list[_Frame] = []
        stack = self.stack
        start = s.stepper.start if s.stepper else ((), 0)
        stack.append(_Frame(0, 0, 0, 0, self.children(0, 0, 0, 0, start), start))
        while stack:
            frame = stack[-1]
            shared = s.shared[frame.depth]
            if frame.taken is not None:  # back from the child: its onload returns to the rooms
                for j in shared:
                    self.rooms[j] += frame.taken
                frame.taken = None
                self.path.pop()
            children, at = frame.children, frame.next
            if at == len(children) or (s.best is not None and children[at][0] >= s.best):
                stack.pop()
                continue
            _, index, a, o, p, f, state = children[at]
            frame.next = at + 1
            for j in shared:
                self.rooms[j] -= o
            frame.taken = o
            self.path.append(index)
            depth, always, objective = frame.depth + 1, frame.always + a, frame.objective + p
            free = frame.free + f
            found = self.children(depth, always, objective, free, state)
            stack.append(_Frame(depth, always, objective, free, found, state))


@define
class _Frame:
    """One level of the depth-first search: the node, its children, and the one being searched."""

    depth: int
    always: int
    objective: int
    free: int  # the unpinned bytes of the components placed so far
    children: list[_Child]
    state: State  # the other constraints' (``calibration.plan.extras.Stepper``)
    next: int = 0  # the next child to search
    taken: int | None = None  # the onload the child being searched took from the shared rooms


def _next_cheaper(options: Sequence[_Option]) -> list[int]:
    """For each option, the index of the next one with a smaller objective (or the end)."""
    out = [len(options)] * len(options)
    stack: list[int] = []
    for x, (_, _, p, _) in enumerate(options):
        while stack and options[stack[-1]][2] > p:
            out[stack.pop()] = x
        stack.append(x)
    return out


def search(
    per_component: Sequence[Sequence[Candidate]],
    groups: Sequence[Group],
    min_free: int,
    rank: Sequence[int],
    limit: int = MAX_SEARCH_NODES,
    work_limit: int = MAX_SEARCH_WORK,
    extras: Sequence[Extra] = (),
) -> Outcome:
    """The best choice with every group within its limit, the bytes not pinned >= min_free
    (pinned bytes within the pin budget) and every one of ``extras`` held (their roles and
    triggers in ``per_component``'s order).

    Past ``limit`` nodes or ``work_limit`` units of work the best choice found so far is returned,
    unproven (``Outcome.stopped``), or none with ``stopped`` set and ``lower_cost`` the least cost
    any placement could have (0 when stopped before any bound was built)."""
    try:
        run = _Search(per_component, groups, min_free, rank, limit, work_limit, extras)
        choice, nodes = run.run()
    except SearchExhausted as exc:  # before any dive began: the loosest bound of all
        return Outcome(None, 0, exc.nodes, exc, loose_bound(per_component, groups, rank))
    if choice is None:
        lower = run.lower // run.cost_scale
        return Outcome(None, 0, nodes, run.stopped, lower if run.stopped else 0)
    cost = sum(per_component[i][c].cost for i, c in enumerate(choice))
    if run.stopped is None:
        return Outcome(choice, cost, nodes, None, cost)
    return Outcome(choice, cost, nodes, run.stopped, min(cost, run.lower // run.cost_scale))
