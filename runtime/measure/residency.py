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
accelerate's hook chain keeps them. A component whose hooks move it group by group (diffusers'
group offloading: ``Group``) counts each group from its onload to its offload, as the hooks tell
them (``onload``, ``offload``); its weights in no group stay on the device. Weights that cannot
fit beside those the placement must hold with them raise ``WeightsOverCapacity``: no smaller
request fits. See docs/measurement.md, "Calibrating under offload".
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

import torch
from attrs import define, field, frozen
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

if TYPE_CHECKING:
    from torch._ops import OpOverload

    from runtime.measure.op_args import Reads

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


class Capacity(Protocol):
    """What onloading asks of the device's counter: room for ``nbytes`` more (else OOM)."""

    capacity: int | None
    weights: int

    def shift(self, nbytes: int, weights: int, *, check: bool = True) -> None:
        """Count ``nbytes`` more (negative: fewer) of resident weights; beyond the capacity,
        raise ``torch.OutOfMemoryError`` unless not ``check``."""


@frozen(eq=False)
class Group:
    """Weights a placement's hooks move on and off the device together (one block of diffusers'
    group offloading, or a component's weights outside its blocks), by identity."""

    component: str
    label: str  # what it is, for a message: ``transformer_blocks.0``
    nbytes: int
    storages: tuple[torch.UntypedStorage, ...]


class WeightsOverCapacity(torch.OutOfMemoryError):
    """Weights that must be on the device at once exceed its capacity, whatever the request."""

    def __init__(
        self, component: str, part: str | None, nbytes: int, held: int, capacity: int, whole: int
    ) -> None:
        what = f"{component} ({whole} bytes)" if part is None else f"{component}'s {part}"
        super().__init__(
            f"{what} needs {nbytes} bytes on the device beside {held} bytes of weights the "
            f"placement holds there with it, over the device's {capacity} bytes"
        )
        self.component, self.part, self.nbytes = component, part, nbytes
        self.held, self.capacity, self.whole = held, capacity, whole


@define(eq=False)
class Residency:
    """What a placement holds on a CPU "device": pinned components always, swapped ones while
    loaded (one at a time, from their first read), grouped ones group by group."""

    sizes: Mapping[str, int]
    swapped: frozenset[str] = frozenset()
    loaded: set[str] = field(factory=set)
    counter: Capacity | None = None
    streamed: dict[str, int] = field(factory=dict)  # grouped component -> bytes in its groups
    onloaded: dict[Group, None] = field(factory=dict)  # groups on the device now, in order
    _by_read: set[Group] = field(factory=set)  # onloaded by a read no hook preceded
    _group_of: dict[int, tuple[Group, _Ref]] = field(factory=dict)  # storage -> its group

    def set_groups(self, groups: Iterable[Group]) -> None:
        """The placement's hooks move ``groups``: their components count group by group."""
        for group in groups:
            if group.component in self.sizes and group.component not in self.swapped:
                self.streamed[group.component] = self.streamed.get(group.component, 0)
                self.streamed[group.component] += group.nbytes
                for storage in group.storages:
                    self._group_of[id(storage)] = (group, weakref.ref(storage))

    def stream(self, groups: Iterable[Group]) -> None:
        """A placement now in force moves ``groups`` (a plan's streamed blocks): their components
        count group by group, their weights in no group stay on the device."""
        groups = tuple(groups)
        self.offload_all()
        before = self.pinned_bytes
        self.swapped = self.swapped - {g.component for g in groups}
        self.set_groups(groups)
        if self.counter is not None:  # beyond the cap, the next allocation raises
            self.counter.shift(self.pinned_bytes - before, self.pinned_bytes - before, check=False)

    @property
    def pinned_bytes(self) -> int:
        """Weights the placement keeps on the device for the whole request."""
        return sum(
            max(0, b - self.streamed.get(n, 0))
            for n, b in self.sizes.items()
            if n not in self.swapped
        )

    @property
    def resident_bytes(self) -> int:
        """Weights on the device now."""
        groups = sum(g.nbytes for g in self.onloaded)
        return self.pinned_bytes + sum(self.sizes[n] for n in self.loaded) + groups

    def read(self, name: str, tensor: torch.Tensor | None = None) -> None:
        """An op read ``name``: a swapped component not loaded is loaded, the others offloaded;
        a group its hooks did not onload (a method other than ``forward`` ran it) is onloaded
        until they offload it, the component returns or another component's group is onloaded."""
        if name in self.streamed and tensor is not None:
            entry = self._group_of.get(id(tensor.untyped_storage()))
            if entry is not None and entry[0] not in self.onloaded:
                self.onload(entry[0])
                self._by_read.add(entry[0])
            return
        if name not in self.swapped or name in self.loaded:
            return
        self.offload_all()
        self._move(self.sizes[name], name)
        self.loaded.add(name)

    def entered(self, name: str) -> None:
        """``name`` starts (its entry point's hook): the placement's hook offloads the other
        loaded components before it runs, and onloads it when it is a swapped one."""
        for other in sorted(self.loaded - {name}):
            self.loaded.discard(other)
            self._move(-self.sizes[other])
        for group in [g for g in self._by_read if g.component != name]:
            self.offload(group)  # onloaded by reads: no hook keeps it past another's start
        self.read(name)

    def exited(self, name: str) -> None:
        """``name`` returned: the groups of it that reads onloaded go back to the host."""
        for group in [g for g in self._by_read if g.component == name]:
            self.offload(group)

    def onload(self, group: Group) -> None:
        """The hooks move ``group`` onto the device (counted before the move, as an allocator
        refuses before it copies)."""
        if group.component not in self.streamed or group in self.onloaded:
            return
        for other in [g for g in self._by_read if g.component != group.component]:
            self.offload(other)  # onloaded by reads: no hook keeps it past another's work
        self._move(group.nbytes, group.component, group.label)
        self.onloaded[group] = None

    def offload(self, group: Group) -> None:
        """The hooks moved ``group`` back to the host."""
        if group in self.onloaded:
            del self.onloaded[group]
            self._by_read.discard(group)
            self._move(-group.nbytes)

    def follow(self, swapped: frozenset[str]) -> None:
        """Another placement took over (a plan applied): ``swapped`` are the ones it moves now."""
        self.offload_all()
        for group in list(self.onloaded):
            self.offload(group)
        before = self.pinned_bytes
        self.swapped = swapped & frozenset(self.sizes)
        self.streamed.clear()
        self._group_of.clear()
        if self.counter is not None:  # beyond the cap, the next allocation raises
            self.counter.shift(self.pinned_bytes - before, self.pinned_bytes - before, check=False)

    def offload_all(self) -> None:
        """Every swapped component back to the host (diffusers' ``maybe_free_model_hooks``)."""
        for other in sorted(self.loaded):
            self.loaded.discard(other)
            self._move(-self.sizes[other])

    def _move(self, nbytes: int, component: str | None = None, part: str | None = None) -> None:
        """Count ``nbytes`` of weights moved; an onload of ``component`` that cannot fit beside
        the weights held with it, whatever the request, is ``WeightsOverCapacity``."""
        if self.counter is None or not nbytes:
            return
        try:
            self.counter.shift(nbytes, nbytes)
        except torch.OutOfMemoryError as exc:
            cap = self.counter.capacity
            mine = sum(g.nbytes for g in self.onloaded if g.component == component)
            held = self.pinned_bytes + mine
            if component is None or cap is None or held + nbytes <= cap:
                raise
            whole = self.sizes[component]
            raise WeightsOverCapacity(component, part, nbytes, held, cap, whole) from exc


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
        """One op's arguments (before it runs: a component is onloaded before it computes).

        Its tensor arguments and its lists' (``cat``'s tensors, ``addmm``'s weight) each looked
        up as ``WeightMap.component_of`` does (``_look``)."""
        for a in args:
            if isinstance(a, torch.Tensor):
                self._look(a)
            elif isinstance(a, (list, tuple)):
                self.seen(a)  # a list's tensors (aten nests no deeper)

    def seen_at(self, args: tuple[object, ...], reads: Reads) -> None:
        """``seen`` for a dispatch mode that knows the op's schema: only the arguments that can
        hold a tensor are looked at (``Reads.of``), not a ``view``'s sizes or a conv's strides.

        Called for every op: written flat (no generator, no tuple built per argument, no call
        for a tensor that is no weight), the look-up inline."""
        get = self.weights.owner.get
        n = len(args)
        for i in reads.tensors:
            if i < n:
                a = args[i]
                if isinstance(a, torch.Tensor):
                    entry = get(id(a))
                    if entry is None or entry[1]() is not a:
                        storage = a.untyped_storage()
                        entry = get(id(storage))
                        if entry is None or entry[1]() is not storage:
                            continue
                    self._read(entry[0], a)
        for i in reads.lists:
            if i < n:
                self.seen((args[i],))

    def _look(self, a: torch.Tensor) -> None:
        """``a`` read: its component's, when it is (or views) a weight."""
        get = self.weights.owner.get
        entry = get(id(a))
        if entry is None or entry[1]() is not a:
            storage = a.untyped_storage()
            entry = get(id(storage))
            if entry is None or entry[1]() is not storage:
                return
        self._read(entry[0], a)

    def _read(self, name: str, t: torch.Tensor) -> None:
        """``t`` is one of ``name``'s weights: the residency follows it, the listener is told."""
        if self.residency is not None:
            self.residency.read(name, t)
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
