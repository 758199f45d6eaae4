"""Ranks plan each against its own device (issue 31, item 3): one placement that fits every rank,
or, when none does, each rank its own (docs/planning.md "Ranks").

Pure: ``calibration.lifecycle.agree`` gathers every rank's inputs across processes and each rank
calls ``solve_ranks`` on the same list, so every rank computes the same answer. A rank's phases
keep its own bounds (measured on its own device) and are checked against its own device's usable
bytes, never the smallest device against the largest bound. A component present on some ranks
only is planned: in a common placement it is placed once for all ranks, counted on every rank's
device (a rank that lacks it keeps that room free: cautious); in per-rank placements, where it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import Enum

import attrs
from attrs import field, frozen

from artifact.limits import MAX_SEARCH_NODES, MAX_SEARCH_WORK
from calibration.plan.candidates import Candidate, recost
from calibration.plan.model import (
    Component,
    Device,
    Plan,
    PlanInputError,
    PlanLimitError,
    Target,
    most_cautious_device,
)
from calibration.plan.solver import check_inputs, explain, problem, search_problem, solve


def _components(value: Iterable[Component]) -> tuple[Component, ...]:
    return tuple(value)


def _targets(value: Iterable[Target]) -> tuple[Target, ...]:
    return tuple(value)


@frozen
class RankInputs:
    """What one rank plans from: its components, its targets (its own bounds), its device."""

    components: tuple[Component, ...] = field(converter=_components)
    targets: tuple[Target, ...] = field(converter=_targets)
    device: Device


class Agreement(str, Enum):
    """What the ranks agreed on; the value is how reports spell it."""

    COMMON = "common"  # one placement, fitting every rank
    PER_RANK = "per-rank"  # no one placement fits every rank: each rank its own
    NONE = "none"  # a rank fits nothing at all

    def __str__(self) -> str:
        return self.value


@frozen
class RankPlans:
    """Every rank's plan, in rank order: the same placement on each (``COMMON``) or each its own."""

    agreement: Agreement
    plans: tuple[Plan, ...]
    reason: str

    @property
    def feasible(self) -> bool:
        """Every rank has a plan that fits it."""
        return self.agreement != Agreement.NONE


def solve_ranks(
    ranks: Sequence[RankInputs],
    *,
    search_limit: int = MAX_SEARCH_NODES,
    work_limit: int = MAX_SEARCH_WORK,
) -> RankPlans:
    """One placement that fits every rank (the least transfer summed over the ranks), else the
    best placement of each rank on its own, else the reason a rank fits nothing."""
    if not ranks:
        raise PlanInputError("no rank to plan for")
    for rank in ranks:
        check_inputs(rank.components, rank.targets)
    common = _common(ranks, search_limit, work_limit)
    if common is not None and all(p.feasible for p in common):
        why = f"one placement fits every rank ({len(ranks)})"
        return RankPlans(Agreement.COMMON, common, why)
    own = tuple(
        solve(r.components, r.targets, r.device, search_limit=search_limit, work_limit=work_limit)
        for r in ranks
    )
    for number, plan in enumerate(own):
        if not plan.feasible:
            return RankPlans(Agreement.NONE, own, f"rank {number}: {plan.reason}")
    why = "no one placement fits every rank; each rank has its own, fitting its device"
    return RankPlans(Agreement.PER_RANK, own, why)


def _union(ranks: Sequence[RankInputs]) -> tuple[Component, ...] | None:
    """Every rank's components by name; None when a name means different weights on two ranks
    (sharded differently: no one placement can describe both)."""
    union: dict[str, Component] = {}
    for rank in ranks:
        for c in rank.components:
            if union.setdefault(c.name, c) != c:
                return None
    return tuple(union.values())


def _common(
    ranks: Sequence[RankInputs], search_limit: int, work_limit: int
) -> tuple[Plan, ...] | None:
    """The least-transfer placement that fits every rank's phases on its own device, explained
    rank by rank; None when there is none (or the ranks' components differ)."""
    components = _union(ranks)
    if components is None:
        return None
    usable: dict[str, int] = {}
    joint: list[Target] = []
    for number, rank in enumerate(ranks):
        for t in rank.targets:
            name = f"rank {number}/{t.name}"
            usable[name] = rank.device.usable_bytes
            joint.append(attrs.evolve(t, name=name))
    cautious = most_cautious_device([r.device for r in ranks])
    try:
        made = problem(components, joint, cautious, lambda t: usable[t.name])
    except PlanLimitError:  # too many ranks' targets at once: each rank plans its own
        return None
    choice, plan = search_problem(made, cautious, search_limit, work_limit)
    if choice is None:
        return None
    picked = dict(zip((c.name for c in components), made.picked(choice)))
    return tuple(_on_rank(rank, picked, plan) for rank in ranks)


def _on_rank(rank: RankInputs, picked: dict[str, Candidate], joint: Plan) -> Plan:
    """The common placement as one rank sees it: its components, its targets, its device."""
    own = [recost(c, picked[c.name], rank.targets) for c in rank.components]
    plan = explain(rank.components, own, rank.targets, rank.device, joint.nodes)
    if joint.proven:
        return attrs.evolve(plan, lower_bound_bytes=plan.transfer_bytes)
    return attrs.evolve(
        plan, reason=joint.reason, proven=False, stopped_by=joint.stopped_by, lower_bound_bytes=0
    )
