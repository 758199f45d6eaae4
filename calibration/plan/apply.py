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

``Applied.undo()`` takes every one of those hooks off again and puts every tensor back on the device
it was on, so the pipeline computes exactly what it did before ``apply``; ``apply`` itself undoes
what it did when it fails half-way (a pipeline is never left half-applied).

Imports torch, diffusers and accelerate when called.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from attrs import define, field

from calibration.errors import CalibrationError
from calibration.plan.model import PlacementKind, Plan

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
    blocks: list[nn.Module] = field(factory=list)  # the blocks diffusers' group offloading hooks
    own_forward: set[int] = field(factory=set)  # ids of submodules with their own ``forward``
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
        """Every hook off, every tensor back on its device: the pipeline as before ``apply``."""
        if self.undone:
            return
        from accelerate.hooks import remove_hook_from_module

        for block in self.blocks:
            _remove_group_offloading(block)
        for name, module in self.modules.items():
            remove_hook_from_module(module, recurse=True)
            for sub in module.modules():  # both libraries leave ``forward`` on the instance
                if id(sub) not in self.own_forward:
                    sub.__dict__.pop("forward", None)
            _restore(module, self.devices[name])
        self.onloaded.clear()
        self.offload_hooks.clear()
        self.streamed.clear()
        self.blocks.clear()
        self.undone = True


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
    applied = Applied(
        modules=dict(modules),
        devices={n: _devices(m) for n, m in modules.items()},
        own_forward={
            id(s) for m in modules.values() for s in m.modules() if "forward" in s.__dict__
        },
    )
    try:
        _install(applied, plan, torch.device(device), torch.device(offload_device))
    except BaseException:
        applied.undo()  # never half-applied
        raise
    return applied


def _install(applied: Applied, plan: Plan, onload: torch.device, offload: torch.device) -> None:
    """Move and hook every planned component (``apply`` undoes it all when this raises)."""
    from accelerate import cpu_offload_with_hook
    from accelerate.hooks import add_hook_to_module
    from diffusers.hooks import apply_group_offloading

    from runtime.measure.layers import repeated_layers

    modules = applied.modules
    for p in plan.placements:
        module = modules[p.component]
        if p.kind == PlacementKind.RESIDENT:
            module.to(onload)
        elif p.kind == PlacementKind.LAYERWISE:
            layers = repeated_layers(module)
            if len(layers) != p.layers:
                raise PlanApplyError(
                    f"{p.component}: the plan has {p.layers} layers, the module {len(layers)}"
                )
            module.to(onload)
            kept = set(p.resident_layers)
            streamed = [(n, block) for i, (n, block) in enumerate(layers) if i not in kept]
            for _, block in streamed:
                applied.blocks.append(block)
                apply_group_offloading(
                    block,
                    onload_device=onload,
                    offload_device=offload,
                    offload_type="block_level",
                    num_blocks_per_group=1,
                )
            applied.streamed[p.component] = tuple(n for n, _ in streamed)
    for name, module in modules.items():  # every component offloads the onloaded others first
        add_hook_to_module(module, _before_hook(applied, name), append=True)
    for p in plan.placements:
        if p.kind == PlacementKind.OFFLOADED:
            _, hook = cpu_offload_with_hook(modules[p.component], onload)
            applied.offload_hooks[p.component] = hook
    for module in modules.values():  # where inputs go: diffusers asks the top hook (which may be
        setattr(module._hf_hook, "execution_device", onload)  # noqa: B010 - a SequentialHook)


def placements_by_kind(plan: Plan) -> dict[str, Sequence[str]]:
    """Component names per placement kind (for logs and tests)."""
    out: dict[str, list[str]] = {kind.value: [] for kind in PlacementKind}
    for p in plan.placements:
        out[p.kind.value].append(p.component)
    return {k: tuple(v) for k, v in out.items()}
