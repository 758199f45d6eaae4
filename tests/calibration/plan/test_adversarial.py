"""Adversarial instances for the exact search: many streamable components, uneven layers, tied
densities (knapsack ties), phases shared by several components, pin budgets; brute force decides,
ties included."""

from __future__ import annotations

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.plan import Component, Device, Phase, Target, solve
from calibration.plan import search as plan_search
from tests.calibration.plan_brute import brute_force, brute_force_ties, objective

NAMES = ("a", "b", "c", "d", "e")


@st.composite
def layered(draw: st.DrawFn) -> tuple[list[Component], list[Target], Device]:
    """Up to 5 components of 1-4 layers each (sizes from a few values, so sums collide; some in
    block groups, one a layer as a transformer's), uses from {0, 1, 2} (densities tie), phases
    over one to three components, an optional pin budget."""
    count = draw(st.integers(2, 5))
    names = NAMES[:count]
    components = []
    for name in names:
        layers = draw(st.lists(st.sampled_from([1, 2, 3, 5, 8]), min_size=1, max_size=4))
        groups = layers if draw(st.booleans()) else []
        rest = draw(st.integers(0, 3))
        components.append(Component(name, sum(layers) + rest, layers, group_bytes=groups))
    targets = []
    for t in range(draw(st.integers(1, 2))):
        phases = [
            Phase(
                f"p{i}",
                draw(st.integers(0, 12)),
                draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True)),
            )
            for i in range(draw(st.integers(1, 4)))
        ]
        uses = {c.name: draw(st.integers(0, 2)) for c in components}
        layer_uses = {
            c.name: tuple(draw(st.sampled_from([0, 1, 2, 2])) for _ in c.layer_bytes)
            for c in components
        }
        targets.append(Target(f"t{t}", phases, uses, layer_uses, draw(st.integers(1, 2))))
    total = sum(c.weight_bytes for c in components)
    capacity = draw(st.integers(total // 3, total + 12))
    pin = draw(st.none() | st.integers(0, total))
    return components, targets, Device(capacity, reserve_bytes=0, pin_budget_bytes=pin)


@settings(max_examples=150, deadline=None)
@given(layered())
def test_search_is_exact_on_knapsack_ties_and_breaks_ties_as_documented(problem):
    components, targets, device = problem
    plan = solve(components, targets, device)
    expected = brute_force_ties(components, targets, device)
    assert plan.feasible == (expected is not None)
    if expected is None:
        return
    assert objective(plan) == brute_force(components, targets, device)
    assert tuple(p.device_bytes for p in plan.placements) == expected
    assert all(u.headroom_bytes >= 0 for u in plan.phases)
    if device.pin_budget_bytes is not None:
        assert plan.pinned_bytes <= device.pin_budget_bytes


@settings(max_examples=60, deadline=None)
@given(st.integers(3, 6), st.integers(0, 2**32 - 1))
def test_uniform_components_each_in_its_own_phase(count, seed):
    """The bench's shape, small: every component streamable, each bound to its own phase."""
    import random

    rng = random.Random(seed)
    components, layer_uses, phases = [], {}, []
    for i in range(count):
        size = rng.choice([2, 3, 4, 6])
        layers = rng.randint(1, 3)
        components.append(
            Component.uniform(f"c{i}", size * layers + rng.randint(0, 2), layers, size)
        )
        layer_uses[f"c{i}"] = (rng.choice([1, 2, 5]),) * layers
        phases.append(Phase(f"p{i}", rng.randint(0, 6), [f"c{i}"]))
    target = Target("t", phases, layer_uses=layer_uses)
    total = sum(c.weight_bytes for c in components)
    device = Device(rng.randint(total // 4, total + 6), reserve_bytes=0)
    plan = solve(components, [target], device)
    expected = brute_force_ties(components, [target], device)
    assert plan.feasible == (expected is not None)
    if expected is not None:
        assert tuple(p.device_bytes for p in plan.placements) == expected


@settings(max_examples=100, deadline=None)
@given(layered())
def test_groups_checked_whole_stay_exact(problem):
    """Groups with too many onload sums for ceilings are checked as they are: still exact."""
    components, targets, device = problem
    saved = plan_search._MAX_CEILINGS
    plan_search._MAX_CEILINGS = 1  # every group with a member goes whole
    try:
        plan = solve(components, targets, device)
    finally:
        plan_search._MAX_CEILINGS = saved
    expected = brute_force_ties(components, targets, device)
    assert plan.feasible == (expected is not None)
    if expected is not None:
        assert tuple(p.device_bytes for p in plan.placements) == expected


def test_the_search_is_bounded_and_says_so_past_its_node_limit():
    """Uneven layers in a ring of shared phases: the same inputs solve under the default limit;
    below the nodes they need the search stops (never runs on) and says so: with the greedy pass's
    placement, unproven, or the typed PlanLimitError when that pass finds none either."""
    import random

    import pytest

    from calibration.plan import PlanInputError, PlanLimitError

    rng = random.Random(7)
    components, layer_uses, phases = [], {}, []
    for i in range(6):
        sizes = tuple(rng.randint(2, 9) for _ in range(8))
        components.append(Component(f"c{i}", sum(sizes), sizes))
        layer_uses[f"c{i}"] = tuple(rng.randint(1, 9) for _ in range(8))
        phases.append(Phase(f"p{i}", rng.randint(0, 6), [f"c{i}", f"c{(i + 1) % 6}"]))
    target = Target("t", phases, layer_uses=layer_uses)
    device = Device(sum(c.weight_bytes for c in components) // 2, reserve_bytes=0)
    plan = solve(components, [target], device)
    assert plan.feasible and plan.nodes > 20
    stopped = solve(components, [target], device, search_limit=20)
    assert not stopped.proven and "visited 21 nodes without finishing" in stopped.reason
    no_pins = solve(components, [target], attrs.evolve(device, pin_budget_bytes=0))
    assert no_pins.feasible and no_pins.pinned_bytes == 0  # every host copy pageable
    assert all(p.pageable for p in no_pins.placements if p.kind != "resident")
    a, b = Component("a", 10, (1, 1)), Component("b", 5)  # the pass keeps 8 B of a: b overflows
    one = [Target("t", [Phase("pa", 0, ["a"]), Phase("pb", 0, ["b"])])]
    with pytest.raises(PlanLimitError, match="visited 1 nodes without finishing") as caught:
        solve([a, b], one, Device(10, reserve_bytes=0), search_limit=0)
    assert isinstance(caught.value, PlanInputError)
