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

Imports torch, diffusers and accelerate when called.
"""

from __future__ import annotations

from collections.abc import Sequence
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


@define
class Applied:
    """The hooks a plan installed: ``offload_all()`` after a request frees every onloaded one."""

    onloaded: set[str] = field(factory=set)
    offload_hooks: dict[str, OffloadHook] = field(factory=dict)  # by component name
    streamed: dict[str, tuple[str, ...]] = field(factory=dict)  # component -> streamed layers

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
    from accelerate import cpu_offload_with_hook
    from accelerate.hooks import add_hook_to_module
    from diffusers.hooks import apply_group_offloading

    from runtime.measure.diffusers_hooks import pipeline_modules
    from runtime.measure.layers import repeated_layers

    if not plan.feasible:
        raise PlanApplyError(f"the plan is infeasible: {plan.reason}")
    modules = pipeline_modules(pipe)
    missing = sorted({p.component for p in plan.placements} - set(modules))
    if missing:
        raise PlanApplyError(f"the pipeline has no components {missing}; it has {sorted(modules)}")
    applied = Applied()
    onload, offload = torch.device(device), torch.device(offload_device)
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
    return applied


def placements_by_kind(plan: Plan) -> dict[str, Sequence[str]]:
    """Component names per placement kind (for logs and tests)."""
    out: dict[str, list[str]] = {kind.value: [] for kind in PlacementKind}
    for p in plan.placements:
        out[p.kind.value].append(p.component)
    return {k: tuple(v) for k, v in out.items()}
