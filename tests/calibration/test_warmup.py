"""Probe planning, out-of-memory recognition, retry lighter, and failing open."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from types import MappingProxyType

import pytest
import torch
from attrs import define
from torch import nn

from calibration.calibrate.warmup import (
    is_out_of_memory,
    lighten_sequence,
    predict_peak,
    run_probe,
    warm_up,
)
from calibration.plan.memory import GiB, allocator_margin
from runtime.measure import WarmupRecorder
from runtime.measure.backends import LiveTensorBackend
from runtime.record import WarmupRecord

START = {"steps": 2, "frames": 81, "height": 720, "width": 1280, "cfg": True}
FLOOR = {"steps": 2, "frames": 5, "height": 32, "width": 32, "cfg": True}


def test_allocator_margin():
    assert allocator_margin(16 * GiB) == GiB  # 2 % is 0.32 GiB: the 1 GiB floor wins
    assert allocator_margin(100 * GiB) == 2 * GiB
    assert allocator_margin(80 * GiB) == 1717986919  # 1717986918.4, rounded up


def test_real_cpu_allocation_failure_is_out_of_memory():
    with pytest.raises(RuntimeError) as err:
        torch.empty(1 << 60, dtype=torch.uint8)
    assert is_out_of_memory(err.value)


@pytest.mark.parametrize(
    "exc",
    [
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"),
        MemoryError(),
        RuntimeError(
            "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported"
        ),
        RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"),
        RuntimeError("cudaErrorMemoryAllocation: out of memory"),
        RuntimeError("CUDA driver error: cudaErrorMemoryAllocation"),
        RuntimeError("HIP out of memory. Tried to allocate 2.00 GiB"),
        OSError(12, "Cannot allocate memory"),
        RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"),
    ],
)
def test_out_of_memory_recognised(exc):
    assert is_out_of_memory(exc)


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError("CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm`"),
        RuntimeError("CUDA error: an illegal memory access was encountered"),
        RuntimeError("Expected all tensors to be on the same device"),
        IndexError("index 4 is out of bounds for dimension 0 with size 4"),
        ValueError("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
        KeyError("memory"),
    ],
)
def test_unrelated_errors_are_not_out_of_memory(exc):
    assert not is_out_of_memory(exc)


def test_wrapped_out_of_memory_is_recognised():
    try:
        try:
            raise torch.OutOfMemoryError("CUDA out of memory")
        except torch.OutOfMemoryError as inner:
            raise RuntimeError("decode failed") from inner
    except RuntimeError as outer:
        assert is_out_of_memory(outer)


def test_lighten_follows_the_declared_probe_axes_frames_first(wan):
    # formulas/wan.wf: `probe frames >= 9` then `probe height, width`.
    assert wan.probe_axes == (("frames",), ("height", "width"))
    assert wan.probe_minimums == {"frames": 9}
    shapes = lighten_sequence(wan, START, FLOOR)
    # halved, then what `% 4 == 1` admits, stopping at the declared minimum (not FLOOR's 5 frames)
    assert [s["frames"] for s in shapes[:4]] == [81, 37, 17, 9]
    assert all((s["height"], s["width"]) == (720, 1280) for s in shapes[:4])
    assert (shapes[4]["height"], shapes[4]["width"]) == (
        496,
        896,
    )  # each side by 1/sqrt(2), aligned
    volumes = [s["frames"] * s["height"] * s["width"] for s in shapes]
    assert volumes == sorted(volumes, reverse=True) and len(set(volumes)) == len(volumes)
    for s in shapes:
        assert wan.is_admissible(**s)
        assert all(s[k] >= FLOOR[k] for k in ("frames", "height", "width"))
    area = [s["height"] * s["width"] for s in shapes[3:]]
    assert all(b <= a // 2 + 16 * 16 * 8 for a, b in itertools.pairwise(area))  # about halved
    assert shapes[-1]["frames"] == 9 and shapes[-1]["height"] * shapes[-1]["width"] < 2 * 32 * 32


def test_an_image_pipeline_lightens_its_area_alone(flux):
    # formulas/flux.wf declares `probe height, width` only: there is no frames axis to ask for.
    assert flux.probe_axes == (("height", "width"),)
    start = {"steps": 2, "height": 1024, "width": 1024, "cfg": False}
    floor = {"steps": 2, "height": 64, "width": 64, "cfg": False}
    shapes = lighten_sequence(flux, start, floor)
    assert [s["height"] for s in shapes[:3]] == [1024, 720, 496]
    assert shapes[-1]["height"] * shapes[-1]["width"] < 2 * 64 * 64
    assert all(flux.is_admissible(**s) and s["steps"] == 2 for s in shapes)


def _record(params: dict, baseline: int, peak: int, ok: bool = True) -> WarmupRecord:
    from runtime.record import ErrorInfo, Phase

    stage = Phase("stage", "DenoisingStage", "DenoisingStage", 1, baseline, peak, peak, 0.5)
    return WarmupRecord(
        phases=(stage,) if ok else (),
        pipeline="wan2_1_t2v_14b",
        device="cpu",
        backend="test",
        params=params,
        error=None if ok else ErrorInfo("torch.OutOfMemoryError", "oom"),
        baseline_allocated=baseline,
        peak_allocated=peak,
        peak_reserved=peak,
        duration_s=1.0,
    )


def test_predict_peak_asks_the_estimators(wan):
    small = _record(FLOOR, baseline=1000, peak=1000 + 4096)
    failed = _record({**FLOOR, "frames": 81}, baseline=1000, peak=10**12, ok=False)
    assert predict_peak(wan, [], START) is None
    prediction = predict_peak(wan, [small, failed], FLOOR)
    # measured at the shape itself: the measurement, above the baseline
    assert prediction.bytes == 4096 and prediction.method == "measurement"
    larger = predict_peak(wan, [small], {**FLOOR, "frames": 9})
    assert larger.method == "scaled" and larger.bytes > 4096


class Thresholded(nn.Module):
    """A real CPU forward that raises a real torch.OutOfMemoryError above an input size."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.proj = nn.Linear(16, 16)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if x.numel() > self.limit:
            raise torch.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate {x.numel() * 4} bytes"
            )
        return self.proj(x)


def tokens(params) -> int:
    return ((params["frames"] - 1) // 4 + 1) * (params["height"] // 16) * (params["width"] // 16)


def body_for(model: Thresholded):
    def body(req) -> None:
        with torch.no_grad(), req.stage("DenoisingStage", components=("transformer",)):
            for _ in range(req.params["steps"]):
                with req.iteration():
                    model(torch.randn(tokens(req.params), 16))

    return body


def test_out_of_memory_retries_lighter(wan):
    shapes = lighten_sequence(wan, START, FLOOR)
    model = Thresholded(limit=tokens(shapes[3]) * 16)  # shapes 1 and 2 run out of memory
    recorder = WarmupRecorder(wan, device="cpu", components={"transformer": model})
    outcome = run_probe(recorder, shapes, body_for(model), start_step=1)
    assert outcome.calibrated and outcome.lighten_steps == 3
    assert [(a.lighten_steps, a.out_of_memory) for a in outcome.attempts] == [
        (1, True),
        (2, True),
        (3, False),
    ]
    assert [r.ok for r in recorder.records] == [False, False, True]
    assert outcome.record is recorder.records[-1] and dict(outcome.record.params) == shapes[3]
    assert recorder.records[0].error.type == "torch.OutOfMemoryError"


def test_gives_up_after_three_retries_and_fails_open(wan):
    shapes = lighten_sequence(wan, START, FLOOR)
    model = Thresholded(limit=0)
    recorder = WarmupRecorder(wan, device="cpu")
    outcome = run_probe(recorder, shapes, body_for(model))
    assert not outcome.calibrated and outcome.record is None
    assert [a.lighten_steps for a in outcome.attempts] == [0, 1, 2, 3]
    assert "out of memory after 4 attempt(s)" in outcome.reason


def test_unrelated_error_is_not_retried(wan):
    def body(req) -> None:
        raise ValueError("mat1 and mat2 shapes cannot be multiplied")

    recorder = WarmupRecorder(wan, device="cpu")
    outcome = run_probe(recorder, lighten_sequence(wan, START, FLOOR), body)
    assert not outcome.calibrated and len(outcome.attempts) == 1
    assert not outcome.attempts[0].out_of_memory
    assert outcome.reason == "probe failed: ValueError: mat1 and mat2 shapes cannot be multiplied"


@define
class BudgetBackend(LiveTensorBackend):
    """The exact CPU tracker with a device size chosen by the test."""

    free: int = 0
    total: int = 0

    def memory_info(self) -> tuple[int, int]:
        return self.free, self.total


def test_serving_warmup_end_to_end_on_an_image_pipeline(flux):
    # A real tiny FluxPipeline, no frames param: the floor runs, the estimators predict each shape
    # of
    # the lighten sequence, the device is sized so that exactly shapes[2] fits, it runs, and the
    # records estimate the default workload.
    from calibration.core.host import quiet_libraries
    from calibration.core.session import Session
    from calibration.examples import EXAMPLES
    from runtime.estimate import estimate

    example = EXAMPLES["flux"]
    start = {"steps": 2, "height": 160, "width": 160, "cfg": False}
    floor = {"steps": 2, "height": 32, "width": 32, "cfg": False}
    backend = BudgetBackend(total=100 * GiB, free=100 * GiB)
    with quiet_libraries():
        session = Session(
            example.build(0), flux, "cpu", call_kwargs=example.call_kwargs, backend=backend
        )
        recorder = session.recorder
        with recorder.request(**floor) as req:
            session.body(req)
        shapes = lighten_sequence(flux, start, floor)
        backend.free = (
            allocator_margin(backend.total) + predict_peak(flux, recorder.records, shapes[2]).bytes
        )
        outcome = warm_up(recorder, session.body, start=start, floor=floor)
    assert outcome.calibrated, outcome.reason
    assert outcome.plan.fits and outcome.plan.lighten_steps == 2
    assert dict(outcome.record.params) == shapes[2]
    result = estimate(recorder.records, flux)  # the default workload: 28 steps at 1024x1024
    assert result.request_peak.raw_bytes > outcome.record.peak_allocated
    assert result.timing.seconds is not None


def test_calibrate_fails_open(wan):
    def body(req) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory")

    recorder = WarmupRecorder(wan, device="cpu")
    outcome = warm_up(recorder, body, start=START, floor=FLOOR)
    assert not outcome.calibrated and len(outcome.attempts) == 1  # the floor itself failed

    class Broken:
        """A pipeline whose formulas cannot even be asked: warm_up still returns."""

        name = "broken"
        stages = ()
        default_workload = FLOOR
        probe_minimums: Mapping[str, int] = MappingProxyType({})

        def is_admissible(self, **params):
            raise RuntimeError("formulas unavailable")

    outcome = warm_up(WarmupRecorder(Broken(), device="cpu"), body, start=START, floor=FLOOR)
    assert not outcome.calibrated and "formulas unavailable" in outcome.reason


def test_the_warmup_runs_lighter_shapes_until_the_decoding_terms_are_determined(wan):
    # DecodingStage: memory ~ [height * width, latent_frames * height * width]. The floor and a
    # frames-lightened probe move area and frames together, so the target is open; the policy
    # picks a lighter shape at the probe's area (frames alone differ) that closes it.
    from calibration.probes.policy import open_stages

    shapes = lighten_sequence(wan, START, FLOOR)
    assert ("DecodingStage", "memory") in open_stages(wan, [FLOOR, shapes[1]], START)
    assert ("DecodingStage", "memory") not in open_stages(wan, [FLOOR, shapes[1], shapes[2]], START)
    assert open_stages(wan, [FLOOR, START], START) == ()
