"""Pins per range of layers: with a pin budget smaller than a streamed component, the most used of
its streamed layers are pinned (a frontier from the most used down), the rest pageable, and the
predicted transfer takes each at its rate (the peer's frontier scenario); checked against a brute
force over every choice of layers (equal sizes) and over every frontier (unequal sizes)."""

from __future__ import annotations

import itertools
import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calibration.plan import Component, Device, Phase, PlacementKind, Target, solve
from calibration.plan.frontier import ranges
from calibration.plan.report import document
from calibration.plan.saved import PlanFileError, read_plan

BANDWIDTH = 1000.0


def _streamed_dit(calls: tuple[int, ...], size: int = 100, rest: int = 50) -> tuple:
    """A transformer whose every block streams (room for its rest and one block only)."""
    dit = Component("transformer", rest + size * len(calls), (size,) * len(calls))
    target = Target("t", (Phase("denoise", 10, ("transformer",)),), {}, {"transformer": calls})
    return dit, target


def test_the_most_used_streamed_blocks_are_pinned_first():
    # FLUX-like: the double-stream blocks (2, 3) run three times as often as the others
    dit, target = _streamed_dit((1, 1, 3, 3, 2, 2, 1, 1))
    device = Device(160, reserve_bytes=0, pin_budget_bytes=250, bandwidth_bytes_per_s=BANDWIDTH)
    plan = solve([dit], [target], device)
    p = plan.placement("transformer")
    assert p.kind is PlacementKind.LAYERWISE and p.resident_layers == ()
    assert p.pageable and p.pinned_layers == (2, 3)  # 2 blocks fit 250 B: the most called
    assert (p.pinned_bytes, p.pageable_bytes, plan.pinned_bytes) == (200, 600, 200)
    pinned_moved, pageable_moved = 100 * (3 + 3), 100 * (1 + 1 + 2 + 2 + 1 + 1)
    assert p.transfer_s == pytest.approx((pinned_moved + 2 * pageable_moved) / BANDWIDTH)
    (time,) = plan.times
    assert time.transfer_s == pytest.approx(p.transfer_s)
    assert time.pageable_s == pytest.approx(2 * pageable_moved / BANDWIDTH)
    # next: the two called twice (4, 5); a budget for 3 blocks takes the first of them
    wider = solve([dit], [target], Device(160, reserve_bytes=0, pin_budget_bytes=300))
    assert wider.placement("transformer").pinned_layers == (2, 3, 4)
    assert ranges(wider.placement("transformer").pinned_layers) == "2-4"


def test_a_saved_plan_keeps_its_pinned_range(tmp_path):
    dit, target = _streamed_dit((1, 1, 3, 3, 2, 2, 1, 1))
    plan = solve([dit], [target], Device(160, reserve_bytes=0, pin_budget_bytes=250))
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(document(plan, [dit])))
    assert read_plan(path).plan.placement("transformer").pinned_layers == (2, 3)


def _transfer_s(
    components: list[Component], plan, target: Target, pins: dict[str, set[int]]
) -> float:
    """The plan's transfer time were ``pins`` the pinned layers of its pageable components."""
    factor = plan.device.pageable_factor
    total = 0.0
    for c, p in zip(components, plan.placements, strict=True):
        if not p.pageable or p.kind is not PlacementKind.LAYERWISE:
            total += p.transfer_s
            continue
        calls = target.layer_uses[c.name]
        streamed = set(range(p.layers)) - set(p.resident_layers)
        for i in streamed:
            rate = 1.0 if i in pins.get(c.name, set()) else factor
            total += c.layer_bytes[i] * calls[i] * rate / plan.device.bandwidth_bytes_per_s
    return total


def _streamed(components, plan) -> list[tuple[str, int, int]]:
    """(component, layer, bytes) of every streamed layer of a pageable layerwise placement."""
    return [
        (c.name, i, c.layer_bytes[i])
        for c, p in zip(components, plan.placements, strict=True)
        if p.pageable and p.kind is PlacementKind.LAYERWISE
        for i in sorted(set(range(p.layers)) - set(p.resident_layers))
    ]


def _left(plan) -> int:
    """The pin budget the search's own placements leave (pinned whole)."""
    whole = sum(p.pinned_bytes for p in plan.placements if not p.pageable)
    return (plan.device.pin_budget_bytes or 0) - whole


def _instance(draw, sizes):
    n = draw(st.integers(1, 2))
    components, calls = [], {}
    for k in range(n):
        layers = draw(st.integers(1, 5))
        layer_sizes = tuple(draw(sizes) for _ in range(layers))
        rest = draw(st.integers(0, 20))
        components.append(Component(f"c{k}", rest + sum(layer_sizes), layer_sizes))
        calls[f"c{k}"] = tuple(draw(st.sampled_from([0, 1, 2, 3, 4, 6])) for _ in range(layers))
    names = tuple(c.name for c in components)
    bound = draw(st.integers(0, 20))
    target = Target("t", (Phase("p", bound, names),), {}, calls)
    # room for every rest and one streamed layer each, and some more: most layers stream
    rests = sum(c.weight_bytes - sum(c.layer_bytes) for c in components)
    least = bound + rests + sum(max(c.layer_bytes) for c in components)
    device = Device(
        least + draw(st.integers(0, 120)),
        reserve_bytes=0,
        pin_budget_bytes=draw(st.integers(0, sum(sum(c.layer_bytes) for c in components))),
        bandwidth_bytes_per_s=BANDWIDTH,
        pageable_factor=draw(st.sampled_from([1.5, 2.0, 3.0])),
    )
    return components, target, device


@st.composite
def equal_layers(draw):
    return _instance(draw, st.just(draw(st.integers(1, 40))))


@st.composite
def any_layers(draw):
    return _instance(draw, st.integers(1, 40))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(equal_layers())
def test_with_equal_layers_no_choice_of_layers_saves_more_than_the_frontier(instance):
    components, target, device = instance
    plan = solve(components, [target], device)
    if not plan.feasible:
        return
    streamed, left = _streamed(components, plan), _left(plan)
    frontier = {p.component: set(p.pinned_layers) for p in plan.placements}
    assert sum(p.pinned_bytes for p in plan.placements) <= (device.pin_budget_bytes or 0)
    assert plan.transfer_s == pytest.approx(_transfer_s(components, plan, target, frontier))
    best = plan.transfer_s
    for r in range(len(streamed) + 1):
        for chosen in itertools.combinations(streamed, r):
            if sum(size for _, _, size in chosen) <= left:
                pins: dict[str, set[int]] = {}
                for name, i, _ in chosen:
                    pins.setdefault(name, set()).add(i)
                best = min(best, _transfer_s(components, plan, target, pins))
    assert plan.transfer_s == pytest.approx(best)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_layers())
def test_the_frontier_is_the_longest_range_from_the_most_used_down_that_fits(instance):
    components, target, device = instance
    plan = solve(components, [target], device)
    if not plan.feasible:
        return
    calls = target.layer_uses
    ordered = sorted(
        _streamed(components, plan),
        key=lambda s: (-calls[s[0]][s[1]], [c.name for c in components].index(s[0]), s[1]),
    )
    ordered = [s for s in ordered if calls[s[0]][s[1]] > 0]  # a layer never called: no saving
    fits = [k for k in range(len(ordered) + 1) if sum(s[2] for s in ordered[:k]) <= _left(plan)]
    chosen = {(name, i) for name, i, _ in ordered[: max(fits)]}
    pinned = {(p.component, i) for p in plan.placements for i in p.pinned_layers}
    assert pinned == chosen


@pytest.mark.parametrize(
    ("pinned", "says"),
    [([8], "pinned_layers[0]: 8 is not a layer index"), ([3, 2], "pinned_layers[1]: 2")],
)
def test_a_saved_plan_with_pinned_layers_out_of_range_is_refused_by_name(tmp_path, pinned, says):
    dit, target = _streamed_dit((1, 1, 3, 3, 2, 2, 1, 1))
    doc = document(solve([dit], [target], Device(160, reserve_bytes=0, pin_budget_bytes=250)))
    doc["components"][0]["pinned_layers"] = pinned
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(PlanFileError, match=re.escape(says)):
        read_plan(path)


def test_a_saved_plan_pinning_a_resident_layer_is_refused(tmp_path):
    dit, target = _streamed_dit((1, 1, 3, 3, 2, 2, 1, 1))
    doc = document(solve([dit], [target], Device(260, reserve_bytes=0, pin_budget_bytes=250)))
    kept = doc["components"][0]["resident_layers"]
    assert kept  # one block stays on the device
    doc["components"][0]["pinned_layers"] = kept
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(PlanFileError, match="pinned_layers: only a layerwise component's streamed"):
        read_plan(path)
