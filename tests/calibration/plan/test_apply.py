"""Applying a plan to a real tiny diffusers pipeline (CPU): the same images, the hooks in place."""

from __future__ import annotations

import pytest

from calibration.core.weights import pipeline_bytes
from calibration.examples import EXAMPLES
from calibration.plan import Component, Device, Phase, Target, solve
from calibration.plan.apply import PlanApplyError, apply, placements_by_kind

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

FLUX = EXAMPLES["flux"]
SHAPE = {"num_inference_steps": 2, "height": 64, "width": 64}


def _run(pipe):
    with torch.no_grad():
        return pipe(**FLUX.call_kwargs(0), **SHAPE).images


def _mixed_plan(pipe):
    """A plan with every kind: the transformer streams one of its two blocks, the text encoders
    are offloaded whole, the VAE stays (a device just too small for more)."""
    weights, layers = pipeline_bytes(pipe, ("transformer",))
    components = [
        Component(n, w, tuple(layers.get(n, {}).values()), tuple(layers.get(n, {})))
        for n, w in weights.items()
    ]
    stage = {
        "text_encoder": "text",
        "text_encoder_2": "text",
        "transformer": "denoise",
        "vae": "decode",
    }
    phases = [
        Phase(s, 0, [n for n in weights if stage.get(n) == s])
        for s in ("text", "denoise", "decode")
    ]
    target = Target("t", phases, layer_uses={"transformer": (1, 1)})
    small = min(layers["transformer"].values())
    # the transformer without its smaller block, the VAE, and the text encoders onloaded
    capacity = sum(weights.values()) - small
    plan = solve(components, [target], Device(capacity, reserve_bytes=0))
    assert plan.feasible
    return plan


def test_a_planned_pipeline_makes_the_same_images():
    unplanned = FLUX.build(0)
    expected, expected_again = _run(unplanned), _run(unplanned)  # a pipeline keeps some state
    pipe = FLUX.build(0)
    plan = _mixed_plan(pipe)
    kinds = placements_by_kind(plan)
    assert kinds["layerwise"] == ("transformer",) and "text_encoder_2" in kinds["offloaded"]
    applied = apply(plan, pipe, device="cpu", offload_device="cpu")
    assert len(applied.streamed["transformer"]) == 1
    streamed = pipe.transformer.get_submodule(applied.streamed["transformer"][0])
    assert getattr(streamed, "_diffusers_hook", None) is not None  # diffusers' group offload
    assert hasattr(pipe.text_encoder_2, "_hf_hook")  # accelerate's cpu offload
    images = _run(pipe)
    assert torch.equal(images, expected)
    assert applied.onloaded <= {"text_encoder", "text_encoder_2"}
    applied.offload_all()
    assert not applied.onloaded
    assert torch.equal(_run(pipe), expected_again)  # a second request, after the offload


def test_a_plan_for_another_pipeline_is_refused():
    pipe = FLUX.build(0)
    plan = solve([Component("unet", 1)], [Target("t", [Phase("p", 0, ["unet"])])], Device(1 << 40))
    with pytest.raises(PlanApplyError, match="no components \\['unet'\\]"):
        apply(plan, pipe, device="cpu")
