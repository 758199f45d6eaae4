"""The SDXL, CogVideoX and PixArt-Sigma examples and the test-only SD 1.5 pipeline, end to end on
CPU.

Each factory builds a real tiny diffusers pipeline; one small request runs through the recorder;
every stage the formula file declares is recorded, no component runs outside a stage, and the
iteration counts match the formulas.
"""

from __future__ import annotations

import importlib
from fractions import Fraction
from pathlib import Path

import pytest
import torch

from dslc.build import load_program
from dslc.compiler import compile_paths
from runtime.measure import AutoStages
from runtime.measure.diffusers_hooks import diffusers_recorder, run_pipeline
from tests.examples import program_of

pytest.importorskip("diffusers")
ROOT = Path(__file__).resolve().parents[3]
DENOISE = "DenoisingStage"

#: family -> (factory module, formula file, pipeline, a small request).
FAMILIES = {
    "sdxl": (
        "calibration.examples.sdxl",
        "formulas/sdxl.wf",
        "sdxl_base",
        {"steps": 2, "height": 64, "width": 64},
    ),
    "cogvideox": (
        "calibration.examples.cogvideox",
        "formulas/cogvideox.wf",
        "cogvideox_2b",
        {"steps": 2, "frames": 9, "height": 32, "width": 32},
    ),
    "pixart_sigma": (
        "calibration.examples.pixart_sigma",
        "formulas/pixart_sigma.wf",
        "pixart_sigma_1024",
        {"steps": 3, "height": 64, "width": 64},
    ),
    "custom_sd": (
        "tests.calibration.custom_pipeline",
        "tests/calibration/data/custom_sd.wf",
        "custom_sd",
        {"steps": 2, "height": 32, "width": 32},
    ),
}


def _formulas(path: str, name: str):
    result = compile_paths([ROOT / path])
    assert not result.diagnostics, [str(d) for d in result.diagnostics]
    return load_program(program_of(result))[name]


def _recorder(formulas, pipe):
    """A recorder wired by the formula file's facts: each stage's `uses`, its `per step` stage."""
    stage_for, entry_points = {}, {}
    for stage, uses in formulas.uses.items():
        for use in uses:
            if use.method == "forward":
                stage_for[use.component] = stage
            else:
                stage_for[f"{use.component}.{use.method}"] = stage
                entry_points.setdefault(use.component, []).append(use.method)
    stages = AutoStages(stage_for, frozenset(formulas.stepped_stages))
    return diffusers_recorder(
        formulas, pipe, "cpu", stages=stages, entry_points=entry_points, layerwise=()
    )


def _call(formulas, module, params, **extra):
    """The factory's constant arguments, then the formula file's `call` arguments at `params`."""
    declared = formulas.call_arguments(**params)
    numbers = {k: float(v) if isinstance(v, Fraction) else v for k, v in declared.items()}
    return {**module.call_kwargs(0), **numbers, **extra}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_small_request_records_every_declared_stage(family):
    module_name, path, name, params = FAMILIES[family]
    module = importlib.import_module(module_name)
    formulas = _formulas(path, name)
    pipe = module.build()
    recorder = _recorder(formulas, pipe)
    with recorder.request(**params) as req:
        out = run_pipeline(pipe, req, **_call(formulas, module, req.params))
    record = recorder.records[-1]
    assert record.ok, record.error

    images = out.frames if hasattr(out, "frames") else out.images
    assert images.shape[-2:] == (params["height"], params["width"])
    assert images.shape[1] == params.get("frames", 3)  # (B, F, C, H, W) or RGB (B, C, H, W)
    stages = [p.name for p in record.phases if p.kind == "stage"]
    assert stages == list(formulas.stages)
    components = {p.name: p.stage for p in record.phases if p.kind == "component"}
    declared = {u.component: s for s, uses in formulas.uses.items() for u in uses}
    assert components == declared  # each declared component ran, inside its stage; no other
    counted = {s.stage: s.measured for s in record.stage_iterations}
    assert formulas.stepped_stages == (DENOISE,)
    assert counted[DENOISE] == formulas.iterations(DENOISE, **params)
    assert all(p.peak_allocated > record.baseline_allocated for p in record.phases)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_factories_are_deterministic_and_offline(family):
    module = importlib.import_module(FAMILIES[family][0])
    first, second = module.build(seed=3), module.build(seed=3)
    other = module.build(seed=4)
    for name, component in first.components.items():
        if isinstance(component, torch.nn.Module):
            a, b = component.state_dict(), second.components[name].state_dict()
            assert all(torch.equal(a[k], b[k]) for k in a), name
    weights = sum(
        p.numel() * p.element_size()
        for c in first.components.values()
        if isinstance(c, torch.nn.Module)
        for p in c.parameters()
    )
    assert weights < 16 * 2**20  # a few MB: tiny enough for a CPU calibration in seconds
    denoiser = "unet" if "unet" in first.components else "transformer"
    assert not torch.equal(
        next(first.components[denoiser].parameters()), next(other.components[denoiser].parameters())
    )


@pytest.mark.parametrize("family", ["sdxl", "cogvideox", "pixart_sigma"])
def test_demo_shapes_are_admissible_and_the_target_is_4x_the_probe(family):
    module_name, path, name, _ = FAMILIES[family]
    module = importlib.import_module(module_name)
    formulas = _formulas(path, name)
    for shape in (module.WARMUP, module.PROBE, module.TARGET):
        assert formulas.is_admissible(**shape), shape

    def work(shape):
        return formulas.iterations(DENOISE, **shape) * formulas.memory(DENOISE, **shape)

    assert work(module.TARGET) >= 4 * work(module.PROBE)
    grown = [axis for axis in ("steps", "height", "frames") if axis in module.TARGET]
    assert grown and all(module.TARGET[axis] > module.PROBE[axis] for axis in grown), grown


def test_pndm_runs_one_unet_call_more_than_its_steps():
    # The SD 1.5 scheduler repeats a timestep (PLMS), which custom_sd.wf declares.
    from tests.calibration import custom_pipeline

    pipe = custom_pipeline.build()
    calls = []
    pipe.unet.register_forward_hook(lambda *args: calls.append(1))
    pipe(**custom_pipeline.call_kwargs(), num_inference_steps=3, height=32, width=32)
    formulas = _formulas("tests/calibration/data/custom_sd.wf", "custom_sd")
    assert len(calls) == formulas.iterations(DENOISE, steps=3) == 4


def test_legacy_callback_pipelines_count_their_steps():
    # PixArt-Sigma has only the legacy `callback(step, timestep, latents)`: the recorder uses it and
    # still calls the caller's own callback on the steps it asked for.
    from calibration.examples import pixart_sigma

    formulas = _formulas("formulas/pixart_sigma.wf", "pixart_sigma_1024")
    pipe = pixart_sigma.build()
    recorder = _recorder(formulas, pipe)
    seen: list[int] = []
    params = {"steps": 4, "height": 32, "width": 32}
    with recorder.request(**params) as req:
        run_pipeline(
            pipe,
            req,
            **_call(
                formulas,
                pixart_sigma,
                req.params,
                callback=lambda step, t, latents: seen.append(step),
                callback_steps=2,
            ),
        )
    record = recorder.records[-1]
    assert [i.index for i in record.iterations] == [0, 1, 2, 3]
    assert seen == [0, 2]
