"""Warmup -> serving: staging caches and the pool are released, and warmup peaks never reach serving
figures.
"""

from __future__ import annotations

import torch

from runtime.measure import WarmupRecorder
from runtime.measure.backends import AllocatorBackend

F32 = 4


def test_warmup_peak_never_leaks_into_serving(wan):
    recorder = WarmupRecorder(wan, device="cpu")
    cache: dict[str, torch.Tensor] = {}
    with recorder.request(steps=2) as req, req.stage("DenoisingStage"):
        cache["pinned"] = torch.zeros(1000)  # a warmup-only staging buffer
        huge = torch.zeros(100_000)  # the warmup peak
        del huge
    assert recorder.records[-1].peak_allocated == 101_000 * F32
    recorder.register_staging_cache(cache.clear)

    def broken() -> None:
        raise RuntimeError("cache already gone")

    recorder.register_staging_cache(broken)
    monitor = recorder.end_warmup()
    assert recorder.end_warmup() is monitor  # idempotent
    report = monitor.report
    assert (report.allocated_before, report.allocated_after) == (1000 * F32, 0)
    assert report.caches_released == 1 and report.cache_errors == (
        "RuntimeError: cache already gone",
    )
    assert monitor.peak().allocated == 0
    with monitor.tracking():
        served = torch.zeros(300)
        scratch = torch.zeros(200)
        del scratch
    assert monitor.peak().allocated == 500 * F32
    assert monitor.peak().reserved == 500 * F32
    del served


class _Module:
    """``torch.cuda`` stand-in counting pool releases and peak resets."""

    def __init__(self) -> None:
        self.empty_cache_calls = 0
        self.resets = 0
        self.peak = 5000

    def current_device(self) -> int:
        return 0

    def memory_allocated(self, device) -> int:
        return 100

    def max_memory_allocated(self, device) -> int:
        return self.peak

    max_memory_reserved = max_memory_allocated

    def reset_peak_memory_stats(self, device) -> None:
        self.resets += 1
        self.peak = 100

    def synchronize(self, device) -> None:
        pass

    def empty_cache(self) -> None:
        self.empty_cache_calls += 1


def test_transition_releases_the_allocator_pool_and_resets_the_peak(wan):
    module = _Module()
    recorder = WarmupRecorder(wan, backend=AllocatorBackend(torch.device("cuda"), module))
    monitor = recorder.end_warmup()
    assert module.empty_cache_calls == 1 and module.resets >= 1
    assert monitor.peak().allocated == 100  # the warmup's 5000 is gone
