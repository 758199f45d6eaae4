"""The lifecycle's pure parts: which recorded errors are out-of-memory, how ranks order failures."""

from __future__ import annotations

import pytest

from calibration.lifecycle.model import Failure
from calibration.lifecycle.validate import is_out_of_memory
from runtime.estimate.peaks import phase_label
from runtime.kinds import PhaseKind
from runtime.record import ErrorInfo


@pytest.mark.parametrize(
    ("kind", "message", "oom"),
    [
        ("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB", True),
        (
            "RuntimeError",
            "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate`",
            True,
        ),
        ("RuntimeError", "cuDNN error: CUDNN_STATUS_ALLOC_FAILED", True),
        ("MemoryError", "", True),
        (
            "RuntimeError",
            "[enforce fail at alloc_cpu.cpp] DefaultCPUAllocator: can't allocate memory",
            True,
        ),
        ("RuntimeError", "mat1 and mat2 shapes cannot be multiplied", False),
        ("ValueError", "height must be divisible by 16", False),
    ],
)
def test_out_of_memory_is_read_from_the_record(kind, message, oom):
    assert is_out_of_memory(ErrorInfo(kind, message)) is oom


def test_ranks_take_the_most_cautious_failure():
    order = [Failure.of_severity(k) for k in range(len(Failure))]
    assert order == [
        Failure.NONE,
        Failure.TOO_SLOW,
        Failure.OVER_BOUND,
        Failure.OVER_CAPACITY,
        Failure.REQUEST_ERROR,
        Failure.OUT_OF_MEMORY,
    ]
    assert max(Failure, key=lambda f: f.severity) is Failure.OUT_OF_MEMORY


def test_phase_labels_are_spelled_as_the_plan_and_the_estimates_read_them():
    """The one spelling: a stage's own phase and a stageless one without ``@``."""
    for key, label in [
        (("stage", "DecodingStage", "DecodingStage"), "stage:DecodingStage"),
        ((PhaseKind.STAGE, "DecodingStage", "DecodingStage"), "stage:DecodingStage"),
        (("component", "vae", "Decode"), "component:vae@Decode"),
        (("component", "vae", None), "component:vae"),
        (("setup", "DenoisingStage", "DenoisingStage"), "setup:DenoisingStage@DenoisingStage"),
    ]:
        assert phase_label(*key) == label
