"""The warmup recorder: one ``WarmupRecord`` per warmup request, phases and iterations included.

Usage::

    recorder = WarmupRecorder(book["wan2_1_t2v_14b"], device="cpu")
    with recorder.request(steps=2, frames=5, height=32, width=32) as req:
        with req.stage("DenoisingStage", components=("transformer",)):
            for _ in range(2):
                with req.iteration():
                    ...
    record = recorder.records[-1]

A request that raises still produces a record (``record.error`` says why, and the phases measured
up to the failure are kept); the exception is then re-raised, so the probe logic above the
recorder decides whether to retry lighter.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence

import torch
from attrs import define, field
from torch import nn

from runtime.errors import RuntimeValueError
from runtime.measure.backends import MemoryBackend, backend_for
from runtime.measure.layers import iter_tensors
from runtime.measure.request import AutoStages, FormulaPipeline, Request
from runtime.measure.residency import WeightMap, WeightReads
from runtime.measure.serving import ServingMonitor, enter_serving
from runtime.record import WarmupRecord, save_records

#: Served requests' records a recorder keeps (the oldest dropped first): serving never ends.
SERVED_KEPT = 1024

__all__ = ["AutoStages", "FormulaPipeline", "Request", "WarmupRecorder"]


def watch(backend: MemoryBackend, components: Mapping[str, nn.Module]) -> WeightReads:
    """The backend's weight reads (the CPU tracker's counts the placement's residency too), or
    reads attributed through their own dispatch mode (``reads_mode``) for any other backend."""
    own = getattr(backend, "watch_weights", None)
    if callable(own):
        reads = own(components)
        if isinstance(reads, WeightReads):
            return reads
    return WeightReads(WeightMap.of(components))


def _names(value: Iterable[str]) -> tuple[str, ...]:
    """Component names as a tuple (any iterable accepted)."""
    return tuple(value)


@define
class WarmupRecorder:
    """Records warmup requests of one pipeline on one device, then hands over to serving."""

    pipeline: FormulaPipeline
    device: str | torch.device = "auto"
    backend: MemoryBackend = field(default=None)
    components: Mapping[str, nn.Module] = field(factory=dict)
    layerwise: tuple[str, ...] = field(converter=_names, default=())
    layer_groups: Mapping[str, Iterable[str]] | None = None
    entry_points: Mapping[str, str | Sequence[str]] = field(factory=dict)
    auto_stages: AutoStages | None = None
    synchronize: bool = True
    clock: Callable[[], float] = time.perf_counter
    _records: list[WarmupRecord] = field(factory=list, init=False)
    _staging_caches: list[Callable[[], object]] = field(factory=list, init=False)
    _serving: ServingMonitor | None = field(default=None, init=False)
    _served: deque[WarmupRecord] = field(factory=lambda: deque(maxlen=SERVED_KEPT), init=False)
    _active: Request | None = field(default=None, init=False)
    reads: WeightReads = field(default=None, init=False)  # which component each op reads

    def __attrs_post_init__(self) -> None:
        if self.backend is None:
            self.backend = backend_for(self.device)
        self.device = self.backend.device
        unknown = set(self.layerwise) - set(self.components)
        if unknown:
            raise RuntimeValueError(
                f"layerwise components {sorted(unknown)} are not among components "
                f"{sorted(self.components)}"
            )
        self.reads = watch(self.backend, self.components)
        self.backend.track_existing(iter_tensors(self.components.values()))

    @property
    def records(self) -> tuple[WarmupRecord, ...]:
        """Every record so far, oldest first."""
        return tuple(self._records)

    @property
    def active(self) -> Request | None:
        """The request being recorded now, if any (what a fault-injecting backend keys on)."""
        return self._active

    def request(self, **params: int | bool) -> Request:
        """Record one warmup request; params left out take the pipeline's default workload."""
        if self._serving is not None:
            raise RuntimeError(
                "warmup has ended; the recorder takes no more warmup requests (a served one: "
                "served_request)"
            )
        return self._request(params)

    def served_request(self, **params: int | bool) -> Request:
        """Record one served request, after warmup ended: a serving worker compares it with its
        prediction. Its record is kept apart, the last ``SERVED_KEPT`` (``served``)."""
        if self._serving is None:
            raise RuntimeError("warmup has not ended; record a warmup request with request()")
        return self._request(params)

    @property
    def served(self) -> tuple[WarmupRecord, ...]:
        """The last ``SERVED_KEPT`` served requests' records, oldest first."""
        return tuple(self._served)

    def _request(self, params: Mapping[str, int | bool]) -> Request:
        defaults = dict(self.pipeline.default_workload)
        unknown = set(params) - set(defaults)
        if unknown:
            raise RuntimeValueError(
                f"unknown params {sorted(unknown)} for pipeline {self.pipeline.name!r}; "
                f"known: {list(defaults)}"
            )
        full = {**defaults, **params}
        if not self.pipeline.is_admissible(**full):
            raise RuntimeValueError(
                f"params {full} are not admissible for {self.pipeline.name!r}: "
                + "; ".join(map(str, self.pipeline.violations(**full)))
            )
        return Request(self, full)

    def open_request(self, request: Request) -> None:
        """Make ``request`` the active one (``RequestOwner``): requests do not nest."""
        if self._active is not None:
            raise RuntimeError("a warmup request is already being recorded; requests do not nest")
        self._active = request

    def close_request(self, request: Request) -> None:
        """``request`` ended (``RequestOwner``): none is active now."""
        if self._active is request:
            self._active = None

    def keep_record(self, record: WarmupRecord) -> None:
        """Keep a finished request's record (``RequestOwner``): a served one apart, bounded."""
        (self._records if self._serving is None else self._served).append(record)

    def save(self, path: str) -> None:
        """Write every record atomically."""
        save_records(path, self._records)

    def register_staging_cache(self, release: Callable[[], object]) -> None:
        """A callable freeing a warmup-only cache (pinned staging buffers) when serving begins."""
        self._staging_caches.append(release)

    def end_warmup(self) -> ServingMonitor:
        """Release warmup-only memory and reset the peak: serving figures never include warmup."""
        if self._serving is None:
            self._serving = enter_serving(self.backend, tuple(self._staging_caches))
        return self._serving
