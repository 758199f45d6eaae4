"""Hand-computed plans: each candidate kind, the reserve, the pin budget, ranks, target sets,
ties.
"""

from __future__ import annotations

import pytest

from calibration.plan import (
    Component,
    Device,
    GiB,
    Phase,
    PlanInputError,
    Target,
    allocator_margin,
    most_cautious_device,
    most_cautious_targets,
    solve,
)


def test_allocator_margin_matches_the_probe_formula():
    assert allocator_margin(16 * GiB) == GiB  # 2 % is 0.32 GiB: the 1 GiB floor wins
    assert allocator_margin(100 * GiB) == 2 * GiB
    assert allocator_margin(80 * GiB) == 1717986919  # 1717986918.4, rounded up


def _denoiser(layer_uses: int = 5) -> tuple[Component, Target]:
    """10 layers of 1 GiB, no rest; one phase of 1 GiB activations."""
    comp = Component.uniform("transformer", 10 * GiB, 10, GiB)
    target = Target(
        "default",
        [Phase("stage:DenoisingStage", GiB, ["transformer"])],
        layer_uses={"transformer": (layer_uses,) * 10},
    )
    return comp, target


def test_resident_when_everything_fits():
    comp, target = _denoiser()
    plan = solve([comp], [target], Device(12 * GiB, reserve_bytes=0))
    p = plan.placement("transformer")
    assert (plan.feasible, p.kind, p.transfer_bytes, p.binding_phase) == (True, "resident", 0, None)
    assert plan.phases[0].headroom_bytes == GiB  # 12 - 10 weights - 1 activations


def test_layerwise_keeps_as_many_layers_as_fit_beside_the_buffer():
    comp, target = _denoiser()
    # usable 7 GiB: 1 GiB activations + 1 GiB streaming buffer + 5 resident layers
    plan = solve([comp], [target], Device(7 * GiB, reserve_bytes=0))
    p = plan.placement("transformer")
    assert p.kind == "layerwise" and p.resident_layers == (0, 1, 2, 3, 4)
    assert p.device_bytes == 5 * GiB and p.onload_bytes == GiB and p.pinned_bytes == 5 * GiB
    assert p.transfer_bytes == 5 * GiB * 5  # 5 streamed layers x 5 calls each
    assert plan.phases[0].headroom_bytes == 0
    assert p.binding_phase == "default/stage:DenoisingStage" and p.missing_bytes == 4 * GiB


def test_layerwise_keeps_the_most_used_layers():
    comp = Component("t", 3 * GiB, (GiB, GiB, GiB))
    target = Target("d", [Phase("p", 0, ["t"])], layer_uses={"t": (1, 9, 3)})
    plan = solve([comp], [target], Device(3 * GiB - 1, reserve_bytes=0))
    p = plan.placement("t")
    assert p.resident_layers == (1,)  # 2 GiB: layer 1 kept, buffer 1 GiB
    assert p.transfer_bytes == GiB * (1 + 3)


def test_offloaded_whole_when_cheaper_than_streaming():
    # usable 12 GiB; all resident, denoising needs 8 + 2 + 3 = 13: something must give
    text = Component("text_encoder", 2 * GiB)
    transformer = Component.uniform("transformer", 8 * GiB, 8, GiB)
    target = Target(
        "default",
        [Phase("text", GiB, ["text_encoder"]), Phase("denoise", 3 * GiB, ["transformer"])],
        layer_uses={"transformer": (100,) * 8},
    )
    plan = solve([text, transformer], [target], Device(12 * GiB, reserve_bytes=0))
    assert plan.placement("transformer").kind == "resident"
    text_place = plan.placement("text_encoder")
    assert text_place.kind == "offloaded" and text_place.transfer_bytes == 2 * GiB
    assert plan.transfer_s == pytest.approx(2 * GiB / 25e9)
    headroom = {u.label: u.headroom_bytes for u in plan.phases}
    assert headroom == {"text": GiB, "denoise": GiB}  # 12 - (8 + 2 + 1), 12 - (8 + 3)
    assert text_place.binding_phase == "default/denoise" and text_place.missing_bytes == GiB


def test_the_default_reserve_is_the_allocator_margin():
    comp = Component("vae", 15 * GiB)
    target = Target("d", [Phase("decode", 0, ["vae"])])
    assert solve([comp], [target], Device(16 * GiB)).placement("vae").kind == "resident"
    too_big = Component("vae", 15 * GiB + 1)
    plan = solve([too_big], [target], Device(16 * GiB))
    assert not plan.feasible
    assert "phase d/decode needs 1 B more" in plan.reason
    assert "reserve 1 GiB" in plan.reason


def test_pin_budget_pins_what_it_can_and_the_rest_is_pageable_never_refused():
    comp, target = _denoiser()
    device = Device(7 * GiB, reserve_bytes=0, pin_budget_bytes=5 * GiB)
    p = solve([comp], [target], device).placement("transformer")
    assert (p.pinned_bytes, p.pageable_bytes, p.pageable) == (5 * GiB, 0, False)
    # 4 GiB of pins for 5 streamed layers: the host copy is pageable, 2x slower per byte, but
    # for the 4 layers the budget's frontier pins (docs/planning.md "Pins per range of layers")
    tight = Device(7 * GiB, reserve_bytes=0, pin_budget_bytes=4 * GiB, pageable_factor=2.0)
    plan = solve([comp], [target], tight)
    p = plan.placement("transformer")
    assert plan.feasible and len(p.resident_layers) == 5
    assert (p.pinned_bytes, p.pageable_bytes, p.pageable) == (4 * GiB, GiB, True)
    assert len(p.pinned_layers) == 4 and not set(p.pinned_layers) & set(p.resident_layers)
    pinned, pageable = 20 * GiB, 5 * GiB  # each streamed layer moves 5 GiB a request
    assert p.transfer_bytes == 25 * GiB
    assert p.transfer_s == pytest.approx((pinned + 2 * pageable) / 25e9)


def test_ranks_agree_on_the_most_cautious_report():
    device = most_cautious_device(
        [Device(80 * GiB), Device(24 * GiB, pin_budget_bytes=GiB), Device(48 * GiB)]
    )
    assert device.capacity_bytes == 24 * GiB and device.reserve == GiB
    assert device.pin_budget_bytes == GiB
    rank0 = [Target("d", [Phase("p", 3, ["a"]), Phase("q", 9, ["a"])], {"a": 1}, {"a": (4,)})]
    rank1 = [Target("d", [Phase("p", 5, ["a", "b"])], {"a": 2}, {"a": (2,)})]
    (merged,) = most_cautious_targets([rank0, rank1])
    by_label = {p.label: p for p in merged.phases}
    assert by_label["p"].bound_bytes == 5 and by_label["p"].active_components == ("a", "b")
    assert by_label["q"].bound_bytes == 9
    assert merged.uses["a"] == 2 and merged.layer_uses["a"] == (4,)


def test_a_set_of_targets_is_planned_at_once():
    comp = Component.uniform("transformer", 10 * GiB, 10, GiB)
    small = Target(
        "default", [Phase("denoise", GiB, ["transformer"])], layer_uses={"transformer": (4,) * 10}
    )
    large = Target(
        "largest",
        [Phase("denoise", 3 * GiB, ["transformer"])],
        layer_uses={"transformer": (6,) * 10},
    )
    device = Device(9 * GiB, reserve_bytes=0)
    alone = solve([comp], [small], device).placement("transformer")
    both = solve([comp], [small, large], device)
    assert alone.resident_layers == tuple(range(7))  # 1 + 1 buffer + 7
    p = both.placement("transformer")
    assert p.resident_layers == tuple(range(5))  # the largest shape: 3 + 1 + 5
    assert p.transfer_bytes == 5 * GiB * (4 + 6)  # the sum over targets (weight 1 each)
    assert {u.target for u in both.phases} == {"default", "largest"}


def test_ties_keep_the_most_used_component_resident():
    # offloading either costs 8 GiB per request; a is used twice per byte as often as b
    a = Component("a", 4 * GiB)
    b = Component("b", 8 * GiB)
    phases = [Phase("pa", 0, ["a"]), Phase("pb", 0, ["b"]), Phase("between", GiB)]
    target = Target("d", phases, uses={"a": 2, "b": 1})
    plan = solve([b, a], [target], Device(12 * GiB, reserve_bytes=0))
    assert plan.transfer_bytes == 8 * GiB
    assert plan.placement("a").kind == "resident" and plan.placement("b").kind == "offloaded"


def test_unused_components_stay_resident_when_they_fit():
    idle = Component("safety_checker", GiB)
    plan = solve([idle], [Target("d", [Phase("p", 0, [])])], Device(2 * GiB, reserve_bytes=0))
    assert plan.placement("safety_checker").kind == "resident"


def test_inputs_that_describe_no_problem_are_typed_errors():
    comp = Component("a", 1)
    with pytest.raises(PlanInputError, match="unknown component 'b'"):
        solve([comp], [Target("d", [Phase("p", 0, ["b"])])], Device(GiB))
    with pytest.raises(PlanInputError, match="listed twice"):
        solve([comp, comp], [Target("d", [])], Device(GiB))
    with pytest.raises(PlanInputError, match="weigh more"):
        Component("a", 1, (2,))
    with pytest.raises(PlanInputError, match="int >= 0"):
        Phase("p", -1)


def test_planning_imports_no_torch():
    import subprocess
    import sys

    code = (
        "import sys, calibration.plan, calibration.plan.inputs, calibration.cli.plan; "
        "print('torch' in sys.modules or 'diffusers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
