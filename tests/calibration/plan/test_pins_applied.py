"""Pins made as planned (issue 39, item 5): on a CUDA device the components planned pinned hold
pinned host copies after ``apply`` and pageable ones after ``undo``; on the CPU (torch's CPU build
cannot pin) a plan with pinned components applies, nothing is pinned, ``Applied`` says pinning
applies on CUDA only, and ``undo`` leaves every tensor as it was."""

from __future__ import annotations

import pytest

from calibration.core.weights import pipeline_bytes
from calibration.examples import EXAMPLES
from calibration.placement.pins import CUDA_ONLY, pin
from calibration.plan import Component, Device, Phase, Target
from calibration.plan.apply import apply
from calibration.plan.solver import most_conservative

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

FLUX = EXAMPLES["flux"]
STAGE = {"text_encoder": "text", "text_encoder_2": "text", "transformer": "denoise", "vae": "vae"}


def _offloaded_plan(pipe, pin_budget=None):
    """Every component offloaded or streamed, every host copy pinned (no pin budget) or, under
    ``pin_budget``, the copies that move most pinned."""
    weights, layers = pipeline_bytes(pipe, ("transformer",))
    components = [
        Component(n, w, tuple(layers.get(n, {}).values()), tuple(layers.get(n, {})))
        for n, w in weights.items()
    ]
    phases = [Phase(s, 0, [n for n in weights if STAGE.get(n) == s]) for s in set(STAGE.values())]
    target = Target("t", phases, layer_uses={"transformer": (1, 1)})
    device = Device(1 << 40, reserve_bytes=0, pin_budget_bytes=pin_budget)
    plan = most_conservative(components, [target], device)
    assert plan.feasible
    return plan


def _state(pipe):
    """Every tensor of every component: its device, pinned or not, and its values."""
    return {
        (name, tensor_name): (t.device, t.is_pinned(), t.detach().clone())
        for name, module in pipe.components.items()
        if isinstance(module, torch.nn.Module)
        for tensor_name, t in [*module.named_parameters(), *module.named_buffers()]
    }


def _same(before, after):
    assert before.keys() == after.keys()
    for key, (device, pinned, values) in before.items():
        assert after[key][:2] == (device, pinned), key
        assert torch.equal(after[key][2], values), key


def test_on_the_cpu_a_pinned_plan_applies_pins_nothing_and_says_why():
    pipe = FLUX.build(0)
    plan = _offloaded_plan(pipe)
    assert plan.placement("vae").pinned_bytes > 0  # planned pinned
    before = _state(pipe)
    applied = apply(plan, pipe, device="cpu", offload_device="cpu")
    assert applied.pinned_bytes == 0 and not applied.pins
    assert applied.pin_note == CUDA_ONLY
    assert not any(t.is_pinned() for t in pipe.vae.parameters())
    applied.undo()
    _same(before, _state(pipe))


def test_a_plan_with_nothing_pinned_has_no_note():
    pipe = FLUX.build(0)
    plan = _offloaded_plan(pipe, pin_budget=0)  # every host copy pageable
    assert plan.pinned_bytes == 0
    applied = apply(plan, pipe, device="cpu", offload_device="cpu")
    assert applied.pin_note == "" and applied.pinned_bytes == 0
    applied.undo()


def test_pinning_needs_an_accelerator_on_a_cpu_build():
    """Why the CPU pins nothing: torch's CPU build raises on ``pin_memory()``."""
    if torch.cuda.is_available():
        pytest.skip("a CUDA build can pin")
    with pytest.raises(RuntimeError):
        pin([torch.ones(2)])


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="pinning applies on CUDA only")


@cuda
def test_on_cuda_components_planned_pinned_are_pinned_until_undo():
    pipe = FLUX.build(0)
    plan = _offloaded_plan(pipe)
    before = _state(pipe)
    applied = apply(plan, pipe, device="cuda", offload_device="cpu")
    assert next(pipe.vae.parameters()).is_pinned()
    assert applied.pin_note == "" and applied.pinned_bytes == plan.pinned_bytes
    with torch.no_grad():  # a request onloads and offloads: the host copies stay pinned
        pipe(**FLUX.call_kwargs(0), num_inference_steps=1, height=32, width=32)
    applied.offload_all()
    assert next(pipe.vae.parameters()).is_pinned()
    assert next(pipe.text_encoder.parameters()).is_pinned()
    applied.undo()
    assert not next(pipe.vae.parameters()).is_pinned() and not applied.pins
    _same(before, _state(pipe))


@cuda
def test_on_cuda_pageable_components_are_not_pinned():
    pipe = FLUX.build(0)
    plan = _offloaded_plan(pipe, pin_budget=0)
    applied = apply(plan, pipe, device="cuda", offload_device="cpu")
    assert not next(pipe.vae.parameters()).is_pinned() and applied.pinned_bytes == 0
    applied.undo()


def test_host_copies_park_before_an_offload_and_release_to_pageable():
    """The copies' own logic on plain CPU tensors (a clone stands for the device copy)."""
    from calibration.placement.pins import HostCopies

    weight = torch.nn.Parameter(torch.arange(4.0), requires_grad=False)
    host = weight.data.clone()
    copies = HostCopies([(weight, host)])
    weight.data = weight.data + 1  # "onloaded" and changed there
    copies.park()
    assert weight.data.data_ptr() == host.data_ptr() and torch.equal(host, torch.arange(4.0) + 1)
    copies.release()
    assert weight.data.data_ptr() != host.data_ptr() and not copies.tensors
    assert torch.equal(weight.data, torch.arange(4.0) + 1)


def test_the_offload_hooks_park_into_the_host_copies(monkeypatch):
    """The wiring on the CPU, where a clone stands for ``pin_memory()`` (which needs CUDA): each
    offload of accelerate's hook and of diffusers' groups puts the tensors back in their copies."""
    from calibration.placement.groups import hooked_groups
    from calibration.plan import apply as applying

    monkeypatch.setattr(applying, "pinnable", lambda onload, offload: True)
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: self.clone())
    pipe = FLUX.build(0)
    before = _state(pipe)
    applied = apply(_offloaded_plan(pipe), pipe, device="cpu", offload_device="cpu")
    assert {k.component for k in applied.pins} == {
        "vae",
        "text_encoder",
        "text_encoder_2",
        "transformer",
    }
    held = {id(t): h for copies in applied.pins.values() for t, h in copies.tensors}
    vae = next(pipe.vae.parameters())
    assert vae.data.data_ptr() == held[id(vae)].data_ptr()
    vae.data = vae.data.clone()  # as an onload leaves it: the tensor off its host copy
    applied.offload_hooks["vae"].offload()
    assert vae.data.data_ptr() == held[id(vae)].data_ptr()
    block = pipe.transformer.get_submodule(applied.streamed["transformer"][0])
    weight = next(block.parameters())
    weight.data = weight.data.clone()
    for _, group in hooked_groups(block):
        group.offload_()
    assert weight.data.data_ptr() == held[id(weight)].data_ptr()
    applied.undo()
    assert not applied.pins and vae.data.data_ptr() != held[id(vae)].data_ptr()
    _same(before, _state(pipe))


def test_the_lifecycle_apply_step_says_pinning_applies_on_cuda_only():
    from tests.calibration.lifecycle_setup import lifecycle

    outcome, _ = lifecycle()
    step = outcome.report.step("apply")[0]
    assert step.detail.endswith(f"0 B pinned ({CUDA_ONLY})") and step.data["pinned_bytes"] == 0
