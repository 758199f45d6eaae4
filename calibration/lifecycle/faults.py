"""Failures injected at the memory backend's boundary: an out-of-memory error in a chosen stage, a
measured peak above the plan's there, or another error failing the request. Tests and
bench/lifecycle_gpu.py drive the lifecycle's roll-back this way on a real pipeline, without a mock
of the pipeline or of diffusers.

``FaultyBackend`` wraps a real ``MemoryBackend`` and asks the recorder which stage the request is
in (``watch``). An out-of-memory fault raises ``torch.OutOfMemoryError`` from the first counter read
inside the stage (a window opening: the error leaves through the pipeline's own forward, as a real
allocation failure would); a peak fault adds bytes to every peak read inside the stage. Each fault
strikes in at most ``times`` requests (None: every one).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator

import torch
from attrs import define, field, frozen

from runtime.measure.backends import MemoryBackend

OUT_OF_MEMORY, PEAK, ERROR = "out-of-memory", "peak", "error"


@frozen
class Fault:
    """A failure: ``kind`` in ``stage``, ``extra_bytes`` for a peak (``times`` requests)."""

    stage: str
    kind: str = OUT_OF_MEMORY
    extra_bytes: int = 0
    times: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.kind not in (OUT_OF_MEMORY, PEAK, ERROR):
            raise ValueError(
                f"a fault is {OUT_OF_MEMORY!r}, {PEAK!r} or {ERROR!r}, not {self.kind!r}"
            )


def _faults(value: Iterable[Fault]) -> tuple[Fault, ...]:
    return tuple(value)


@define
class FaultyBackend:
    """A real backend whose counters fail or read high in chosen stages (``faults``)."""

    inner: MemoryBackend
    faults: tuple[Fault, ...] = field(converter=_faults, default=())
    name: str = field(init=False)
    device: torch.device = field(init=False)
    _stage: Callable[[], str | None] = field(default=lambda: None, init=False)
    _struck: dict[int, int] = field(factory=dict, init=False)  # fault index -> requests struck
    _this_request: set[int] = field(factory=set, init=False)
    _depth: int = field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        self.name, self.device = self.inner.name, self.inner.device

    def watch(self, recorder: object) -> None:
        """Key the faults on ``recorder``'s current request's stage."""

        def stage() -> str | None:
            request = getattr(recorder, "active", None)
            return getattr(request, "current_stage", None)

        self._stage = stage

    def _armed(self, kind: str) -> list[int]:
        stage = self._stage() if self._depth else None
        return [
            i
            for i, f in enumerate(self.faults)
            if f.kind == kind
            and f.stage == stage
            and (f.times is None or self._struck.get(i, 0) < f.times)
        ]

    def _extra(self) -> int:
        armed = self._armed(PEAK)
        self._this_request.update(armed)
        return sum(self.faults[i].extra_bytes for i in armed)

    def current_allocated(self) -> int:
        armed = [
            i
            for kind in (OUT_OF_MEMORY, ERROR)
            for i in self._armed(kind)
            if i not in self._this_request
        ]
        if armed:
            self._this_request.update(armed)  # once a request: the request's exit reads again
            fault = self.faults[armed[0]]
            if fault.kind == ERROR:
                raise RuntimeError(f"request failed in {fault.stage} (injected)")
            raise torch.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate 2.00 GiB in {fault.stage} (injected)"
            )
        return self.inner.current_allocated()

    def peak_allocated(self) -> int:
        return self.inner.peak_allocated() + self._extra()

    def peak_reserved(self) -> int:
        return self.inner.peak_reserved() + self._extra()

    def reset_peak(self) -> None:
        self.inner.reset_peak()

    def synchronize(self) -> None:
        self.inner.synchronize()

    def release_pool(self) -> None:
        self.inner.release_pool()

    def memory_info(self) -> tuple[int, int]:
        return self.inner.memory_info()

    @contextlib.contextmanager
    def tracking(self) -> Iterator[None]:
        """The inner tracking; a request's end counts the faults that struck in it."""
        self._depth += 1
        try:
            with self.inner.tracking():
                yield
        finally:
            self._depth -= 1
            if not self._depth:
                for i in self._this_request:
                    self._struck[i] = self._struck.get(i, 0) + 1
                self._this_request.clear()

    def track_existing(self, tensors: Iterable[torch.Tensor]) -> None:
        self.inner.track_existing(tensors)
