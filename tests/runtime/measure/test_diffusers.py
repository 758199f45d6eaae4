"""A real diffusers WanPipeline (tiny, random weights, CPU) instrumented end to end."""

from __future__ import annotations

import pytest
import torch

from calibration.examples.wan import build_tiny_wan, tiny_wan_call
from runtime.measure import count_hooks
from runtime.measure.diffusers_hooks import diffusers_recorder, pipeline_modules, run_pipeline
from runtime.record import LayerUse, StageIterations

pytest.importorskip("diffusers")
PARAMS = {"steps": 2, "frames": 5, "height": 32, "width": 32}


@pytest.fixture(scope="module")
def pipe():
    return build_tiny_wan(seed=0)


def _unique_storage_bytes(modules) -> int:
    storages = {}
    for m in modules:
        for t in (*m.parameters(), *m.buffers()):
            storages[id(t.untyped_storage())] = t.untyped_storage().nbytes()
    return sum(storages.values())


def test_tiny_wan_is_small_and_offline(pipe):
    # Its cost is bounded by its size (seconds are bench/'s): under 2 MiB of weights and buffers.
    assert _unique_storage_bytes(pipeline_modules(pipe).values()) < 2 * 2**20
    video = pipe(**tiny_wan_call(**PARAMS)).frames
    assert video.shape == (1, 5, 3, 32, 32)


def test_instrumented_run(wan):
    # Fresh pipelines for both runs: a diffusers pipeline carries state from one call to the next.
    reference = build_tiny_wan(seed=0)(**tiny_wan_call(**PARAMS)).frames
    pipe = build_tiny_wan(seed=0)
    steps_seen: list[int] = []

    def user_callback(p, step, timestep, kwargs):
        steps_seen.append(step)
        return {}

    recorder = diffusers_recorder(wan, pipe, device="cpu")
    with recorder.request(**PARAMS) as req:
        out = run_pipeline(
            pipe,
            req,
            **tiny_wan_call(**PARAMS),
            callback_on_step_end=user_callback,
        )
    assert torch.equal(out.frames, reference)  # measuring does not change the result
    assert steps_seen == [0, 1]  # the user's callback still runs

    record = recorder.records[-1]
    assert record.ok
    assert [p.name for p in record.phases if p.kind == "stage"] == [
        "TextEncodingStage",
        "DenoisingStage",
        "DecodingStage",
    ]
    components = {p.name: p for p in record.phases if p.kind == "component"}
    assert {name: p.count for name, p in components.items()} == {
        "text_encoder": 2,
        "transformer": 4,
        "vae": 1,
    }
    assert {name: p.stage for name, p in components.items()} == {
        "text_encoder": "TextEncodingStage",
        "transformer": "DenoisingStage",
        "vae": "DecodingStage",
    }
    assert [(i.stage, i.index) for i in record.iterations] == [
        ("DenoisingStage", 0),
        ("DenoisingStage", 1),
    ]
    assert record.stage_iterations == (
        StageIterations("TextEncodingStage", 1, 1, "formula"),
        StageIterations("DenoisingStage", 2, 40, "counted"),
        StageIterations("DecodingStage", 1, 1, "formula"),
    )
    assert record.layer_uses == (
        LayerUse("transformer", "blocks.0", "DenoisingStage", 4),
        LayerUse("transformer", "blocks.1", "DenoisingStage", 4),
    )

    modules = pipeline_modules(pipe)
    assert record.baseline_allocated == _unique_storage_bytes(modules.values())
    assert all(p.peak_allocated <= record.peak_allocated for p in record.phases)
    assert all(p.peak_allocated > p.allocated_before for p in components.values())
    assert record.peak_allocated > record.baseline_allocated
    assert all(i.duration_s > 0 for i in record.iterations)
    assert sum(record.stage_durations.values()) <= record.duration_s

    for module in modules.values():
        assert count_hooks(module) == 0
    assert "decode" not in vars(pipe.vae)


def test_prepare_latents_closes_the_text_stage(wan):
    # Auto stages stay open until the next component runs; without the break the latents (16
    # channels x 2 latent frames x 16 x 16 floats = 32 KiB at 128x128) land in the text stage.
    pipe = build_tiny_wan(seed=0)
    recorder = diffusers_recorder(wan, pipe, device="cpu")

    def text_peak(params, **options) -> int:
        with recorder.request(**params) as req:
            run_pipeline(pipe, req, **{**tiny_wan_call(**params), **options})
        record = recorder.records[-1]
        return next(
            p.peak_allocated - record.baseline_allocated
            for p in record.phases
            if p.kind == "stage" and p.name == "TextEncodingStage"
        )

    small, large = {**PARAMS, "steps": 1}, {**PARAMS, "steps": 1, "height": 128, "width": 128}
    assert text_peak(small) == text_peak(large)  # text encoding does not grow with the shape
    assert "prepare_latents" not in vars(pipe)  # the wrapper lives for one call only
    held = text_peak(large, stage_breaks=())
    assert held > text_peak(large) and held >= 16 * 2 * 16 * 16 * 4


def test_a_stage_break_never_closes_an_explicit_stage(wan):
    pipe = build_tiny_wan(seed=0)
    recorder = diffusers_recorder(wan, pipe, device="cpu")
    with (
        recorder.request(**{**PARAMS, "steps": 1}) as req,
        req.stage("TextEncodingStage", components=("text_encoder",)),
    ):
        pipe.encode_prompt("a cat", do_classifier_free_guidance=False, max_sequence_length=16)
        req.end_auto_stage()  # what a break does: the explicit stage stays open
        assert req.current_stage == "TextEncodingStage"
    stages = [p.name for p in recorder.records[-1].phases if p.kind == "stage"]
    assert stages == ["TextEncodingStage"]
