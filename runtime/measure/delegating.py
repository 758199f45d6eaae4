"""A backend that forwards every call to an inner one: the base of wrappers that change a few
reads (injected faults, the fuzzer's progress beats) and keep the rest of the device as it is."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import torch
from attrs import define, field

from runtime.measure.backends import MemoryBackend


@define
class DelegatingBackend:
    """``inner``'s counters, barrier and pool, unchanged: a subclass overrides what it alters."""

    inner: MemoryBackend
    name: str = field(init=False)
    device: torch.device = field(init=False)

    def __attrs_post_init__(self) -> None:
        self.name, self.device = self.inner.name, self.inner.device

    def current_allocated(self) -> int:
        return self.inner.current_allocated()

    def peak_allocated(self) -> int:
        return self.inner.peak_allocated()

    def peak_reserved(self) -> int:
        return self.inner.peak_reserved()

    def reset_peak(self) -> None:
        self.inner.reset_peak()

    def synchronize(self) -> None:
        self.inner.synchronize()

    def release_pool(self) -> None:
        self.inner.release_pool()

    def memory_info(self) -> tuple[int, int]:
        return self.inner.memory_info()

    def tracking(self) -> contextlib.AbstractContextManager[object]:
        return self.inner.tracking()

    def track_existing(self, tensors: Iterable[torch.Tensor]) -> None:
        self.inner.track_existing(tensors)
