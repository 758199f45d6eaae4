"""The grouped placement: a whole component group-offloaded, its block groups read from diffusers'
own hooks (one definition with calibration's ``group`` mode), planned, applied and undone for real
(tiny VAEs on the CPU), and its candidate as docs/planning.md says."""

from __future__ import annotations

import pytest
import torch

from calibration.examples.flux import build
from calibration.examples.tiny import tiny_vae
from calibration.placement.groups import group_nbytes, hooked_groups, is_block
from calibration.placement.mechanisms import GROUPED, Where, has_offload_hooks
from calibration.placement.pipeline import block_groups, nested_blocks, offload_groups
from calibration.placement.private import intercept_moves, offload_group
from calibration.plan import Component, Device, Phase, PlacementKind, Target, solve
from calibration.plan.candidates import candidates, needs_groups, offered
from calibration.plan.inputs import CalibrationFormatError, load_calibration
from tests.calibration.cli.test_plan import WEIGHTS, calibration_document

pytest.importorskip("accelerate")


def test_block_groups_are_the_groups_calibration_moves_and_leave_the_module_as_it_was():
    pipe = build(0)
    vae = pipe.vae
    own = {n: dict(m.__dict__) for n, m in vae.named_modules()}
    sizes = block_groups(vae)
    assert not has_offload_hooks(vae)
    assert {n: dict(m.__dict__) for n, m in vae.named_modules()} == own  # no attribute left
    offload_groups("cpu", {"vae": vae})  # calibration's group mode, the same module
    moved = [group_nbytes(g) for _, g in hooked_groups(vae) if is_block(g)]
    assert sizes == tuple(moved) and len(sizes) == 8  # encoder's 4 blocks, the decoder's 4
    total = sum(group_nbytes(g) for _, g in hooked_groups(vae))
    assert total == sum(p.numel() * p.element_size() for p in vae.parameters())


def test_decode_onloads_the_weights_outside_the_blocks_and_the_next_start_sends_them_home():
    vae = tiny_vae(0)  # with quant_conv and post_quant_conv: the top group a decode reads ...
    vae._group_offload_block_modules = None  # ... where the class names no blocks (CogVideoX's)
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = vae.decode(latents).sample
    cpu = torch.device("cpu")
    hook = GROUPED.install(vae, Where(cpu, cpu, block_modules=nested_blocks(vae)))
    top = offload_group(vae)
    assert hook is not None and top is not None
    assert top.modules == [vae.quant_conv, vae.post_quant_conv]
    moves: list[str] = []
    intercept_moves(top, lambda: moves.append("on"), lambda: moves.append("off"))
    with torch.no_grad():
        during = vae.decode(latents).sample  # diffusers' forward hook never sees a decode
    assert moves == ["on"]
    hook.offload()  # what ``Applied.offload_others`` calls when another component starts
    assert moves == ["on", "off"]
    GROUPED.remove(vae)
    assert not has_offload_hooks(vae)
    with torch.no_grad():
        after = vae.decode(latents).sample
    assert torch.equal(before, during) and torch.equal(before, after)


def _vae(groups: tuple[int, ...] = (30, 20, 10)) -> Component:
    return Component("vae", 100, group_bytes=groups)


def test_grouped_onloads_its_largest_group_and_everything_outside_them():
    vae = _vae()
    target = Target("t", (Phase("decode", 10, ("vae",)),))
    grouped = [c for c in candidates(vae, (target,)) if c.kind == PlacementKind.GROUPED]
    assert [(c.always, c.onload, c.cost, c.pinned) for c in grouped] == [(0, 70, 100, 100)]
    assert not [c for c in candidates(_vae(()), (target,)) if c.kind == PlacementKind.GROUPED]


def test_the_planner_offers_grouped_only_where_whole_it_does_not_fit_where_it_runs():
    target = Target("t", (Phase("decode", 10, ("vae",)),))
    assert not needs_groups(_vae(), [target], lambda _t: 110)  # 100 + 10: whole it fits
    assert needs_groups(_vae(), [target], lambda _t: 109)
    kinds = [c.kind for c in offered(_vae(), [target], lambda _t: 110)]
    assert PlacementKind.GROUPED not in kinds and PlacementKind.OFFLOADED in kinds
    whole = solve([_vae()], [target], Device(110, reserve_bytes=0))
    assert whole.placement("vae").kind == PlacementKind.RESIDENT
    two = Target("t", (Phase("encode", 0, ("te",)), Phase("decode", 10, ("vae",))))
    offloaded = solve([_vae(), Component("te", 50)], [two], Device(110, reserve_bytes=0))
    assert offloaded.placement("vae").kind == PlacementKind.OFFLOADED  # one copy, not groups
    grouped = solve([_vae()], [target], Device(80, reserve_bytes=0))
    p = grouped.placement("vae")
    assert (p.kind, p.onload_bytes, p.group_bytes, p.transfer_bytes) == (
        PlacementKind.GROUPED,
        70,
        (30, 20, 10),
        100,
    )
    assert not solve([_vae()], [target], Device(79, reserve_bytes=0)).feasible


def test_a_grouped_transformer_moves_everything_every_step():
    dit = Component("dit", 100, (40, 40), group_bytes=(40, 40))
    phases = (Phase("denoise", 0, ("dit",)), Phase("decode", 45))  # the decode: dit inactive
    target = Target("t", phases, layer_uses={"dit": (4, 4)})
    plan = solve([dit], [target], Device(75, reserve_bytes=0))
    p = plan.placement("dit")  # layerwise 0/2 keeps the rest (20) in every phase
    assert (p.kind, p.device_bytes, p.transfer_bytes) == (PlacementKind.LAYERWISE, 20, 4 * 80)
    plan = solve([dit], [target], Device(60, reserve_bytes=0))
    p = plan.placement("dit")  # grouped: nothing in the decode; 20 + a group of 40 in a step
    assert (p.kind, p.onload_bytes, p.transfer_bytes) == (PlacementKind.GROUPED, 60, 4 * 100)


def _document(groups: object) -> dict:
    doc = calibration_document()
    doc["group_bytes"] = groups
    return doc


def test_a_calibration_documents_block_groups_reach_the_planner():
    vae = WEIGHTS["vae"]
    cal = load_calibration(_document({"vae": [vae // 4, vae // 4]}))
    component = next(c for c in cal.components if c.name == "vae")
    assert component.group_bytes == (vae // 4, vae // 4)
    assert component.grouped_onload_bytes == vae - vae // 4


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ({"nowhere": [1]}, "group bytes for unknown components"),
        ({"vae": [WEIGHTS["vae"], 1]}, "block groups .* weigh more than the whole component"),
        ({"vae": [-1]}, "group_bytes"),
        ({"vae": [1.0]}, "group_bytes"),
        ({"vae": [1] * 100_001}, "group_bytes"),
    ],
)
def test_a_hostile_calibrations_block_groups_are_refused(groups, message):
    with pytest.raises(CalibrationFormatError, match=message):
        load_calibration(_document(groups))
