"""Probe planning, out-of-memory recognition, retry lighter, and failing open."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch
from attrs import define
from torch import nn

from calibration.warmup import (
    GiB,
    ProbeAxes,
    allocator_margin,
    calibrate,
    is_out_of_memory,
    lighten_sequence,
    plan_probe,
    predict_peak,
    run_probe,
    undetermined_stages,
)
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


def test_lighten_frames_first_then_area(wan):
    shapes = lighten_sequence(wan, START, FLOOR)
    assert [s["frames"] for s in shapes[:4]] == [
        81,
        37,
        17,
        5,
    ]  # latent frames 21 -> 10 -> 5 -> 2 (floor 5)
    assert all((s["height"], s["width"]) == (720, 1280) for s in shapes[:4])
    assert (shapes[4]["height"], shapes[4]["width"]) == (
        496,
        928,
    )  # area halved, sides aligned to 16
    volumes = [s["frames"] * s["height"] * s["width"] for s in shapes]
    assert volumes == sorted(volumes, reverse=True) and len(set(volumes)) == len(volumes)
    for s in shapes:
        assert wan.is_admissible(**s)
        assert s["height"] % 16 == 0 and s["width"] % 16 == 0
        assert all(s[k] >= FLOOR[k] for k in ("frames", "height", "width"))
    area = [s["height"] * s["width"] for s in shapes[3:]]
    assert all(
        b <= a // 2 + 16 * 16 * 4 for a, b in itertools.pairwise(area)
    )  # roughly halved each step
    assert shapes[-1]["frames"] == 5 and shapes[-1]["height"] * shapes[-1]["width"] < 2 * 32 * 32


def test_frames_walk_down_to_what_the_contract_admits(wan):
    # With a 2x temporal compression, halving 41 latent frames gives 39 frames, which `frames % 4 ==
    # 1` refuses: the planner walks down to the largest admissible value, 37.
    shapes = lighten_sequence(wan, START, FLOOR, ProbeAxes(temporal_compression=2))
    assert shapes[1]["frames"] == 37


def _record(params: dict, baseline: int, peak: int, ok: bool = True) -> WarmupRecord:
    from runtime.record import ErrorInfo

    return WarmupRecord(
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


def test_predict_peak_scales_the_largest_successful_record():
    small = _record(FLOOR, baseline=1000, peak=1000 + 4096)
    failed = _record({**FLOOR, "frames": 81}, baseline=1000, peak=10**12, ok=False)
    assert predict_peak([], START) is None
    prediction = predict_peak([small, failed], {**FLOOR, "frames": 9})
    assert prediction.bytes == 4096 * 9 // 5 + 1  # ceil(4096 * 9 / 5)
    assert prediction.reference_peak == 4096 and dict(prediction.reference_params) == FLOOR


def test_plan_picks_the_largest_shape_that_fits(wan):
    records = [
        _record(FLOOR, baseline=0, peak=5 * 32 * 32)
    ]  # one byte per frame*pixel above baseline
    total = 100 * GiB
    shapes = lighten_sequence(wan, START, FLOOR)
    volume = [s["frames"] * s["height"] * s["width"] for s in shapes]
    free = allocator_margin(total) + volume[2]
    plan = plan_probe(wan, records, start=START, floor=FLOOR, free_bytes=free, total_bytes=total)
    assert (plan.lighten_steps, plan.fits, plan.prediction.bytes) == (2, True, volume[2])
    assert dict(plan.params) == shapes[2]
    tight = plan_probe(wan, records, start=START, floor=FLOOR, free_bytes=GiB, total_bytes=total)
    assert not tight.fits and tight.lighten_steps == len(shapes) - 1
    blind = plan_probe(wan, [], start=START, floor=FLOOR, free_bytes=free, total_bytes=total)
    assert blind.prediction is None and dict(blind.params) == shapes[-1]


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
    """The CPU tracker with a device size chosen by the test."""

    free: int = 0
    total: int = 0

    def memory_info(self) -> tuple[int, int]:
        return self.free, self.total


def _calibrated_at(wan, step: int, model: Thresholded):
    """A recorder whose floor ran and a device sized so that the plan picks ``shapes[step]``."""
    shapes = lighten_sequence(wan, START, FLOOR)
    backend = BudgetBackend(total=100 * GiB)
    recorder = WarmupRecorder(wan, backend=backend, components={"transformer": model})
    with recorder.request(**FLOOR) as req:
        body_for(model)(req)
    floor_peak = recorder.records[-1].peak_above_baseline
    volume = [s["frames"] * s["height"] * s["width"] for s in shapes]
    floor_volume = FLOOR["frames"] * FLOOR["height"] * FLOOR["width"]
    backend.free = allocator_margin(backend.total) + -(-floor_peak * volume[step] // floor_volume)
    return shapes, recorder


def test_calibrate_end_to_end(wan):
    shapes = lighten_sequence(wan, START, FLOOR)
    model = Thresholded(limit=tokens(shapes[3]) * 16)
    # The floor runs first; its measured peak then predicts the others. Leave room for shape 2
    # exactly.
    _, recorder = _calibrated_at(wan, 2, model)
    outcome = calibrate(recorder, body_for(model), start=START, floor=FLOOR)
    assert outcome.plan.lighten_steps == 2 and outcome.plan.fits
    assert (
        outcome.calibrated and outcome.lighten_steps == 3
    )  # shape 2 ran out of memory, shape 3 did not


def test_calibrate_fails_open(wan):
    def body(req) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory")

    recorder = WarmupRecorder(wan, device="cpu")
    outcome = calibrate(recorder, body, start=START, floor=FLOOR)
    assert (
        not outcome.calibrated and len(outcome.attempts) == 1
    )  # the floor itself failed: nothing lighter

    class Broken:
        """A pipeline whose formulas cannot even be asked: calibrate still returns."""

        name = "broken"
        stages = ()
        default_workload = FLOOR

        def is_admissible(self, **params):
            raise RuntimeError("formulas unavailable")

    outcome = calibrate(WarmupRecorder(Broken(), device="cpu"), body, start=START, floor=FLOOR)
    assert not outcome.calibrated and "formulas unavailable" in outcome.reason


@pytest.fixture(scope="module")
def real_wan():
    """formulas/wan.wf's Wan 2.1 T2V 14B, compiled: its DecodingStage has two memory terms."""
    from calibration.run import load_pipeline

    root = Path(__file__).resolve().parents[2]
    return load_pipeline(root / "formulas" / "wan.wf", "wan2_1_t2v_14b")


def test_undetermined_stages_follow_the_decoding_terms(real_wan):
    # DecodingStage: memory ~ [height * width, latent_frames * height * width] (formulas/wan.wf).
    shapes = lighten_sequence(real_wan, START, FLOOR)
    assert (shapes[1]["height"], shapes[2]["height"]) == (720, 720)  # frames go first
    assert shapes[1]["frames"] > shapes[2]["frames"]
    # The floor and a frames-lightened probe move area and frames together: the target is open.
    assert undetermined_stages(real_wan, [FLOOR, shapes[1]], START) == ("DecodingStage",)
    # Two sizes at the target's area determine it whatever their frames; the target covers itself.
    assert undetermined_stages(real_wan, [shapes[1], shapes[2]], START) == ()
    assert undetermined_stages(real_wan, [FLOOR, START], START) == ()
    assert undetermined_stages(real_wan, [], START) == ("DecodingStage",)

    class NoTerms:
        stages = ("DecodingStage",)

    assert undetermined_stages(NoTerms(), [FLOOR], START) == ()


def test_calibrate_runs_a_lighter_probe_that_determines_the_memory_terms(real_wan):
    model = Thresholded(limit=10**9)
    shapes, recorder = _calibrated_at(real_wan, 1, model)
    outcome = calibrate(recorder, body_for(model), start=START, floor=FLOOR)
    assert outcome.calibrated and outcome.lighten_steps == 1
    # shapes[2] keeps the target's area with fewer frames: with shapes[1] it spans the target.
    assert [dict(a.params) for a in outcome.determining] == [shapes[2]]
    assert [dict(r.params) for r in recorder.records] == [FLOOR, shapes[1], shapes[2]]
    assert "DecodingStage determined by a probe at" in outcome.reason
    assert undetermined_stages(real_wan, [r.params for r in recorder.records], START) == ()


def test_calibrate_says_when_no_lighter_probe_can_determine_the_terms(real_wan):
    # The probe lands where frames are already at the floor's: every lighter shape only shrinks the
    # area, so the frames direction stays open; nothing more runs and the reason says so.
    shapes = lighten_sequence(real_wan, START, FLOOR)
    step = next(k for k, s in enumerate(shapes) if s["frames"] == FLOOR["frames"])
    model = Thresholded(limit=10**9)
    _, recorder = _calibrated_at(real_wan, step, model)
    outcome = calibrate(recorder, body_for(model), start=START, floor=FLOOR)
    assert outcome.calibrated and outcome.lighten_steps == step and outcome.determining == ()
    assert "stay undetermined at the target (no lighter shape determines them)" in outcome.reason
    assert len(recorder.records) == 2


def test_calibrate_can_skip_determining_the_terms(real_wan):
    model = Thresholded(limit=10**9)
    _, recorder = _calibrated_at(real_wan, 1, model)
    outcome = calibrate(recorder, body_for(model), start=START, floor=FLOOR, determine_terms=False)
    assert outcome.determining == () and len(recorder.records) == 2
