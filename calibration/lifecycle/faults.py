"""Failures injected at the memory backend's boundary: an out-of-memory error in a chosen stage, a
measured peak above the plan's there, or another error failing the request. Tests and
bench/lifecycle_gpu.py drive the lifecycle's roll-back this way on a real pipeline, without a mock
of the pipeline or of diffusers.

``FaultyBackend`` wraps a real ``MemoryBackend`` and asks the recorder which stage the request is
in (``watch``). An out-of-memory fault raises ``torch.OutOfMemoryError`` from the first counter read
inside the stage (a window opening: the error leaves through the pipeline's own forward, as a real
allocation failure would); a peak fault adds bytes to every peak read inside the stage. Each fault
strikes in at most ``times`` requests (None: every one). A slow fault spends ``delay_s`` seconds of
this thread's CPU time (real work, read by the recorder's CPU clock as any other) at the first
counter read inside the stage: the request really is that much slower. A fault lets ``after``
requests pass first: ``after=1`` strikes the re-warm after a first validation that held (the
request after it), or a later validation.

Undo and rollback failures are injected at accelerate's boundary: ``failing_detach`` adds a hook
to a component that fails to come off (the component keeps its hooks). A ``CALL`` fault runs its
``action`` at the first counter read inside its stage (e.g. ``failing_detach`` on a component the
plan in force has hooked, which ``apply`` would refuse beforehand). A move that fails while a plan
is applied is injected at torch's: ``failing_to`` makes one component's ``.to()`` raise.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator

import torch
from attrs import define, field, frozen
from torch import nn

from runtime.measure.delegating import DelegatingBackend

OUT_OF_MEMORY, PEAK, ERROR, SLOW, CALL = "out-of-memory", "peak", "error", "slow", "call"
KINDS = (OUT_OF_MEMORY, PEAK, ERROR, SLOW, CALL)


@frozen
class Fault:
    """A failure: ``kind`` in ``stage``, ``extra_bytes`` for a peak, ``delay_s`` for a slow one
    (``times`` requests, after the first ``after`` requests passed)."""

    stage: str
    kind: str = OUT_OF_MEMORY
    extra_bytes: int = 0
    times: int | None = None
    delay_s: float = 0.0
    action: Callable[[], object] | None = field(default=None, eq=False)
    after: int = 0

    def __attrs_post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"a fault is one of {KINDS}, not {self.kind!r}")


def _faults(value: Iterable[Fault]) -> tuple[Fault, ...]:
    return tuple(value)


@define
class FaultyBackend(DelegatingBackend):
    """A real backend whose counters fail or read high in chosen stages (``faults``)."""

    faults: tuple[Fault, ...] = field(converter=_faults, default=())
    _stage: Callable[[], str | None] = field(default=lambda: None, init=False)
    _struck: dict[int, int] = field(factory=dict, init=False)  # fault index -> requests struck
    _this_request: set[int] = field(factory=set, init=False)
    _depth: int = field(default=0, init=False)
    _requests: int = field(default=0, init=False)  # requests begun (tracked) so far

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
            and self._requests > f.after
            and (f.times is None or self._struck.get(i, 0) < f.times)
        ]

    def _extra(self) -> int:
        armed = self._armed(PEAK)
        self._this_request.update(armed)
        return sum(self.faults[i].extra_bytes for i in armed)

    def current_allocated(self) -> int:
        armed = [
            i
            for kind in (CALL, SLOW, OUT_OF_MEMORY, ERROR)
            for i in self._armed(kind)
            if i not in self._this_request
        ]
        for i in [i for i in armed if self.faults[i].kind in (SLOW, CALL)]:
            self._this_request.add(i)
            armed.remove(i)
            fault = self.faults[i]
            spin(fault.delay_s)
            if fault.action is not None:
                fault.action()
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

    @contextlib.contextmanager
    def tracking(self) -> Iterator[None]:
        """The inner tracking; a request's end counts the faults that struck in it."""
        self._requests += not self._depth
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


def spin(seconds: float) -> None:
    """Spend ``seconds`` of this thread's CPU time in real work (a sleep would not count on the
    recorder's CPU clock)."""
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        x = (x * 31 + 7) % 1_000_003


def failing_detach(module: nn.Module, times: int = 1) -> None:
    """Append an accelerate hook to ``module`` that fails to detach ``times`` times (then comes
    off): undo meets it in accelerate's own ``remove_hook_from_module``."""
    from accelerate.hooks import ModelHook, add_hook_to_module

    left = [times]

    class FailingDetach(ModelHook):
        """A hook that refuses to come off (a third-party hook failing)."""

        def detach_hook(self, module: nn.Module) -> nn.Module:
            if left[0] > 0:
                left[0] -= 1
                raise RuntimeError("hook failed to detach (injected)")
            return module

    add_hook_to_module(module, FailingDetach(), append=True)


def failing_to(module: nn.Module, error: Callable[[], BaseException], times: int = 1) -> None:
    """Make ``module.to(...)`` raise ``error()`` the next ``times`` calls (then move as usual):
    a component whose move fails while a plan is applied (an allocation failure, a driver error).

    The module's class becomes a subclass overriding ``to`` (accelerate takes a ``to`` set on the
    instance off again when it removes a hook)."""
    kind = type(module)
    left = [times]

    def to(self: nn.Module, *args: object, **kwargs: object) -> nn.Module:
        if left[0] > 0:
            left[0] -= 1
            raise error()
        return kind.to(self, *args, **kwargs)  # type: ignore[call-overload]

    module.__class__ = type(kind.__name__, (kind,), {"to": to})
