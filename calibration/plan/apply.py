"""Apply a plan to a diffusers pipeline with the libraries' own offloading, never a copy of it.

- resident: ``module.to(device)``;
- layerwise: the module on the device, then diffusers' ``apply_group_offloading(block, ...,
  offload_type="block_level", num_blocks_per_group=1)`` on each streamed block (the recorder's
  repeated layers, so indices match the plan's), which onloads a block for its forward and
  offloads it after; the other blocks and the rest of the module stay resident;
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

Imports torch, diffusers and accelerate when called.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from attrs import define, field, frozen

from calibration.errors import CalibrationError
from calibration.plan.model import Placement, PlacementKind, Plan
from calibration.plan.moves import REST, Move, MoveKind, move_order

if TYPE_CHECKING:
    import torch
    from accelerate.hooks import ModelHook
    from torch import nn

    from runtime.measure.diffusers_hooks import DiffusersPipeline


class OffloadHook(Protocol):
    """What ``Applied`` uses of accelerate's ``UserCpuOffloadHook``: sending its module home."""

    def offload(self) -> None: ...


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


#: The names diffusers' group offloading registers its hooks under (its group_offloading module).
_GROUP_HOOKS = ("group_offloading", "layer_execution_tracker", "lazy_prefetch_group_offloading")


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
    undone: bool = False

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

    def undo(self) -> None:
        """Every hook off, every tensor back on its device: the pipeline as before ``apply``.

        Releases first (components whose tensors leave the device), then the rest; a component
        that fails does not stop the others, and ``UndoError`` names every failure afterwards
        (calling ``undo`` again retries the ones left)."""
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
        from accelerate.hooks import remove_hook_from_module

        module = self.modules[name]
        for block in self.blocks.get(name, ()):
            _remove_group_offloading(block)
        remove_hook_from_module(module, recurse=True)
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
    """Each parameter and buffer back on the device it was on (one ``to`` when they shared one)."""
    if len(set(devices.values())) == 1:
        module.to(next(iter(devices.values())))
        return
    for name, tensor in _tensors(module):
        where = devices.get(name)
        if where is not None and tensor.device != where:
            tensor.data = tensor.data.to(where)


def _remove_group_offloading(block: nn.Module) -> None:
    """diffusers' group-offloading hooks off ``block`` and its submodules, empty registries too."""
    for module in block.modules():
        registry = getattr(module, "_diffusers_hook", None)
        if registry is None:
            continue
        for hook in _GROUP_HOOKS:
            registry.remove_hook(hook, recurse=False)
        if not registry.hooks:
            del module._diffusers_hook


def has_offload_hooks(module: nn.Module) -> bool:
    """Whether accelerate or diffusers hooks already sit on ``module`` or below it."""
    return any(
        hasattr(m, "_hf_hook") or getattr(getattr(m, "_diffusers_hook", None), "hooks", None)
        for m in module.modules()
    )


def _before_hook(applied: Applied, name: str) -> ModelHook:
    from accelerate.hooks import ModelHook

    class OffloadOthers(ModelHook):
        """Offloads the other onloaded components when this one starts."""

        def pre_forward(
            self, module: nn.Module, *args: object, **kwargs: object
        ) -> tuple[tuple[object, ...], dict[str, object]]:
            applied.offload_others(name)
            return args, kwargs

    return OffloadOthers()


def apply(
    plan: Plan,
    pipe: DiffusersPipeline,
    device: str | torch.device = "cuda",
    offload_device: str | torch.device = "cpu",
) -> Applied:
    """Place every planned component of ``pipe`` on ``device`` or ``offload_device``."""
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
    applied = Applied(
        modules=dict(modules),
        devices={n: _devices(m) for n, m in modules.items()},
        own_forward={
            id(s) for m in modules.values() for s in m.modules() if "forward" in s.__dict__
        },
        onload=str(onload),
    )
    try:
        _install(applied, plan, parts, onload, torch.device(offload_device))
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
    from accelerate.hooks import add_hook_to_module

    modules = applied.modules
    for name, module in modules.items():  # every component offloads the onloaded others first
        add_hook_to_module(module, _before_hook(applied, name), append=True)
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
    for module in modules.values():  # where inputs go: diffusers asks the top hook (which may be
        setattr(module._hf_hook, "execution_device", onload)  # noqa: B010 - a SequentialHook)


def _make(
    applied: Applied,
    move: Move,
    kind: PlacementKind,
    parts: Parts,
    onload: torch.device,
    offload: torch.device,
) -> None:
    """One move: offload whole or stream blocks (release), or place on the device (acquire)."""
    from accelerate import cpu_offload_with_hook
    from diffusers.hooks import apply_group_offloading

    name = move.component
    module = applied.modules[name]
    if move.kind is MoveKind.RELEASE and kind == PlacementKind.OFFLOADED:
        _, hook = cpu_offload_with_hook(module, onload)
        applied.offload_hooks[name] = hook
    elif move.kind is MoveKind.RELEASE:  # layerwise: diffusers offloads each streamed block
        for _, block in parts.streamed:
            applied.blocks.setdefault(name, []).append(block)
            apply_group_offloading(
                block,
                onload_device=onload,
                offload_device=offload,
                offload_type="block_level",
                num_blocks_per_group=1,
            )
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
