"""Pinned or pageable host copies under a pin budget (issue 31, item 6): the planner chooses per
component, checked against the brute force over every candidate and every pinned/pageable
choice (tests/calibration/plan_brute.py); a pin budget never makes a plan infeasible."""

from __future__ import annotations

from fractions import Fraction

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.plan import Component, Device, GiB, Phase, Target, solve
from tests.calibration.plan_brute import brute_force, brute_force_ties, objective

NAMES = ("a", "b", "c")


@st.composite
def pinned_problems(draw: st.DrawFn) -> tuple[list[Component], list[Target], Device]:
    """Up to 3 components of up to 3 layers in shared phases, a pin budget always, a factor."""
    components = []
    for name in NAMES[: draw(st.integers(1, 3))]:
        layers = draw(st.lists(st.integers(0, 30), max_size=3))
        components.append(Component(name, sum(layers) + draw(st.integers(0, 30)), layers))
    names = [c.name for c in components]
    phases = [
        Phase(
            f"p{i}", draw(st.integers(0, 40)), draw(st.lists(st.sampled_from(names), unique=True))
        )
        for i in range(draw(st.integers(1, 4)))
    ]
    uses = {c.name: draw(st.integers(1, 3)) for c in components}
    layer_uses = {c.name: tuple(draw(st.integers(0, 6)) for _ in c.layer_bytes) for c in components}
    target = Target("t", phases, uses, layer_uses)
    total = sum(c.weight_bytes for c in components)
    device = Device(
        draw(st.integers(0, total + 40)),
        reserve_bytes=0,
        pin_budget_bytes=draw(st.integers(0, total)),
        pageable_factor=draw(st.sampled_from([1.0, 1.25, 2.0, 2.5, 4.0])),
    )
    return components, [target], device


@settings(max_examples=300, deadline=None)
@given(pinned_problems())
def test_pinned_or_pageable_equals_the_brute_force(problem):
    components, targets, device = problem
    plan = solve(components, targets, device)
    best = brute_force(components, targets, device)
    unlimited = solve(components, targets, attrs.evolve(device, pin_budget_bytes=None))
    assert plan.feasible == (best is not None) == unlimited.feasible  # never "resident or fail"
    if best is None:
        return
    assert objective(plan) == best
    assert tuple(p.device_bytes for p in plan.placements) == brute_force_ties(
        components, targets, device
    )
    assert plan.pinned_bytes == sum(p.pinned_bytes for p in plan.placements)
    assert plan.pinned_bytes <= device.pin_budget_bytes
    for p in plan.placements:
        host = p.pinned_bytes + p.pageable_bytes
        assert host == next(c.weight_bytes for c in components if c.name == p.component) - (
            p.device_bytes
        )
        frontier = sum(
            next(c for c in components if c.name == p.component).layer_bytes[i]
            for i in p.pinned_layers
        )  # a pageable component's layers the budget left pins (test_pin_frontier.py)
        assert p.pageable_bytes == (host - frontier if p.pageable else 0)
    # the time the plan predicts is its objective over the link, less what the frontier saves
    whole = float(best) / device.bandwidth_bytes_per_s
    if not any(p.pinned_layers for p in plan.placements):
        assert plan.transfer_s == pytest.approx(whole)
    assert plan.transfer_s <= whole * (1 + 1e-9)
    assert objective(unlimited) <= best  # pins only ever help


def test_a_pin_budget_splits_components_between_pinned_and_pageable():
    """Two offloaded encoders of 4 and 6 GiB, 8 GiB of pins: the one moved more often (the 4 GiB
    one, 3 times a request) is pinned; the other pageable at 2.5x its pinned time."""
    small, large = Component("small", 4 * GiB), Component("large", 6 * GiB)
    phases = [Phase("one", 0, ["small"]), Phase("two", 0, ["large"])]
    target = Target("t", phases, uses={"small": 3, "large": 1})
    device = Device(7 * GiB, reserve_bytes=0, pin_budget_bytes=8 * GiB, pageable_factor=2.5)
    plan = solve([small, large], [target], device)
    a, b = plan.placement("small"), plan.placement("large")
    assert (a.kind, a.pageable, a.pinned_bytes) == ("offloaded", False, 4 * GiB)
    assert (b.kind, b.pageable, b.pageable_bytes) == ("offloaded", True, 6 * GiB)
    assert objective(plan) == 12 * GiB + Fraction(5, 2) * 6 * GiB
    assert plan.predicted("t").pageable_s == pytest.approx(2.5 * 6 * GiB / 25e9)


def test_the_most_conservative_placement_keeps_to_the_pin_budget():
    """The lifecycle's fallback offloads everything; with 5 GiB of pins for 10 GiB of host
    copies, the largest copies go pageable until the rest fit the budget."""
    from calibration.plan.solver import most_conservative

    comps = [Component("a", 6 * GiB), Component("b", 3 * GiB), Component("c", GiB)]
    target = Target("t", [Phase(c.name, 0, [c.name]) for c in comps])
    plan = most_conservative(comps, [target], Device(7 * GiB, 0, pin_budget_bytes=5 * GiB))
    assert [p.kind.value for p in plan.placements] == ["offloaded"] * 3
    assert [p.pageable for p in plan.placements] == [True, False, False]
    assert plan.pinned_bytes == 4 * GiB <= 5 * GiB
