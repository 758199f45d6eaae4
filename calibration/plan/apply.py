"""Apply a plan to a diffusers pipeline with the libraries' own offloading, never a copy of it.

- resident: ``module.to(device)``;
- layerwise: the module on the device, then diffusers' ``apply_group_offloading(block, ...,
  offload_type="block_level", num_blocks_per_group=1)`` on each streamed block (the recorder's
  repeated layers, so indices match the plan's), which onloads a block for its forward and
  offloads it after; the other blocks and the rest of the module stay resident;
- grouped: diffusers' ``apply_group_offloading`` on the whole module (block level, one block a
  group, ``nested_blocks`` as calibration's ``group`` mode), each block onloaded for its forward,
  the weights outside the blocks for the module's call (``vae.decode`` included: an accelerate
  hook onloads them at every entry, the next component's start sends them home);
- offloaded whole: accelerate's ``cpu_offload_with_hook`` (what ``enable_model_cpu_offload``
  installs per component), onloaded when the component starts. The planner counts an offloaded
  component on the device only in the phases that use it, so every component also gets one
  accelerate ``ModelHook`` that offloads the other onloaded ones before it starts (diffusers'
  ``apply_forward_hook`` runs it for ``vae.decode`` too).

The moves run in the order ``move_order`` gives: every release (bytes leaving the device: a
component offloaded, a layerwise component's streamed blocks) before any acquire (a resident
component, the kept part of a layerwise one), so the device never holds more than the larger of
what it held before and what it holds after while the placement changes.

``Applied.undo()`` takes every one of those hooks off again and puts every tensor back on the device
it was on (releases first again), so the pipeline computes exactly what it did before ``apply``; a
component that fails to come back does not stop the others: ``undo`` raises ``UndoError`` naming
every failure and what each left in place. ``apply`` itself undoes what it did when it fails
half-way (a pipeline is never left half-applied).

On a CUDA device the host copies the plan keeps pinned (``plan_pins``: per part, a pageable
streamed component's frontier only) are pinned through the caller's ``PinBook``
(``calibration.plan.pinning``: the pin state across placements; pinned here, parked before each
offload, left on undo: released unless another owner holds them, or kept for the owner's next
placement by a rollback, ``undo(keep_pins=True)``); ``Applied.pinned_bytes`` is
what is measured pinned, ``Applied.pin_note`` says why none is.

The mechanisms (accelerate's model offload, diffusers' group offloading per streamed block, the
hook before each component) are ``calibration.placement``'s registry, ``MECHANISM_OF`` a kind's.
Imports torch, diffusers and accelerate when called.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

from attrs import define, field, frozen

from calibration.errors import CalibrationError
from calibration.placement.mechanisms import (
    GROUPED,
    LAYERWISE,
    MECHANISMS,
    MODEL,
    OffloadHook,
    Where,
    has_offload_hooks,
)
from calibration.placement.pins import CUDA_ONLY, HostCopies, pinnable
from calibration.placement.pipeline import nested_blocks
from calibration.plan.model import Placement, PlacementKind, Plan
from calibration.plan.moves import REST, Move, MoveKind, move_order
from calibration.plan.pinning import PinBook, pin_plan
from calibration.plan.pinstate import PinKey, plan_pins

if TYPE_CHECKING:
    import torch
    from torch import nn

    from runtime.measure.diffusers_hooks import DiffusersPipeline


class PlanApplyError(CalibrationError, ValueError):
    """The plan does not match the pipeline (a missing component, another layer count)."""


class MoveError(PlanApplyError):
    """A component's move failed while applying (out of memory, a driver error); ``apply`` undid
    what it had done. ``component`` names it, ``cause`` is the error's type and message."""

    def __init__(self, component: str, cause: BaseException) -> None:
        self.component, self.cause_type = component, type(cause).__name__
        first = (str(cause).splitlines() or [""])[0]
        self.out_of_memory = (
            isinstance(cause, MemoryError)
            or "OutOfMemory" in self.cause_type
            or "out of memory" in first.lower()
        )
        super().__init__(f"moving {component} failed: {self.cause_type}: {first}")


class UndoError(CalibrationError):
    """Some components could not be put back: ``failures`` says why, ``left`` what each keeps."""

    def __init__(self, failures: Mapping[str, str], left: Mapping[str, str]) -> None:
        self.failures, self.left = dict(failures), dict(left)
        shown = "; ".join(
            f"{n}: {why} (left: {self.left.get(n, '?')})" for n, why in failures.items()
        )
        super().__init__(f"undo failed for {len(failures)} component(s): {shown}")


#: The mechanism (``calibration.placement``'s registry) that moves each kind of placement.
MECHANISM_OF = MappingProxyType(
    {
        PlacementKind.OFFLOADED: MODEL.name,
        PlacementKind.LAYERWISE: LAYERWISE.name,
        PlacementKind.GROUPED: GROUPED.name,
    }
)


@define
class Applied:
    """The hooks a plan installed: ``offload_all()`` after a request frees every onloaded one,
    ``undo()`` removes them all and puts every module back where it was."""

    onloaded: set[str] = field(factory=set)
    offload_hooks: dict[str, OffloadHook] = field(factory=dict)  # by component name
    streamed: dict[str, tuple[str, ...]] = field(factory=dict)  # component -> streamed layers
    modules: dict[str, nn.Module] = field(factory=dict)  # every component touched
    devices: dict[str, dict[str, torch.device]] = field(factory=dict)  # component -> tensor -> dev
    blocks: dict[str, list[nn.Module]] = field(factory=dict)  # component -> group-offloaded blocks
    own_forward: set[int] = field(factory=set)  # ids of submodules with their own ``forward``
    moves: list[Move] = field(factory=list)  # the moves ``apply`` made, in the order it made them
    onload: str = "cpu"  # the device the plan places on (undo restores onto it last)
    book: PinBook = field(factory=PinBook)  # the pin state across placements, shared
    owner: str = "apply"  # whose pins this placement places in ``book``
    placed: bool = False  # whether ``book`` holds this placement's pins (undo leaves)
    pin_note: str = ""  # why nothing planned pinned is pinned ("": pinned as planned)
    undone: bool = False

    @property
    def pins(self) -> dict[PinKey, HostCopies]:
        """The pinned host copies this placement holds, by part."""
        return self.book.held(self.owner) if self.placed else {}

    @property
    def pinned_bytes(self) -> int:
        """The host bytes measured pinned (``is_pinned()``), over every part held."""
        return sum(copies.pinned_bytes for copies in self.pins.values())

    def offload_others(self, name: str) -> None:
        """Before ``name`` runs: every other onloaded component goes back to the host."""
        for other in sorted(self.onloaded - {name}):
            self.offload_hooks[other].offload()
            self.onloaded.discard(other)
        if name in self.offload_hooks:
            self.onloaded.add(name)

    def offload_all(self) -> None:
        """After a request: nothing offloaded-whole stays on the device."""
        self.offload_others("")

    def undo(self, *, keep_pins: bool = False) -> None:
        """Every hook off, every tensor back on its device: the pipeline as before ``apply``.

        Releases first (components whose tensors leave the device), then the rest; a component
        that fails does not stop the others, and ``UndoError`` names every failure afterwards
        (calling ``undo`` again retries the ones left). ``keep_pins``: a rollback between two
        placements of the same owner, whose next ``apply`` places its pins from what it holds
        (keeps what it still wants, releases only the rest); else its pins leave the book."""
        if self.undone:
            return
        failures: dict[str, str] = {}
        for name in self.undo_order():
            try:
                self._undo_one(name)
            except Exception as exc:  # noqa: BLE001 - every failure is reported below
                failures[name] = f"{type(exc).__name__}: {exc}"
        self.onloaded.clear()
        self.offload_hooks.clear()
        if self.placed:  # every tensor home: the pins no other owner holds released
            self.placed = False
            if not keep_pins:
                self.book.leave(self.owner)
        if failures:
            raise UndoError(failures, {n: self.left_in_place(n) for n in failures})
        self.streamed.clear()
        self.blocks.clear()
        self.undone = True

    def undo_order(self) -> list[str]:
        """Components in restore order: those giving device bytes back first (release first)."""

        def gained(name: str) -> int:
            out = 0
            for tensor_name, tensor in _tensors(self.modules[name]):
                home = self.devices[name].get(tensor_name, tensor.device)
                if home != tensor.device:
                    size = tensor.numel() * tensor.element_size()
                    out += size if str(home) == self.onload else -size
            return out

        return sorted(self.modules, key=gained)

    def _undo_one(self, name: str) -> None:
        """One component's hooks off and its tensors home."""
        module = self.modules[name]
        for block in self.blocks.get(name, ()):
            LAYERWISE.remove(block)
        MODEL.remove(module)
        for sub in module.modules():  # both libraries leave ``forward`` on the instance
            if id(sub) not in self.own_forward:
                sub.__dict__.pop("forward", None)
        _restore(module, self.devices[name])

    def left_in_place(self, name: str) -> str:
        """What a component still has of the plan: its hooks, tensors off their devices."""
        module = self.modules[name]
        left = []
        if has_offload_hooks(module):
            left.append("offloading hooks")
        away = sum(self.devices[name].get(n, t.device) != t.device for n, t in _tensors(module))
        if away:
            left.append(f"{away} tensor(s) off their device")
        return ", ".join(left) or "nothing"


def _exact(device: torch.device) -> torch.device:
    """``cuda`` as the tensors on it name it (``cuda:N``, the current device), so that devices
    compare equal."""
    import torch

    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def _tensors(module: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    yield from module.named_parameters(remove_duplicate=False)
    yield from module.named_buffers(remove_duplicate=False)


def _devices(module: nn.Module) -> dict[str, torch.device]:
    return {name: t.device for name, t in _tensors(module)}


def _restore(module: nn.Module, devices: dict[str, torch.device]) -> None:
    """Each parameter and buffer back on the device it was on (one ``to`` when they shared one;
    none when every one is home already: a move that is not needed cannot fail an undo)."""
    if all(devices.get(name, t.device) == t.device for name, t in _tensors(module)):
        return
    if len(set(devices.values())) == 1:
        module.to(next(iter(devices.values())))
        return
    for name, tensor in _tensors(module):
        where = devices.get(name)
        if where is not None and tensor.device != where:
            tensor.data = tensor.data.to(where)


def apply(
    plan: Plan,
    pipe: DiffusersPipeline,
    device: str | torch.device = "cuda",
    offload_device: str | torch.device = "cpu",
    *,
    pins: PinBook | None = None,
    owner: str = "apply",
) -> Applied:
    """Place every planned component of ``pipe`` on ``device`` or ``offload_device``; its pins
    placed for ``owner`` in ``pins`` (the pin state across placements; None: this one's own)."""
    import torch

    from runtime.measure.diffusers_hooks import pipeline_modules

    if not plan.feasible:
        raise PlanApplyError(f"the plan is infeasible: {plan.reason}")
    modules = pipeline_modules(pipe)
    missing = sorted({p.component for p in plan.placements} - set(modules))
    if missing:
        raise PlanApplyError(f"the pipeline has no components {missing}; it has {sorted(modules)}")
    hooked = sorted(n for n, m in modules.items() if has_offload_hooks(m))
    if hooked:
        raise PlanApplyError(
            f"components {hooked} already carry offloading hooks (a plan applied and not undone, "
            "or enable_model_cpu_offload); undo them first"
        )
    onload = _exact(torch.device(device))
    parts = {p.component: _parts(modules[p.component], p) for p in plan.placements}
    can_pin = pinnable(onload, torch.device(offload_device))
    applied = Applied(
        modules=dict(modules),
        devices={n: _devices(m) for n, m in modules.items()},
        own_forward={
            id(s) for m in modules.values() for s in m.modules() if "forward" in s.__dict__
        },
        onload=str(onload),
        book=PinBook() if pins is None else pins,
        owner=owner,
        pin_note="" if can_pin or not plan_pins(plan) else CUDA_ONLY,
    )
    try:
        _install(applied, plan, parts, onload, torch.device(offload_device))
        applied.placed = True  # before pinning: a failure there leaves as undo does
        pin_plan(applied.book, owner, plan, modules, applied.offload_hooks, can_pin=can_pin)
    except BaseException:
        applied.undo()  # never half-applied
        raise
    return applied


@frozen
class Parts:
    """A planned component cut into parts: each part's bytes and tensors, the blocks it streams."""

    sizes: Mapping[str, int]  # part -> bytes (``REST``, each layer's name)
    kept: frozenset[str]  # the parts the placement keeps on the device
    streamed: tuple[tuple[str, nn.Module], ...]  # (layer name, block) streamed

    def on(self, module: nn.Module, device: torch.device) -> frozenset[str]:
        """The parts whose every tensor is on ``device`` now."""
        away = {_part_of(n, self.sizes) for n, t in _tensors(module) if t.device != device}
        return frozenset(self.sizes) - away


def _part_of(tensor_name: str, sizes: Mapping[str, int]) -> str:
    return next((p for p in sizes if p and tensor_name.startswith(p + ".")), REST)


def _parts(module: nn.Module, placement: Placement) -> Parts:
    """``module`` cut as ``placement`` needs: its layers apart only when layerwise (checked)."""
    from runtime.measure.layers import repeated_layers

    layers = repeated_layers(module) if placement.kind == PlacementKind.LAYERWISE else []
    if placement.kind == PlacementKind.LAYERWISE and len(layers) != placement.layers:
        raise PlanApplyError(
            f"{placement.component}: the plan has {placement.layers} layers, the module "
            f"{len(layers)}"
        )
    sizes = dict.fromkeys([REST, *(n for n, _ in layers)], 0)
    seen: set[int] = set()
    for name, tensor in _tensors(module):
        if id(tensor) not in seen:  # a tied tensor once
            seen.add(id(tensor))
            sizes[_part_of(name, sizes)] += tensor.numel() * tensor.element_size()
    kept_layers = {layers[i][0] for i in placement.resident_layers if i < len(layers)}
    kept = {
        PlacementKind.RESIDENT: set(sizes),
        PlacementKind.OFFLOADED: set(),
        PlacementKind.GROUPED: set(),
        PlacementKind.LAYERWISE: {REST, *kept_layers},
    }[placement.kind]
    streamed = tuple((n, b) for n, b in layers if n not in kept_layers)
    return Parts(sizes, frozenset(kept), streamed)


def _install(
    applied: Applied,
    plan: Plan,
    parts: Mapping[str, Parts],
    onload: torch.device,
    offload: torch.device,
) -> None:
    """Hook every component, then make the moves in ``move_order``'s order (``apply`` undoes it
    all when this raises)."""
    modules = applied.modules
    for name, module in modules.items():  # every component offloads the onloaded others first
        MODEL.before(module, functools.partial(applied.offload_others, name))
    order = move_order(
        {n: p.sizes for n, p in parts.items()},
        {n: p.on(modules[n], onload) for n, p in parts.items()},
        {n: p.kept for n, p in parts.items()},
    )
    kinds = {p.component: p.kind for p in plan.placements}
    for move in order:
        try:
            _make(applied, move, kinds[move.component], parts[move.component], onload, offload)
        except Exception as exc:  # typed: the component named (``apply`` undoes the rest)
            raise MoveError(move.component, exc) from exc
        applied.moves.append(move)
    for module in modules.values():  # where inputs go: diffusers asks the top hook
        MODEL.send_inputs(module, onload)


def _make(
    applied: Applied,
    move: Move,
    kind: PlacementKind,
    parts: Parts,
    onload: torch.device,
    offload: torch.device,
) -> None:
    """One move: offload whole or stream blocks (release), or place on the device (acquire)."""
    name = move.component
    module = applied.modules[name]
    if move.kind is MoveKind.RELEASE:  # offloaded or grouped, or a layerwise one's streamed blocks
        hooked: tuple[nn.Module, ...]
        if kind == PlacementKind.GROUPED:  # the whole module, its blocks as calibration finds them
            where, hooked = Where(onload, offload, block_modules=nested_blocks(module)), (module,)
        else:
            where = Where(onload, offload, tuple(block for _, block in parts.streamed))
            hooked = where.blocks
        applied.blocks.setdefault(name, []).extend(hooked)  # undo takes their hooks off
        hook = MECHANISMS[MECHANISM_OF[kind]].install(module, where)
        if hook is not None:  # offloaded whole or grouped: its hook sends it home
            applied.offload_hooks[name] = hook
        if kind == PlacementKind.LAYERWISE:
            applied.streamed[name] = tuple(n for n, _ in parts.streamed)
    elif kind == PlacementKind.RESIDENT:
        module.to(onload)
    else:  # layerwise: what is not streamed onto the device, tensor by tensor
        streamed = {n for n, _ in parts.streamed}
        for tensor_name, tensor in _tensors(module):
            if _part_of(tensor_name, parts.sizes) not in streamed and tensor.device != onload:
                tensor.data = tensor.data.to(onload)


def placements_by_kind(plan: Plan) -> dict[str, Sequence[str]]:
    """Component names per placement kind (for logs and tests)."""
    out: dict[str, list[str]] = {kind.value: [] for kind in PlacementKind}
    for p in plan.placements:
        out[p.kind.value].append(p.component)
    return {k: tuple(v) for k, v in out.items()}
