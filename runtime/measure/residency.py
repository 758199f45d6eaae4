"""Which component's weights an op reads, and which weights a placement holds on the device.

Every parameter and buffer storage is mapped to its component (``WeightMap``). The dispatch mode
that already sees every op (the CPU tracker's, or ``reads_mode`` on an accelerator) hands each op's
tensor arguments to ``WeightReads.seen``: an op that reads a component's weights marks it active in
the open phases, whatever method ran it (``forward``, ``get_text_features``, ``decode``).

On the CPU the "device" and the "host" are the same memory, so the placement's moves cannot be
seen as copies. ``Residency`` counts instead what the placement holds on the device: the components
it keeps there (``pinned``) for the whole request, and each component it moves on and off
(``swapped``, as diffusers' model CPU offload does) from the first op reading its weights until
another swapped component is read or the request ends -- one swapped component at a time, as
accelerate's hook chain keeps them. See docs/measurement.md, "Calibrating under offload".
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

import torch
from attrs import define, field
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

if TYPE_CHECKING:
    from torch._ops import OpOverload

_Ref = weakref.ref[object]


class ReadListener(Protocol):
    """Told the first time in a segment that an op read a component's weights."""

    def component_read(self, name: str) -> None:
        """An op read one of ``name``'s parameters or buffers."""


def _keys(tensor: torch.Tensor) -> Iterator[object]:
    """The objects a read of ``tensor`` is recognised by: the tensor (a parameter keeps its Python
    object when a placement moves its data) and its storage (views share it)."""
    yield tensor
    yield tensor.untyped_storage()


@define(eq=False)
class WeightMap:
    """Each parameter and buffer (and its storage) -> its component; bytes per component."""

    owner: dict[int, tuple[str, _Ref]] = field(factory=dict)
    sizes: dict[str, int] = field(factory=dict)

    @classmethod
    def of(cls, components: Mapping[str, nn.Module]) -> WeightMap:
        """The map of ``components`` now (storages counted once per component, tied ones too)."""
        out = cls()
        for name, module in components.items():
            storages: dict[int, int] = {}
            for t in (*module.parameters(), *module.buffers()):
                for key in _keys(t):
                    out.owner.setdefault(id(key), (name, weakref.ref(key)))
                storage = t.untyped_storage()
                storages[id(storage)] = storage.nbytes()
            out.sizes[name] = sum(storages.values())
        return out

    def component_of(self, tensor: torch.Tensor) -> str | None:
        """The component whose weight ``tensor`` is (or views), if any."""
        for key in (tensor, tensor.untyped_storage()):
            entry = self.owner.get(id(key))
            if entry is not None and entry[1]() is key:
                return entry[0]
        return None

    def is_weight_storage(self, storage: torch.UntypedStorage) -> bool:
        """Whether ``storage`` holds a component's weights (the residency counts it, not the op)."""
        entry = self.owner.get(id(storage))
        return entry is not None and entry[1]() is storage


def _tensors(args: Iterable[object]) -> Iterator[torch.Tensor]:
    """Tensor arguments of an op, one list level deep (``cat``'s tensors, ``addmm``'s weight)."""
    for a in args:
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (t for t in a if isinstance(t, torch.Tensor))


class Capacity(Protocol):
    """What onloading asks of the device's counter: room for ``nbytes`` more (else OOM)."""

    def shift(self, nbytes: int, weights: int, *, check: bool = True) -> None:
        """Count ``nbytes`` more (negative: fewer) of resident weights; beyond the capacity,
        raise ``torch.OutOfMemoryError`` unless not ``check``."""


@define(eq=False)
class Residency:
    """What a placement holds on a CPU "device": pinned components always, swapped ones while
    loaded (one at a time, from their first read)."""

    sizes: Mapping[str, int]
    swapped: frozenset[str] = frozenset()
    loaded: set[str] = field(factory=set)
    counter: Capacity | None = None

    @property
    def pinned_bytes(self) -> int:
        """Weights the placement keeps on the device for the whole request."""
        return sum(b for n, b in self.sizes.items() if n not in self.swapped)

    @property
    def resident_bytes(self) -> int:
        """Weights on the device now."""
        return self.pinned_bytes + sum(self.sizes[n] for n in self.loaded)

    def read(self, name: str) -> None:
        """An op read ``name``: a swapped component not loaded is loaded, the others offloaded."""
        if name not in self.swapped or name in self.loaded:
            return
        self.offload_all()
        self._move(self.sizes[name])
        self.loaded.add(name)

    def entered(self, name: str) -> None:
        """``name`` starts (its entry point's hook): the placement's hook offloads the other
        loaded components before it runs, and onloads it when it is a swapped one."""
        for other in sorted(self.loaded - {name}):
            self.loaded.discard(other)
            self._move(-self.sizes[other])
        self.read(name)

    def follow(self, swapped: frozenset[str]) -> None:
        """Another placement took over (a plan applied): ``swapped`` are the ones it moves now."""
        self.offload_all()
        before = self.pinned_bytes
        self.swapped = swapped & frozenset(self.sizes)
        if self.counter is not None:  # beyond the cap, the next allocation raises
            self.counter.shift(self.pinned_bytes - before, self.pinned_bytes - before, check=False)

    def offload_all(self) -> None:
        """Every swapped component back to the host (diffusers' ``maybe_free_model_hooks``)."""
        for other in sorted(self.loaded):
            self.loaded.discard(other)
            self._move(-self.sizes[other])

    def _move(self, nbytes: int) -> None:
        if self.counter is not None and nbytes:
            self.counter.shift(nbytes, nbytes)


@define(eq=False)
class WeightReads:
    """Attributes each op's weight reads to components, for a listener and a CPU residency."""

    weights: WeightMap
    residency: Residency | None = None
    fused: bool = False  # the backend's own dispatch mode calls ``seen`` (no ``reads_mode``)
    listener: ReadListener | None = None
    _marked: set[str] = field(factory=set)

    def new_segment(self) -> None:
        """A window opened: the next read of every component is told again."""
        self._marked.clear()

    def seen(self, args: Iterable[object]) -> None:
        """One op's arguments (before it runs: a component is onloaded before it computes)."""
        for t in _tensors(args):
            name = self.weights.component_of(t)
            if name is None:
                continue
            if self.residency is not None:
                self.residency.read(name)
            if name not in self._marked and self.listener is not None:
                self._marked.add(name)
                self.listener.component_read(name)


class _ReadMode(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch's is untyped
    """Sees every op's arguments and hands them to ``WeightReads`` (backends without a mode)."""

    def __init__(self, reads: WeightReads) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # torch: untyped
        self.reads = reads

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """Eager warmup code only: no dynamo wrapper (``backends._LiveStorageMode`` says why)."""
        return False

    def __torch_dispatch__(
        self,
        func: OpOverload,
        types: Collection[type],
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        self.reads.seen(args)
        return func(*args, **(kwargs or {}))


def reads_mode(reads: WeightReads) -> contextlib.AbstractContextManager[object]:
    """A dispatch mode attributing weight reads (for a backend that pushes no mode of its own)."""
    return _ReadMode(reads)


def device_weight_bytes(weights: Mapping[str, nn.Module], device: torch.device) -> int:
    """Bytes of the components' weights on ``device`` now (each storage once)."""
    storages: dict[tuple[int, torch.device], int] = {}
    for module in weights.values():
        for t in (*module.parameters(), *module.buffers()):
            if t.device.type == device.type:
                s = t.untyped_storage()
                storages[s.data_ptr(), t.device] = s.nbytes()
    return sum(storages.values())
