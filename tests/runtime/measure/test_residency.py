"""Weight reads attributed by storage, a placement's residency and the cap on the CPU tracker:
against byte counts computed by hand from the modules' shapes."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from runtime.measure import WarmupRecorder
from runtime.measure.backends import LiveStorageCounter, LiveTensorBackend
from runtime.measure.residency import Residency, WeightMap
from runtime.record import WarmupRecord

F32 = 4
WIDTH, VOCAB = 8, 64


class Tower(nn.Module):
    """Run only through ``get_text_features``, as AudioLDM2's CLAP text encoder is."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        raise AssertionError("never called")

    def get_text_features(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embed(ids).mean(dim=0)


TOWER = VOCAB * WIDTH * F32
DENOISER = (WIDTH * WIDTH + WIDTH) * F32


def _parts() -> dict[str, nn.Module]:
    torch.manual_seed(0)
    return {"tower": Tower(), "denoiser": nn.Linear(WIDTH, WIDTH), "spare": nn.Linear(2, 2)}


def _request(recorder: WarmupRecorder, parts: dict[str, nn.Module]) -> WarmupRecord:
    """The text-encoding stage runs the tower by its method, the denoising stage the denoiser."""
    with torch.no_grad(), recorder.request() as req:
        with req.stage("TextEncodingStage"):
            cond = parts["tower"].get_text_features(torch.arange(4))  # type: ignore[operator]
        with req.stage("DenoisingStage"), req.iteration():
            parts["denoiser"](cond[None, :])
    return recorder.records[-1]


def _phase(record: WarmupRecord, stage: str):
    return next(p for p in record.phases if p.kind == "stage" and p.name == stage)


def test_a_component_run_through_another_method_is_seen_active(wan):
    parts = _parts()
    recorder = WarmupRecorder(wan, "cpu", components=parts)
    record = _request(recorder, parts)
    text, denoise = _phase(record, "TextEncodingStage"), _phase(record, "DenoisingStage")
    assert text.used_components == ("tower",)
    assert "tower" in text.active_components
    assert denoise.used_components == ("denoiser",)
    assert all("spare" not in p.used_components for p in record.phases)


def test_the_map_knows_a_weight_by_its_views():
    parts = _parts()
    weights = WeightMap.of(parts)
    assert weights.sizes == {"tower": TOWER, "denoiser": DENOISER, "spare": (4 + 2) * F32}
    assert weights.component_of(parts["denoiser"].weight.t()) == "denoiser"
    assert weights.component_of(torch.zeros(3)) is None


def test_swapped_components_are_on_the_device_one_at_a_time(wan):
    parts = _parts()
    backend = LiveTensorBackend(swapped=frozenset({"tower", "denoiser"}))
    recorder = WarmupRecorder(wan, "cpu", backend=backend, components=parts)
    spare = (4 + 2) * F32
    assert backend.current_allocated() == spare  # only the pinned one before the request
    record = _request(recorder, parts)
    text = _phase(record, "TextEncodingStage")
    denoise = next(p for p in record.phases if p.kind == "component" and p.name == "denoiser")
    assert text.weights_bytes == spare + TOWER
    assert denoise.weights_bytes == spare + DENOISER  # its entry offloaded the tower
    # the stage opened before the denoiser ran, the tower still on the device, as its hook has it
    assert _phase(record, "DenoisingStage").weights_bytes == spare + TOWER
    assert backend.current_allocated() == spare  # offloaded at the request's end


def test_everything_pinned_counts_every_weight(wan):
    parts = _parts()
    backend = LiveTensorBackend()
    recorder = WarmupRecorder(wan, "cpu", backend=backend, components=parts)
    record = _request(recorder, parts)
    total = TOWER + DENOISER + (4 + 2) * F32
    assert record.baseline_allocated == total
    assert {p.weights_bytes for p in record.phases} == {total}


def test_the_cap_raises_the_cuda_out_of_memory_error_before_counting():
    backend = LiveTensorBackend(capacity=1000)
    with backend.tracking():
        kept = torch.zeros(200)  # 800 bytes
        with pytest.raises(torch.OutOfMemoryError, match="calibration cap of 1000 bytes"):
            torch.zeros(100)  # 400 more
        assert backend.current_allocated() == 800
        assert backend.peak_allocated() == 800
    assert backend.memory_info() == (200, 1000)
    assert kept.numel() == 200


def test_onloading_past_the_cap_is_out_of_memory(wan):
    parts = _parts()
    backend = LiveTensorBackend(capacity=TOWER, swapped=frozenset({"tower", "denoiser"}))
    recorder = WarmupRecorder(wan, "cpu", backend=backend, components=parts)
    with pytest.raises(torch.OutOfMemoryError):
        _request(recorder, parts)  # the pinned spare and the tower exceed it
    assert recorder.records[-1].error is not None
    # the weights alone exceed it: no request could fit (a torch.OutOfMemoryError that says so)
    assert recorder.records[-1].error.type == "runtime.measure.residency.WeightsOverCapacity"


def test_weights_round_trip_and_an_older_record_without_them_loads(wan):
    parts = _parts()
    recorder = WarmupRecorder(wan, "cpu", components=parts)
    record = _request(recorder, parts)
    text = record.to_json()
    assert WarmupRecord.from_json(text) == record
    for phase in text["phases"]:  # type: ignore[union-attr]
        del phase["weights_bytes"]  # type: ignore[index]
    older = WarmupRecord.from_json(text)
    assert {p.weights_bytes for p in older.phases} == {None}


@given(st.lists(st.tuples(st.sampled_from("abc"), st.booleans()), max_size=30))
def test_residency_holds_one_swapped_component_at_a_time(events):
    """Against an oracle of accelerate's rule: a component's entry offloads every other loaded one;
    a read onloads a swapped one (offloading the others) unless it is loaded."""
    sizes, swapped = {"a": 1, "b": 10, "c": 100}, frozenset("ab")
    counter = LiveStorageCounter()
    residency = Residency(sizes, swapped, counter=counter)
    counter.shift(residency.pinned_bytes, residency.pinned_bytes)
    loaded: set[str] = set()
    for name, entry in events:
        (residency.entered if entry else residency.read)(name)
        if entry or (name in swapped and name not in loaded):
            loaded = {name} & swapped
        expected = sizes["c"] + sum(sizes[n] for n in loaded)
        assert counter.current == counter.weights == expected
    assert counter.peak == max(
        [sizes["c"], *(sizes["c"] + sizes[n] for n, _ in events if n in swapped)]
    )
