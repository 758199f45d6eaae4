"""The warmup -> serving transition: release warmup-only memory and start a clean peak for serving.

Warmup runs probes, keeps staging buffers and grows the allocator pool; none of that may show in the
serving peak a worker reports. ``enter_serving`` releases the registered staging caches, returns the
allocator pool to the device (``empty_cache`` on CUDA; nothing on the CPU) and resets the peak.
"""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import Callable, Sequence

from attrs import frozen

from runtime.measure.backends import MemoryBackend
from runtime.measure.windows import PeakWindows

log = logging.getLogger(__name__)


@frozen
class TransitionReport:
    """What the transition released: allocated bytes before and after, caches released or failed."""

    allocated_before: int
    allocated_after: int
    caches_released: int
    cache_errors: tuple[str, ...]


@frozen
class ServingPeak:
    """Allocator peaks since serving began (never including warmup)."""

    allocated: int
    reserved: int


class ServingMonitor:
    """Serving-time memory figures, measured from the transition on."""

    def __init__(self, backend: MemoryBackend, report: TransitionReport) -> None:
        self.backend = backend
        self.report = report
        self._windows = PeakWindows(backend)
        self._window = self._windows.open()

    def tracking(self) -> contextlib.AbstractContextManager[object]:
        """Wrap serving requests in this on the CPU, whose tracker only counts while active."""
        return self.backend.tracking()

    def peak(self) -> ServingPeak:
        """The highest allocation since the transition."""
        self._windows.fold()
        return ServingPeak(self._window.peak_allocated, self._window.peak_reserved)


def enter_serving(backend: MemoryBackend, caches: Sequence[Callable[[], object]]) -> ServingMonitor:
    """Release staging caches and the allocator pool, reset the peak, and start serving figures."""
    backend.synchronize()
    before = backend.current_allocated()
    errors: list[str] = []
    released = 0
    for release in caches:
        try:
            release()
            released += 1
        except Exception as exc:  # noqa: BLE001 - one bad cache must not stop serving
            log.warning("staging cache release %r failed: %s", release, exc)
            errors.append(f"{type(exc).__name__}: {exc}")
    gc.collect()
    backend.release_pool()
    backend.synchronize()
    backend.reset_peak()
    report = TransitionReport(before, backend.current_allocated(), released, tuple(errors))
    return ServingMonitor(backend, report)
