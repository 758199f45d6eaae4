"""Property tests: the solver equals brute force, its plans fit, and it is monotone in capacity."""

from __future__ import annotations

from fractions import Fraction

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.plan import Component, Device, Phase, Plan, Target, solve
from calibration.plan.candidates import candidates
from tests.calibration.plan_brute import brute_force, fits, objective

NAMES = ("a", "b", "c", "d")


@st.composite
def problems(draw: st.DrawFn) -> tuple[list[Component], list[Target], Device]:
    """Up to 4 components of up to 4 layers and 3 block groups, up to 2 targets of up to 4
    phases: brute-forceable."""
    count = draw(st.integers(1, 4))
    components = []
    for name in NAMES[:count]:
        layers = draw(st.lists(st.integers(0, 40), max_size=4))
        groups = draw(st.lists(st.integers(0, 40), max_size=3))
        rest = draw(st.integers(0, 40))
        weight = max(sum(layers), sum(groups)) + rest
        components.append(Component(name, weight, layers, group_bytes=groups))
    targets = []
    for t in range(draw(st.integers(1, 2))):
        phases = [
            Phase(
                f"p{i}",
                draw(st.integers(0, 60)),
                draw(st.lists(st.sampled_from(NAMES[:count]), max_size=count, unique=True)),
            )
            for i in range(draw(st.integers(0, 4)))
        ]
        uses = {c.name: draw(st.integers(0, 3)) for c in components}
        layer_uses = {
            c.name: tuple(draw(st.integers(0, 6)) for _ in c.layer_bytes) for c in components
        }
        targets.append(Target(f"t{t}", phases, uses, layer_uses, draw(st.integers(0, 2))))
    capacity = draw(st.integers(0, 250))
    pin = draw(st.none() | st.integers(0, 200))
    factor = draw(st.sampled_from([1.0, 1.5, 2.0, 2.25, 3.0]))  # exact in binary
    reserve = draw(st.integers(0, 20))
    return components, targets, Device(capacity, reserve, pin, pageable_factor=factor)


def _picked(plan, components, targets):
    """The candidate objects the plan chose, to check them against the definition."""
    out = []
    for c in components:
        p = plan.placement(c.name)
        match = [
            x
            for x in candidates(c, targets)
            if x.kind == p.kind and x.resident_layers == p.resident_layers
        ]
        assert len(match) == 1
        out.append(match[0])
    return out


@settings(max_examples=300, deadline=None)
@given(problems())
def test_solver_equals_brute_force_and_fits(problem):
    components, targets, device = problem
    plan = solve(components, targets, device)
    best = brute_force(components, targets, device)
    assert plan.feasible == (best is not None)
    if best is None:
        assert plan.reason and not plan.placements
        return
    assert objective(plan) == best
    picked = _picked(plan, components, targets)
    assert fits(components, picked, targets, device, [p.pageable for p in plan.placements])
    assert all(u.headroom_bytes >= 0 for u in plan.phases)
    if device.pin_budget_bytes is None:
        assert plan.transfer_bytes == best and not any(p.pageable for p in plan.placements)


def worse(plan: Plan) -> tuple[bool, Fraction]:
    """Plans in order of cost: any feasible plan before every infeasible one, then by objective
    (transfer, a pageable byte weighted by the device's factor)."""
    return (not plan.feasible, objective(plan) if plan.feasible else Fraction(0))


@settings(max_examples=200, deadline=None)
@given(problems(), st.integers(1, 100))
def test_more_capacity_never_worse(problem, extra):
    components, targets, device = problem
    small = solve(components, targets, device)
    big = solve(
        components,
        targets,
        attrs.evolve(device, capacity_bytes=device.capacity_bytes + extra),
    )
    assert worse(small) >= worse(big)


@settings(max_examples=200, deadline=None)
@given(problems(), st.data())
def test_less_headroom_never_makes_feasible(problem, data):
    components, targets, device = problem
    before = solve(components, targets, device)
    t = data.draw(st.integers(0, len(targets) - 1))
    phases = list(targets[t].phases) or [Phase("extra", 0)]
    i = data.draw(st.integers(0, len(phases) - 1))
    grown = Phase(
        phases[i].label,
        phases[i].bound_bytes + data.draw(st.integers(1, 100)),
        phases[i].active_components,
    )
    phases[i] = grown
    old = targets[t]
    tighter = list(targets)
    tighter[t] = Target(old.name, phases, old.uses, old.layer_uses, old.weight)
    after = solve(components, tighter, device)
    assert worse(after) >= worse(before)
