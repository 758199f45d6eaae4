"""The peer worker's scenarios the planner now expresses (issue 39, item 8): a phase that needs a
component's full weights (a LoRA load or fuse), host memory as an input, and the transition
budget (a streamed layer arriving must fit beside what is live then). Each scenario is checked
by hand, and the exact search against the brute force extended with the three constraints
(tests/calibration/plan_brute.py), ties included."""

from __future__ import annotations

import json

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.plan import (
    Component,
    Device,
    GiB,
    Phase,
    PlacementKind,
    Shortfall,
    Target,
    solve,
)
from calibration.plan.report import document
from calibration.plan.saved import read_plan
from calibration.plan.solver import most_conservative
from tests.calibration.plan_brute import brute_force, brute_force_ties, objective

# a DiT of 40 blocks of 0.5 GiB and a 4 GiB rest, a 9 GiB text encoder, a small VAE
DIT = Component.uniform("transformer", 24 * GiB, 40, GiB // 2)
TEXT = Component("text_encoder", 9 * GiB)
VAE = Component("vae", GiB // 4)
STEPS = {"transformer": (50,) * 40}


def _serving(*extra: Phase) -> Target:
    phases = [
        Phase("encode", GiB, ["text_encoder"]),
        Phase("denoise", 3 * GiB, ["transformer"]),
        Phase("decode", 2 * GiB, ["vae"]),
        *extra,
    ]
    return Target("steps=50", phases, layer_uses=STEPS)


def test_a_lora_load_needs_the_transformer_whole_so_it_is_not_streamed_past_the_phase():
    # on 24 GiB the transformer streams 22 of its 40 blocks; a LoRA fuse needs all 24 GiB of it
    # at once: with 1 GiB of workspace, 25 GiB does not fit the 24 GiB device: nothing fits
    streamed = solve([DIT, TEXT, VAE], [_serving()], Device(24 * GiB, reserve_bytes=0))
    assert streamed.placement("transformer").kind == PlacementKind.LAYERWISE
    lora = Phase("lora-fuse", GiB, whole_components=["transformer"])
    assert lora.active_components == ("transformer",)  # needed whole: active there too
    refused = solve([DIT, TEXT, VAE], [_serving(lora)], Device(24 * GiB, reserve_bytes=0))
    assert not refused.feasible and refused.shortfall == Shortfall.DEVICE
    assert refused.reason.startswith("phase steps=50/lora-fuse needs 1 GiB more")
    # with 0.2 GiB more than the fuse's 25 GiB the fuse fits, but only with the VAE (decoding
    # a hundred times a request, resident otherwise) off the device: it is re-placed
    room = Device(25 * GiB + GiB // 5, reserve_bytes=0)
    often = {"vae": 100}
    plain = solve([DIT, TEXT, VAE], [attrs.evolve(_serving(), uses=often)], room)
    assert plain.placement("vae").kind == PlacementKind.RESIDENT
    fits = solve([DIT, TEXT, VAE], [attrs.evolve(_serving(lora), uses=often)], room)
    assert fits.feasible and fits.placement("vae").kind == PlacementKind.OFFLOADED
    assert fits.placement("transformer").kind == PlacementKind.LAYERWISE  # streams to denoise
    fuse = next(u for u in fits.phases if u.label == "lora-fuse")
    assert fuse.weights_bytes == DIT.weight_bytes  # the whole transformer, nothing else
    assert fuse.headroom_bytes == GiB // 5
    assert fits.transfer_bytes >= plain.transfer_bytes  # the least at 25.2 GiB, fuse or not


def test_host_memory_bounds_the_host_copies_and_a_shortfall_names_the_host():
    device = Device(24 * GiB, reserve_bytes=0)
    free = solve([DIT, TEXT, VAE], [_serving()], device)
    assert free.host_bytes == sum(p.pinned_bytes + p.pageable_bytes for p in free.placements)
    assert free.host_bytes > 18 * GiB  # the text encoder (9 GiB) and 22 streamed blocks
    # every placement that fits 24 GiB keeps more than 1 GiB off the device: nothing fits
    short = solve([DIT, TEXT, VAE], [_serving()], attrs.evolve(device, host_memory_bytes=GiB))
    assert not short.feasible and short.shortfall == Shortfall.HOST
    assert short.reason.startswith("host memory 1 GiB is ")
    assert "--host-memory" in short.reason
    exact = attrs.evolve(device, host_memory_bytes=free.host_bytes)
    assert solve([DIT, TEXT, VAE], [_serving()], exact).host_bytes == free.host_bytes


def test_host_headroom_decides_which_component_leaves_the_device():
    # two 8-byte components, room on the device for one: the one used less leaves for the
    # host; with 7 B of host, neither can leave: nothing fits, and the reason names the host
    a = Component("often", 8)
    b = Component("rarely", 8)
    target = Target("t", [Phase("p", 0, ["often"])], uses={"often": 5, "rarely": 1})
    both = solve([a, b], [target], Device(8, reserve_bytes=0))
    assert both.placement("rarely").kind == PlacementKind.OFFLOADED
    host = solve([a, b], [target], Device(8, reserve_bytes=0, host_memory_bytes=7))
    assert not host.feasible and host.shortfall == Shortfall.HOST
    assert host.reason.startswith("host memory 7 B is 1 B short")


def test_the_pin_budget_stays_within_host_memory_and_pins_are_repacked():
    device = Device(24 * GiB, reserve_bytes=0, pin_budget_bytes=64 * GiB)
    free = solve([DIT, TEXT, VAE], [_serving()], device)
    assert free.pinned_bytes == free.host_bytes  # every host copy pinned within 64 GiB
    assert device.pins_allowed == 64 * GiB
    smaller = attrs.evolve(device, host_memory_bytes=free.host_bytes)
    assert smaller.pins_allowed == free.host_bytes  # the budget in force: within the host
    again = solve([DIT, TEXT, VAE], [_serving()], smaller)
    assert again.pinned_bytes <= free.host_bytes and again.host_bytes <= free.host_bytes
    # a tighter pin budget repacks the pins: the most moved copies keep them
    tight = solve([DIT, TEXT, VAE], [_serving()], attrs.evolve(smaller, pin_budget_bytes=10 * GiB))
    assert tight.pinned_bytes <= 10 * GiB < free.pinned_bytes
    assert tight.placement("transformer").pinned_bytes > 0  # 50 calls a block: pinned first


def test_a_streamed_layer_that_fits_the_steady_state_but_not_its_arrival_is_re_placed():
    # denoise's peak beyond the weights is 3 GiB, but at the moment a block arrives 12 GiB are
    # live (staging copies, caches): the encode phase no longer binds, the arrival does
    steady = solve([DIT, TEXT, VAE], [_serving()], Device(24 * GiB, reserve_bytes=0))
    moving = Phase("denoise", 3 * GiB, ["transformer"], transition_bytes=12 * GiB)
    phases = [p if p.label != "denoise" else moving for p in _serving().phases]
    target = Target("steps=50", phases, layer_uses=STEPS)
    plan = solve([DIT, TEXT, VAE], [target], Device(24 * GiB, reserve_bytes=0))
    assert plan.feasible
    kept = len(plan.placement("transformer").resident_layers)
    assert kept < len(steady.placement("transformer").resident_layers)
    use = next(u for u in plan.phases if u.label == "denoise")
    assert use.transition_headroom_bytes is not None and use.transition_headroom_bytes >= 0
    assert use.transition_headroom_bytes == use.headroom_bytes - 9 * GiB
    assert plan.placement("transformer").binding_phase == "steps=50/encode"
    assert objective(plan) == brute_force([DIT, TEXT, VAE], [target], plan.device)
    # when no placement's arrival fits, the reason says the transition
    tiny = Phase("denoise", 10, ["t"], transition_bytes=60)
    small = Component.uniform("t", 100, 4, 20)
    refused = solve([small], [Target("x", [tiny])], Device(80, reserve_bytes=0))
    assert not refused.feasible and refused.shortfall == Shortfall.TRANSITION
    assert refused.reason.startswith("phase x/denoise: every placement that fits its steady")


def test_the_fallback_says_when_its_host_copies_overflow_the_host():
    device = Device(24 * GiB, reserve_bytes=0, host_memory_bytes=GiB)
    plan = most_conservative([DIT, TEXT, VAE], [_serving()], device)
    assert "host" in plan.reason


NAMES = ("a", "b", "c")


@st.composite
def problems(draw: st.DrawFn) -> tuple[list[Component], list[Target], Device]:
    """Up to 3 components of up to 3 layers; phases with whole components and transition bytes;
    a host memory, a pin budget: brute-forceable."""
    count = draw(st.integers(1, 3))
    components = []
    for name in NAMES[:count]:
        layers = draw(st.lists(st.integers(0, 30), max_size=3))
        components.append(Component(name, sum(layers) + draw(st.integers(0, 30)), layers))
    targets = []
    for t in range(draw(st.integers(1, 2))):
        phases = []
        for i in range(draw(st.integers(0, 3))):
            active = draw(st.lists(st.sampled_from(NAMES[:count]), max_size=count, unique=True))
            whole = draw(st.lists(st.sampled_from(NAMES[:count]), max_size=2, unique=True))
            bound = draw(st.integers(0, 40))
            moves = draw(st.none() | st.integers(0, 80))
            phases.append(Phase(f"p{i}", bound, active, whole, moves))
        layer_uses = {
            c.name: tuple(draw(st.integers(0, 5)) for _ in c.layer_bytes) for c in components
        }
        uses = {c.name: draw(st.integers(0, 3)) for c in components}
        targets.append(Target(f"t{t}", phases, uses, layer_uses, draw(st.integers(0, 2))))
    device = Device(
        draw(st.integers(0, 200)),
        draw(st.integers(0, 10)),
        draw(st.none() | st.integers(0, 150)),
        pageable_factor=draw(st.sampled_from([1.0, 1.5, 2.0])),
        host_memory_bytes=draw(st.none() | st.integers(0, 150)),
    )
    return components, targets, device


@settings(max_examples=400, deadline=None)
@given(problems())
def test_the_search_equals_the_brute_force_with_the_three_constraints(problem):
    components, targets, device = problem
    plan = solve(components, targets, device)
    best = brute_force(components, targets, device)
    assert plan.feasible == (best is not None), plan.reason
    if best is None:
        assert plan.shortfall is not None or plan.reason.startswith("each phase fits")
        return
    assert objective(plan) == best
    assert all(u.headroom_bytes >= 0 for u in plan.phases)
    assert all((u.transition_headroom_bytes or 0) >= 0 for u in plan.phases)
    host = device.host_memory_bytes
    assert host is None or plan.host_bytes <= host
    if device.pin_budget_bytes is None:
        ties = brute_force_ties(components, targets, device)
        assert ties == tuple(p.device_bytes for p in plan.placements)


def test_a_saved_plan_keeps_its_host_memory_and_refuses_an_integral_float(tmp_path):
    small = Component.uniform("t", 100, 4, 20)
    target = Target("x", [Phase("d", 10, ["t"], transition_bytes=15)])
    plan = solve([small], [target], Device(80, reserve_bytes=0, host_memory_bytes=70))
    doc = document(plan, [small])
    assert doc["phases"][0]["transition_headroom_bytes"] == 5
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert read_plan(path).plan.device.host_memory_bytes == 70
    doc["device"]["host_memory_bytes"] = 1.0
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ValueError, match="device.host_memory_bytes: expected integer or null"):
        read_plan(path)
