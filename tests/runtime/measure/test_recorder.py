"""The warmup recorder on the CPU tracker: exact peaks, durations, stage pairs from the real
formulas.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from runtime.measure import AutoStages, WarmupRecorder, count_hooks
from runtime.record import ErrorInfo, LayerUse, StageIterations, load_records

F32 = 4


class Clock:
    """A clock the test moves by hand, so durations are exact."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_documented_flow(wan):
    clock = Clock()
    recorder = WarmupRecorder(wan, device="cpu", clock=clock)
    kept = None
    with recorder.request(steps=2, frames=5, height=32, width=32) as req:
        with req.stage("TextEncodingStage", components=("text_encoder",)):
            kept = torch.zeros(100)  # outlives the stage
            clock.now += 1.0
        with req.stage("DenoisingStage", components=("transformer",)):
            scratch = torch.zeros(50)
            del scratch
            for i in range(2):
                with req.iteration():
                    step = torch.zeros(1000 * (i + 1))
                    clock.now += 2.0
                    del step
    record = recorder.records[-1]
    assert record is req.record and record.ok
    assert dict(record.params) == {"steps": 2, "frames": 5, "height": 32, "width": 32, "cfg": True}
    assert (record.pipeline, record.device, record.backend) == (
        "wan2_1_t2v_14b",
        "cpu",
        "cpu-live-tensors",
    )
    assert record.baseline_allocated == 0
    assert record.peak_allocated == (100 + 2000) * F32 and record.peak_above_baseline == 2100 * F32
    assert record.duration_s == 5.0
    assert record.stage_durations == {"TextEncodingStage": 1.0, "DenoisingStage": 4.0}
    text, setup, denoise = record.phases
    assert (setup.kind, setup.name, setup.stage, setup.count) == (
        "setup",
        "DenoisingStage",
        "DenoisingStage",
        3,
    )
    assert (setup.peak_allocated, setup.duration_s) == (
        150 * F32,
        0.0,
    )  # the scratch tensor, outside iterations
    assert (text.kind, text.name, text.stage, text.count) == (
        "stage",
        "TextEncodingStage",
        "TextEncodingStage",
        1,
    )
    assert (text.allocated_before, text.peak_allocated, text.active_components) == (
        0,
        100 * F32,
        ("text_encoder",),
    )
    assert (denoise.allocated_before, denoise.peak_allocated) == (100 * F32, 2100 * F32)
    assert [(i.stage, i.index, i.peak_allocated, i.duration_s) for i in record.iterations] == [
        ("DenoisingStage", 0, 1100 * F32, 2.0),
        ("DenoisingStage", 1, 2100 * F32, 2.0),
    ]
    assert record.stage_iterations == (
        StageIterations("TextEncodingStage", 1, 1, "formula"),
        StageIterations("DenoisingStage", 2, 40, "counted"),
        StageIterations("DecodingStage", 1, 1, "formula"),
    )
    del kept


def test_explicit_iterations_win_and_formula_fills_the_rest(book):
    minimax = book["minimax_h3"]  # DenoisingStage runs steps - 1 times; it has no TextEncodingStage
    recorder = WarmupRecorder(minimax, device="cpu")
    with recorder.request(steps=3) as req:
        with req.stage("TextEncodingStage"):  # no formula: nothing is recorded for it
            pass
        with req.stage("DenoisingStage"):  # no iteration blocks: the formula at the request params
            pass
    assert recorder.records[-1].iteration_pairs() == {"DenoisingStage": (2, 49)}
    with recorder.request(steps=3) as req, req.stage("DenoisingStage"):
        for i in range(2):
            with req.iteration():
                req.record_iterations("DenoisingStage", i + 1, 49)
        req.record_iterations("Refiner", 1, 1)  # explicit pairs are kept even without a formula
    assert recorder.records[-1].stage_iterations == (
        StageIterations("DenoisingStage", 2, 49, "explicit"),
        StageIterations("Refiner", 1, 1, "explicit"),
    )


def test_a_failing_request_is_recorded_then_reraised(wan):
    recorder = WarmupRecorder(wan, device="cpu")
    with (
        pytest.raises(torch.OutOfMemoryError),
        recorder.request(steps=2) as req,
        req.stage("DenoisingStage"),
        req.iteration(),
    ):
        held = torch.zeros(256)
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    record = recorder.records[-1]
    assert not record.ok
    assert record.error == ErrorInfo(
        "torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB"
    )
    assert record.iterations[0].peak_allocated == 256 * F32  # measured up to the failure
    assert record.phases[0].name == "DenoisingStage"
    assert record.iteration_pairs()["DenoisingStage"] == (1, 40)
    del held


def test_params_are_checked(wan):
    recorder = WarmupRecorder(wan, device="cpu")
    with pytest.raises(ValueError, match="unknown params \\['stpes'\\]"):
        recorder.request(stpes=2)
    with pytest.raises(ValueError, match="frames % 4 == 1"):
        recorder.request(frames=6)
    assert recorder.records == ()


def test_markers_must_nest_properly(wan):
    recorder = WarmupRecorder(wan, device="cpu")
    with (
        pytest.raises(RuntimeError, match="must be inside a stage"),
        recorder.request() as req,
        req.iteration(),
    ):
        pass
    with (
        pytest.raises(RuntimeError, match="do not nest"),
        recorder.request() as req,
        req.stage("DenoisingStage"),
        req.stage("DecodingStage"),
    ):
        pass
    assert [r.error.type for r in recorder.records] == ["RuntimeError", "RuntimeError"]
    with recorder.request() as outer:
        with pytest.raises(RuntimeError, match="requests do not nest"), recorder.request():
            pass
        assert outer.current_stage is None and recorder.active is outer
    assert len(recorder.records) == 3  # the refused inner request left no record
    assert recorder.active is None


class Denoiser(nn.Module):
    """Two repeated blocks, as a layerwise component has."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def test_phases_components_and_layer_uses(wan):
    torch.manual_seed(0)
    transformer = Denoiser()
    text_encoder = nn.Linear(8, 8)
    weights = sum(p.numel() for m in (transformer, text_encoder) for p in m.parameters()) * F32
    recorder = WarmupRecorder(
        wan,
        device="cpu",
        components={"transformer": transformer, "text_encoder": text_encoder},
        layerwise=("transformer",),
    )
    with torch.no_grad(), recorder.request(steps=2) as req:
        with req.stage("TextEncodingStage", components=("text_encoder",)):
            text_encoder(torch.zeros(1, 8))
        with req.phase("prefetch", components=("transformer",)):
            staged = torch.zeros(64)
        with req.stage("DenoisingStage", components=("transformer",)):
            with req.phase("transition", name="full_weights", components=("transformer",)):
                req.mark_used("transformer")
            for _ in range(2):
                with req.iteration():
                    transformer(torch.zeros(1, 8))
    record = recorder.records[-1]
    assert record.baseline_allocated == weights  # the components' weights were seeded
    by_key = {(p.kind, p.name, p.stage): p for p in record.phases}
    assert list(by_key) == [
        ("component", "text_encoder", "TextEncodingStage"),
        ("stage", "TextEncodingStage", "TextEncodingStage"),
        ("prefetch", "prefetch", None),
        ("transition", "full_weights", "DenoisingStage"),
        ("setup", "DenoisingStage", "DenoisingStage"),
        ("component", "transformer", "DenoisingStage"),
        ("stage", "DenoisingStage", "DenoisingStage"),
    ]
    assert by_key[("setup", "DenoisingStage", "DenoisingStage")].used_components == (
        "transformer",
    )  # the transition
    assert by_key[("component", "text_encoder", "TextEncodingStage")].used_components == (
        "text_encoder",
    )
    assert by_key[("stage", "TextEncodingStage", "TextEncodingStage")].used_components == (
        "text_encoder",
    )
    prefetch = by_key[("prefetch", "prefetch", None)]
    assert prefetch.active_components == ("transformer",) and prefetch.used_components == ()
    assert prefetch.peak_allocated - prefetch.allocated_before == 64 * F32
    assert by_key[("transition", "full_weights", "DenoisingStage")].used_components == (
        "transformer",
    )
    assert by_key[("component", "transformer", "DenoisingStage")].count == 2
    assert record.layer_uses == (
        LayerUse("transformer", "blocks.0", "DenoisingStage", 2),
        LayerUse("transformer", "blocks.1", "DenoisingStage", 2),
    )
    assert count_hooks(transformer) == 0 and count_hooks(text_encoder) == 0
    del staged


def test_bad_layer_group_leaves_no_hook(wan):
    model = Denoiser()
    recorder = WarmupRecorder(
        wan,
        device="cpu",
        components={"transformer": model},
        layerwise=("transformer",),
        layer_groups={"transformer": ["nope"]},
    )
    with pytest.raises(ValueError, match="no nn.ModuleList named"), recorder.request():
        pass
    assert count_hooks(model) == 0
    assert recorder.active is None and recorder.records == ()  # free for the next request
    with pytest.raises(ValueError, match="not among components"):
        WarmupRecorder(wan, device="cpu", layerwise=("transformer",))


def test_auto_stages_from_component_use(wan):
    enc, den, dec = nn.Linear(2, 2), nn.Linear(2, 2), nn.Linear(2, 2)
    stages = AutoStages(
        {"enc": "TextEncodingStage", "den": "DenoisingStage", "dec": "DecodingStage"},
        {"DenoisingStage"},
    )
    recorder = WarmupRecorder(
        wan, device="cpu", components={"enc": enc, "den": den, "dec": dec}, auto_stages=stages
    )
    with torch.no_grad(), recorder.request(steps=3) as req:
        enc(torch.zeros(2))
        enc(torch.zeros(2))
        for _ in range(3):
            den(torch.zeros(2))  # cond
            den(torch.zeros(2))  # uncond
            req.step_end()
        dec(torch.zeros(2))
    record = recorder.records[-1]
    assert [p.name for p in record.phases if p.kind == "stage"] == [
        "TextEncodingStage",
        "DenoisingStage",
        "DecodingStage",
    ]
    assert [(i.stage, i.index) for i in record.iterations] == [
        ("DenoisingStage", k) for k in range(3)
    ]
    assert record.iteration_pairs() == {
        "TextEncodingStage": (1, 1),
        "DenoisingStage": (3, 40),
        "DecodingStage": (1, 1),
    }
    assert {p.name: p.count for p in record.phases if p.kind == "component"} == {
        "enc": 2,
        "den": 6,
        "dec": 1,
    }


def test_records_saved_and_warmup_ends(wan, tmp_path):
    recorder = WarmupRecorder(wan, device="cpu")
    for steps in (1, 2):
        with recorder.request(steps=steps) as req, req.stage("DenoisingStage"):
            pass
    recorder.save(tmp_path / "warmup.json")
    assert load_records(tmp_path / "warmup.json") == list(recorder.records)
    recorder.end_warmup()
    with pytest.raises(RuntimeError, match="warmup has ended"):
        recorder.request()


def test_served_requests_are_recorded_apart_and_bounded(wan, monkeypatch):
    import runtime.measure.recorder as module

    monkeypatch.setattr(module, "SERVED_KEPT", 2)
    recorder = WarmupRecorder(wan, device="cpu")
    with pytest.raises(RuntimeError, match="warmup has not ended"):
        recorder.served_request()
    with recorder.request(steps=1) as req, req.stage("DenoisingStage"):
        pass
    recorder.end_warmup()
    for steps in (1, 2, 3):
        with recorder.served_request(steps=steps) as req, req.stage("DenoisingStage"):
            pass
    assert len(recorder.records) == 1  # the warmup's, untouched
    assert [r.params["steps"] for r in recorder.served] == [2, 3]  # the last SERVED_KEPT
