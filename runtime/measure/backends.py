"""Memory backends: one interface over the CUDA caching allocator and an exact CPU tensor count.

Both backends expose the same four primitives (current allocated, peak allocated, peak reserved,
reset the peak to the current value); everything else — nested phase windows, per-iteration peaks,
the warmup -> serving reset — is written once on top of them (``windows.PeakWindows``, the
recorder).
"""

from __future__ import annotations

import contextlib
import enum
import os
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any, NamedTuple, Protocol, runtime_checkable

import torch
from attrs import define, field
from torch import nn
from torch._ops import OpOverload
from torch.utils._python_dispatch import TorchDispatchMode

from runtime.levels import MAX_WEIGHT_LEVELS, Level, bounded, frontier
from runtime.measure.op_args import Reads
from runtime.measure.residency import (
    Group,
    Residency,
    WeightMap,
    WeightReads,
    device_weight_bytes,
)


@runtime_checkable
class MemoryBackend(Protocol):
    """What the recorder needs of a device: allocator counters, a clock barrier, a pool release."""

    name: str
    device: torch.device

    def current_allocated(self) -> int:
        """Bytes held by live tensors now."""

    def peak_allocated(self) -> int:
        """Highest ``current_allocated`` since the last ``reset_peak``."""

    def peak_reserved(self) -> int:
        """Highest bytes reserved from the device (allocator pool included) since the last reset."""

    def reset_peak(self) -> None:
        """Make both peaks equal to the current values: the start of a new measuring window."""

    def synchronize(self) -> None:
        """Wait for queued device work, so a clock read afterwards means something."""

    def release_pool(self) -> None:
        """Give cached but unused allocator memory back to the device."""

    def memory_info(self) -> tuple[int, int]:
        """``(free, total)`` bytes of the device, as the probe planner sees them."""

    def tracking(self) -> contextlib.AbstractContextManager[object]:
        """Context in which allocations are counted (the CPU tracker must be active to see them)."""

    def track_existing(self, tensors: Iterable[torch.Tensor]) -> None:
        """Count tensors created before tracking began (weights), so the baseline includes them."""


# --- accelerators: the device module's own allocator statistics --------------------------------


@define
class AllocatorBackend:
    """CUDA (or any accelerator with the same memory API) through ``torch.get_device_module``."""

    device: torch.device
    # The device module (torch.cuda, torch.xpu, ...): torch types it as a bare ModuleType, whose
    # attributes are untyped, so nothing here can say more of its allocator functions.
    module: Any = field(default=None)
    name: str = "allocator"
    capacity: int | None = None  # caps the process's share of the device (``cap_device``)
    _components: Mapping[str, nn.Module] = field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        if self.module is None:
            self.module = torch.get_device_module(self.device)
        if self.device.index is None:
            self.device = torch.device(self.device.type, self.module.current_device())
        self.name = f"{self.device.type}-allocator"
        if self.capacity is not None:
            cap_device(self.module, self.device, self.capacity)

    def watch_weights(self, components: Mapping[str, nn.Module]) -> WeightReads:
        """Attribute weight reads (through ``reads_mode``); weights on the device are real."""
        self._components = components
        return WeightReads(WeightMap.of(components))

    def peak_weights(self) -> int:
        """The components' bytes on the device now (read at each window boundary)."""
        return device_weight_bytes(self._components, self.device)

    def current_allocated(self) -> int:
        return int(self.module.memory_allocated(self.device))

    def peak_allocated(self) -> int:
        return int(self.module.max_memory_allocated(self.device))

    def peak_reserved(self) -> int:
        return int(self.module.max_memory_reserved(self.device))

    def reset_peak(self) -> None:
        self.module.reset_peak_memory_stats(self.device)

    def synchronize(self) -> None:
        self.module.synchronize(self.device)

    def release_pool(self) -> None:
        self.module.empty_cache()

    def memory_info(self) -> tuple[int, int]:
        free, total = self.module.mem_get_info(self.device)
        return int(free), int(total)

    def tracking(self) -> contextlib.AbstractContextManager[object]:
        return contextlib.nullcontext()

    def track_existing(self, tensors: Iterable[torch.Tensor]) -> None:
        """The allocator already counts every tensor on the device."""


def cap_device(module: Any, device: torch.device, capacity: int) -> None:
    """Make the device behave like one of ``capacity`` bytes: the allocator raises
    ``torch.OutOfMemoryError`` beyond it (``set_per_process_memory_fraction``)."""
    _, total = module.mem_get_info(device)
    if capacity > total:
        raise ValueError(f"a cap of {capacity} bytes exceeds the device's {total} bytes")
    module.set_per_process_memory_fraction(capacity / total, device)


# --- CPU: live tensor storages seen at the dispatcher ------------------------------------------


class _Tracked(weakref.ref):  # type: ignore[type-arg]  # a ref to an UntypedStorage
    """A weak reference to a followed storage that carries its key and counted bytes: one object
    per storage, and one shared callback, instead of a tuple and a closure per allocation."""

    __slots__ = ("key", "nbytes")
    key: int
    nbytes: int


@define
class LiveStorageCounter:
    """Live bytes per untyped storage, counted once however many views or in-place ops touch it.

    Storages are keyed by the identity of their Python object (torch keeps one per storage for its
    whole life) and forgotten by a weakref callback when freed. Not by ``data_ptr``: a resize moves
    the data and every empty storage shares pointer 0.
    """

    current: int = 0
    peak: int = 0
    capacity: int | None = None  # the calibration's cap: more raises torch.OutOfMemoryError
    weights: int = 0  # of ``current``: resident weights (``Residency``)
    peak_weights: int = 0  # resident weights when ``peak`` was reached
    peak_activations: int = 0  # the highest ``current - weights``: the activations' own peak
    level_activations: int = 0  # the highest ``current - weights`` at the current ``weights``
    _levels: dict[int, int] = field(factory=dict)  # of earlier weights: their activations' peak
    _live: dict[int, _Tracked] = field(factory=dict)

    def add(self, storage: torch.UntypedStorage) -> None:
        """Count a storage the first time it is seen (an op allocated it); forget it when freed.

        Called for every tensor every op makes: written flat (no helper calls when uncapped)."""
        key = id(storage)
        entry = self._live.get(key)
        if entry is not None:
            self._resize(entry, storage)
            return
        nbytes = storage.nbytes()
        if self.capacity is not None:
            self._room(nbytes)
        entry = _Tracked(storage, self._drop)
        entry.key, entry.nbytes = key, nbytes
        self._live[key] = entry
        self.current += nbytes
        if self.current > self.peak:
            self.peak, self.peak_weights = self.current, self.weights
        if self.current - self.weights > self.level_activations:  # flat: no call
            self.level_activations = self.current - self.weights
            if self.level_activations > self.peak_activations:  # noqa: PLR1730 (flat: no call)
                self.peak_activations = self.level_activations

    def shift(self, nbytes: int, weights: int, *, check: bool = True) -> None:
        """Count ``nbytes`` more (or fewer) that are not a storage an op made: weights onloaded
        (beyond the capacity: ``torch.OutOfMemoryError``, unless not ``check``)."""
        if check:
            self._room(nbytes)
        if weights:
            self._to_level(self.weights + weights, self.current + nbytes)
        self._grow(nbytes)

    def _to_level(self, weights: int, current: int) -> None:
        """Close the current weights level (its activations' peak kept) and open ``weights``',
        whose activations are those of ``current`` (the live bytes once the move is counted: an
        offload's weights are no activations of the level it leaves for)."""
        levels, was = self._levels, self.weights
        levels[was] = max(levels.get(was, self.level_activations), self.level_activations)
        if len(levels) > 4 * MAX_WEIGHT_LEVELS:  # bounded: merged upward, never under
            self._levels = dict(frontier(levels))
        self.weights = weights
        self.level_activations = self._levels.get(weights, current - weights)

    def _room(self, nbytes: int) -> None:
        """Refuse an allocation over the capacity, as the CUDA allocator does (before counting)."""
        if self.capacity is not None and nbytes > 0 and self.current + nbytes > self.capacity:
            raise torch.OutOfMemoryError(
                f"device out of memory: tried to allocate {nbytes} bytes with {self.current} "
                f"bytes in use of the calibration cap of {self.capacity} bytes (--device-capacity)"
            )

    def _grow(self, nbytes: int) -> None:
        self.current += nbytes
        if self.current > self.peak:
            self.peak, self.peak_weights = self.current, self.weights
        if self.current - self.weights > self.level_activations:  # flat: no call
            self.level_activations = self.current - self.weights
            if self.level_activations > self.peak_activations:  # noqa: PLR1730 (flat: no call)
                self.peak_activations = self.level_activations

    def refresh(self, storage: torch.UntypedStorage) -> None:
        """An op wrote into a storage (in place, ``out=``) and may have resized it: follow it."""
        entry = self._live.get(id(storage))
        if entry is not None:
            self._resize(entry, storage)

    def _resize(self, entry: _Tracked, storage: torch.UntypedStorage) -> None:
        nbytes = storage.nbytes()
        if nbytes != entry.nbytes and entry() is storage:
            self._room(nbytes - entry.nbytes)
            grown, entry.nbytes = nbytes - entry.nbytes, nbytes
            self._grow(grown)

    def _drop(self, entry: _Tracked) -> None:
        """A followed storage was freed (its weakref's callback): its bytes are no longer live."""
        if self._live.get(entry.key) is entry:
            del self._live[entry.key]
            self.current -= entry.nbytes

    @property
    def live_storages(self) -> int:
        """How many storages are being followed."""
        return len(self._live)

    def reset_peak(self) -> None:
        self.peak, self.peak_weights = self.current, self.weights
        self.peak_activations = self.level_activations = self.current - self.weights
        self._levels = {}

    def peak_levels(self) -> tuple[Level, ...]:
        """The activations' own peak per weights level since the last reset (``runtime.levels``:
        every level, or past ``MAX_WEIGHT_LEVELS`` their frontier merged upward)."""
        now = max(self._levels.get(self.weights, self.level_activations), self.level_activations)
        return bounded({**self._levels, self.weights: now})


class _Outputs(enum.Enum):
    """What an op's outputs are to the counter, by its schema (``_LiveStorageMode.kinds``)."""

    NEW = "new"  # storages it allocated: counted
    WRITTEN = "written"  # storages it wrote in place or through ``out=`` (maybe resized): followed
    VIEWS = "views"  # views of its inputs' storages: a view never resizes one, nothing to do

    @classmethod
    def of(cls, func: OpOverload) -> _Outputs:
        aliases = [r.alias_info for r in func._schema.returns if r.alias_info is not None]
        if not aliases:
            return cls.NEW
        return cls.WRITTEN if any(a.is_write for a in aliases) else cls.VIEWS


class _Plan(NamedTuple):
    """What the dispatch mode decided once for an op: the callable to run (the overload's C++
    entry, no Python ``__call__`` frame), what its outputs are, which arguments can be weights
    it reads, and the op (kept alive: the mode's table is keyed by its identity)."""

    op: Callable[..., object]
    outputs: _Outputs
    reads: Reads
    func: OpOverload

    @classmethod
    def of(cls, func: OpOverload) -> _Plan:
        direct = type(func).__call__ is OpOverload.__call__  # a subclass may call otherwise
        return cls(func._op if direct else func, _Outputs.of(func), Reads.of(func), func)


class _LiveStorageMode(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch's is untyped
    """Sees every aten op's outputs and counts the storages that the op newly allocated."""

    def __init__(
        self,
        counter: LiveStorageCounter,
        device_type: str,
        reads: WeightReads | None = None,
        plans: dict[int, _Plan] | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # torch: untyped
        self.counter = counter
        self.device_type = device_type
        self.cpu = device_type == "cpu"
        self.reads = reads  # weight reads attributed (and onloaded) before each op runs
        # per op, by identity: what to call, what it outputs (shared: the backend's, kept across
        # requests, so an op's schema is read once per process, not once per request)
        self.plans: dict[int, _Plan] = {} if plans is None else plans
        self.add, self.refresh = counter.add, counter.refresh  # bound once, not per op

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """Opt out of wrapping ``__torch_dispatch__`` in ``torch._dynamo.disable``.

        The wrapper imports torch._dynamo on first use (seconds) and costs about a microsecond per
        op; the tracker measures eager warmup code, which dynamo never traces.
        """
        return False

    def __torch_dispatch__(
        self,
        func: OpOverload,
        types: Collection[type],
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        plan = self.plans.get(id(func))  # by identity: an OpOverload's hash is Python code
        if plan is None:
            plan = self.plans[id(func)] = _Plan.of(func)
        op, kind, reads, _ = plan
        if self.reads is not None:
            self.reads.seen_at(args, reads)
        out = op(*args, **kwargs) if kwargs else op(*args)
        if kind is _Outputs.VIEWS:
            return out
        seen = self.add if kind is _Outputs.NEW else self.refresh
        if type(out) is torch.Tensor:
            if out.is_cpu if self.cpu else out.device.type == self.device_type:
                seen(out.untyped_storage())
        elif isinstance(out, (tuple, list)):
            cpu, device_type = self.cpu, self.device_type  # ``is_cpu``: no ``torch.device`` built
            for t in out:
                if type(t) is torch.Tensor and (t.is_cpu if cpu else t.device.type == device_type):
                    seen(t.untyped_storage())
        return out


def _available_memory() -> tuple[int, int]:
    """``(available, total)`` host memory from /proc/meminfo, falling back to sysconf."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in handle}
        return info["MemAvailable"], info["MemTotal"]
    except (OSError, KeyError, ValueError, IndexError):
        page = os.sysconf("SC_PAGE_SIZE")
        return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page


@define
class LiveTensorBackend:
    """Exact CPU accounting: bytes of live storages created while tracking (plus those seeded)."""

    device: torch.device = field(factory=lambda: torch.device("cpu"))
    name: str = "cpu-live-tensors"
    counter: LiveStorageCounter = field(factory=LiveStorageCounter)
    capacity: int | None = None  # the calibration's cap (``LiveStorageCounter.capacity``)
    swapped: frozenset[str] = frozenset()  # components the placement moves on and off
    groups: tuple[Group, ...] = ()  # what it moves group by group (its hooks tell each move)
    reads: WeightReads | None = field(default=None, init=False)
    plans: dict[int, _Plan] = field(factory=dict, init=False)  # the mode's per-op decisions
    _mode: _LiveStorageMode | None = field(default=None, init=False)
    _depth: int = field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        self.counter.capacity = self.capacity

    def watch_weights(self, components: Mapping[str, nn.Module]) -> WeightReads:
        """Count the components' weights as the placement holds them (``Residency``): pinned ones
        from now on, swapped ones while loaded, grouped ones group by group; every op's weight
        reads are attributed."""
        weights = WeightMap.of(components)
        residency = Residency(
            weights.sizes, self.swapped & set(weights.sizes), counter=self.counter
        )
        residency.set_groups(self.groups)
        pinned = residency.pinned_bytes
        self.counter.shift(pinned, pinned)
        self.reads = WeightReads(weights, residency, fused=True)
        return self.reads

    def peak_weights(self) -> int:
        """Resident weights when the peak since the last reset was reached."""
        return self.counter.peak_weights

    def peak_activations(self) -> int:
        """The highest live bytes less the resident weights since the last reset: the
        activations' own peak, which under offload need not be where the weights peak."""
        return self.counter.peak_activations

    def peak_levels(self) -> tuple[Level, ...]:
        """The activations' own peak per amount of weights on the device since the last reset."""
        return self.counter.peak_levels()

    def group_onloaded(self, group: Group) -> None:
        """The placement's hooks are moving ``group`` onto the device (beyond the cap: OOM)."""
        if self.reads is not None and self.reads.residency is not None:
            self.reads.residency.onload(group)

    def group_offloaded(self, group: Group) -> None:
        """The placement's hooks moved ``group`` back to the host."""
        if self.reads is not None and self.reads.residency is not None:
            self.reads.residency.offload(group)

    def current_allocated(self) -> int:
        return self.counter.current

    def peak_allocated(self) -> int:
        return self.counter.peak

    def peak_reserved(self) -> int:
        """No caching pool on the CPU: reserved is what is allocated."""
        return self.counter.peak

    def reset_peak(self) -> None:
        self.counter.reset_peak()

    def synchronize(self) -> None:
        """CPU ops finish before they return."""

    def release_pool(self) -> None:
        """Nothing cached to release on the CPU."""

    def memory_info(self) -> tuple[int, int]:
        if self.capacity is not None:
            return max(0, self.capacity - self.counter.current), self.capacity
        return _available_memory()

    @contextlib.contextmanager
    def tracking(self) -> Iterator[None]:
        """Push the counting dispatch mode (re-entrant: nested uses share one mode)."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._mode = _LiveStorageMode(self.counter, self.device.type, self.reads, self.plans)
        self._depth = 1
        try:
            with self._mode:
                yield
        finally:
            self._depth = 0
            self._mode = None

    def track_existing(self, tensors: Iterable[torch.Tensor]) -> None:
        """Seed the tensors' storages; watched weights are the residency's to count, not these."""
        watched = self.reads.weights if self.reads is not None else None
        for t in tensors:
            if t.device.type == self.device.type:
                storage = t.untyped_storage()
                if watched is None or not watched.is_weight_storage(storage):
                    self.counter.add(storage)


def backend_for(device: str | torch.device = "auto") -> MemoryBackend:
    """The backend for a device: ``"auto"`` picks CUDA when available, else the CPU tracker."""
    if isinstance(device, str) and device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device)
    if device.type == "cpu":
        return LiveTensorBackend(device)
    return AllocatorBackend(device)
