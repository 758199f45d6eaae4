"""The exact CPU backend's per-op path is written for speed (``backends._LiveStorageMode``,
``LiveStorageCounter``, ``WeightReads.seen``); the straightforward version kept here is its oracle:
on the tiny examples, under each placement, every served request's per-phase and per-iteration
peaks, baselines, resident weights and components must be the same, byte for byte."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import pytest
import torch
from attrs import define, field
from torch.utils._python_dispatch import TorchDispatchMode

from calibration.calibrate.run import load_pipeline
from calibration.core.host import quiet_libraries
from calibration.core.offload import Offload
from calibration.core.session import Session
from calibration.examples import EXAMPLES
from runtime.measure import backends
from runtime.measure.backends import LiveStorageCounter, LiveTensorBackend
from runtime.measure.residency import WeightReads
from runtime.record import WarmupRecord

if TYPE_CHECKING:
    from torch._ops import OpOverload

ROOT = Path(__file__).resolve().parents[2]
_Entry = tuple[int, weakref.ref[torch.UntypedStorage]]


@define
class _PlainCounter(LiveStorageCounter):
    """The counter as first written: a (bytes, weakref) tuple and a closure per storage."""

    _plain: dict[int, _Entry] = field(factory=dict)

    def add(self, storage: torch.UntypedStorage) -> None:
        key = id(storage)
        entry = self._plain.get(key)
        if entry is not None:
            self._plain_resize(key, entry, storage)
            return
        nbytes = storage.nbytes()
        self._room(nbytes)
        self._plain[key] = (nbytes, weakref.ref(storage, self._finalizer(key)))
        self._grow(nbytes)

    def refresh(self, storage: torch.UntypedStorage) -> None:
        entry = self._plain.get(id(storage))
        if entry is not None:
            self._plain_resize(id(storage), entry, storage)

    def _plain_resize(self, key: int, entry: _Entry, storage: torch.UntypedStorage) -> None:
        nbytes = storage.nbytes()
        if nbytes != entry[0] and entry[1]() is storage:
            self._room(nbytes - entry[0])
            self._plain[key] = (nbytes, entry[1])
            self._grow(nbytes - entry[0])

    def _finalizer(self, key: int) -> Callable[[weakref.ref[torch.UntypedStorage]], None]:
        def drop(ref: weakref.ref[torch.UntypedStorage]) -> None:
            entry = self._plain.get(key)
            if entry is not None and entry[1] is ref:
                del self._plain[key]
                self.current -= entry[0]

        return drop


def _tensors(args: tuple[object, ...]) -> Iterator[torch.Tensor]:
    for a in args:
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (t for t in a if isinstance(t, torch.Tensor))


def _plain_seen(reads: WeightReads, args: tuple[object, ...]) -> None:
    """``WeightReads.seen`` as first written: a generator and ``component_of`` per tensor."""
    for t in _tensors(args):
        name = reads.weights.component_of(t)
        if name is not None:
            reads._read(name, t)


class _PlainMode(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch's is untyped
    """The dispatch mode as first written: every aliasing op's outputs refreshed, ``.device``."""

    def __init__(
        self,
        counter: LiveStorageCounter,
        device_type: str,
        reads: WeightReads,
        plans: object = None,  # the fast mode's per-op plans: this one decides op by op
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # torch: untyped
        self.counter, self.device_type, self.reads = counter, device_type, reads

    def __torch_dispatch__(
        self,
        func: OpOverload,
        types: Collection[type],
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        if self.reads is not None:
            _plain_seen(self.reads, args)
        out = func(*args, **(kwargs or {}))
        aliasing = any(r.alias_info is not None for r in func._schema.returns)
        seen = self.counter.refresh if aliasing else self.counter.add
        outs = out if isinstance(out, (tuple, list)) else (out,)
        for t in outs:
            if type(t) is torch.Tensor and t.device.type == self.device_type:
                seen(t.untyped_storage())
        return out


def _served(name: str, offload: Offload, backend: LiveTensorBackend) -> WarmupRecord:
    """A warmup request then a served one of the tiny example under ``offload``."""
    example = EXAMPLES[name]
    formulas = load_pipeline(ROOT / "formulas" / example.formula_file, example.pipeline)
    with quiet_libraries():
        session = Session(
            example.build(0),  # type: ignore[arg-type]  # any diffusers pipeline
            formulas,
            "cpu",
            call_kwargs=example.call_kwargs,
            backend=backend,
            offload=offload,
        )
        point = {**formulas.default_workload, "steps": 2}
        session.run(point)
        session.recorder.end_warmup()
        return session.run(point, served=True)


def _peaks(record: WarmupRecord) -> WarmupRecord:
    """The record without its clock: everything measured in bytes, and which components."""
    return attrs.evolve(
        record,
        duration_s=0.0,
        phases=tuple(attrs.evolve(p, duration_s=0.0) for p in record.phases),
        iterations=tuple(attrs.evolve(i, duration_s=0.0) for i in record.iterations),
    )


@pytest.mark.parametrize(
    ("name", "offload"),
    [("flux", Offload.NONE), ("sdxl", Offload.MODEL), ("flux", Offload.GROUP)],
)
def test_fast_path_counts_as_the_plain_one(
    name: str, offload: Offload, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _peaks(_served(name, offload, LiveTensorBackend()))
    monkeypatch.setattr(backends, "_LiveStorageMode", _PlainMode)
    plain = _peaks(_served(name, offload, LiveTensorBackend(counter=_PlainCounter())))
    assert fast.ok and plain.ok
    assert fast.phases and fast.iterations
    assert fast == plain
