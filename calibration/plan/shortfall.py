"""Why nothing fits when every phase fits alone: host memory, a transition, or the phases together.

The solver calls ``diagnose`` on an infeasible problem whose phases each fit on their own. It
searches again without the constraint it asks about: the least host copy any placement that
fits the device needs (over the host memory: ``Shortfall.HOST``), or a placement that fits every
steady state but overflows at the moment a streamed layer arrives (``Shortfall.TRANSITION``).
See docs/planning.md "Host memory, full weights, transitions".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import attrs

from artifact.units import show_bytes
from calibration.plan.candidates import Candidate, Group
from calibration.plan.extras import Extra, broken, reorder
from calibration.plan.model import Component, Device, Shortfall
from calibration.plan.search import Outcome, search


class Problem(Protocol):
    """What of the solver's ``Problem`` a diagnosis reads (no import back into the solver)."""

    @property
    def components(self) -> tuple[Component, ...]: ...
    @property
    def cands(self) -> tuple[tuple[Candidate, ...], ...]: ...
    @property
    def order(self) -> tuple[int, ...]: ...
    @property
    def groups(self) -> tuple[Group, ...]: ...
    @property
    def min_free(self) -> int: ...
    @property
    def extras(self) -> tuple[Extra, ...]: ...
    def picked(self, choice: Sequence[int]) -> list[Candidate]: ...


TOGETHER = "each phase fits on its own, but no single placement fits every phase at once"


def diagnose(
    made: Problem, device: Device, search_limit: int, work_limit: int
) -> tuple[str, Shortfall | None]:
    """The reason nothing fits, and what it runs short of (None: the phases together)."""
    kept = [e for e in made.extras if e.kind != Shortfall.HOST]
    if len(kept) < len(made.extras):
        host = _least_host(made, kept, search_limit, work_limit)
        memory = device.host_memory_bytes or 0
        if host is not None and host > memory:
            return (
                f"host memory {show_bytes(memory)} is {show_bytes(host - memory)} short: every "
                f"placement that fits the device keeps at least {show_bytes(host)} of host "
                "copies (pinned or pageable); give more host memory (--host-memory) or a "
                "larger device"
            ), Shortfall.HOST
    steady = [e for e in made.extras if e.kind != Shortfall.TRANSITION]
    if len(steady) < len(made.extras):
        found = _transition(made, steady, search_limit, work_limit)
        if found is not None:
            extra, short = found
            return (
                f"phase {extra.label}: every placement that fits its steady state streams a "
                f"layer there, and at the moment one arrives it needs {show_bytes(short)} more "
                f"than the device's usable {show_bytes(device.usable_bytes)}"
            ), Shortfall.TRANSITION
    return TOGETHER, None


def _search(
    made: Problem,
    ordered: Sequence[Sequence[Candidate]],
    kept: Sequence[Extra],
    search_limit: int,
    work_limit: int,
) -> Outcome:
    """The exact search over ``ordered`` (``made``'s order) holding the ``kept`` constraints."""
    return search(
        ordered,
        made.groups,
        made.min_free,
        range(len(ordered)),
        search_limit,
        work_limit,
        reorder(kept, made.order),
    )


def _least_host(made: Problem, kept: list[Extra], search_limit: int, work_limit: int) -> int | None:
    """The least host copy of any placement that fits the device (None: none, or unproven)."""
    ordered = []
    for i in made.order:
        whole = made.components[i].weight_bytes
        ordered.append([attrs.evolve(c, cost=whole - c.always) for c in made.cands[i]])
    outcome = _search(made, ordered, kept, search_limit, work_limit)
    if outcome.choice is None or outcome.stopped is not None:
        return None
    return outcome.cost


def _transition(
    made: Problem, steady: list[Extra], search_limit: int, work_limit: int
) -> tuple[Extra, int] | None:
    """A placement that fits every steady state: the transition it breaks, and by how much."""
    ordered = [made.cands[i] for i in made.order]
    outcome = _search(made, ordered, steady, search_limit, work_limit)
    if outcome.choice is None:
        return None
    picked = made.picked(outcome.choice)
    moves = [e for e in made.extras if e.kind == Shortfall.TRANSITION]
    return broken(moves, made.components, picked)
