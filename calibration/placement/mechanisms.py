"""The placement mechanisms, one registry (diffusers' ``HookRegistry`` is the model): a name maps to
an object that installs the mechanism on a module, tells whether it is there and takes it off.

- ``model``: accelerate's ``cpu_offload_with_hook`` (what ``enable_model_cpu_offload`` installs per
  component): the whole module onloaded when its forward starts, sent home by its hook;
- ``group``: diffusers' ``apply_group_offloading`` (block level, one block a group): each block
  onloaded for its forward and offloaded after it;
- ``layerwise``: a plan's streaming, diffusers' group offloading on each streamed block of a
  component (``Where.blocks``) while the rest of it stays on the device;
- ``grouped``: a plan's grouped component, ``group`` on the whole module, its weights outside the
  blocks onloaded whenever it starts (``vae.decode`` too, which its forward hook never sees).

Imports torch, diffusers and accelerate when called; their private names are in ``private``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol

from attrs import define, frozen

from calibration.placement.private import (
    GROUP_HOOKS,
    ModuleGroup,
    accelerate_hook,
    diffusers_registry,
    drop_registry,
    offload_group,
)

if TYPE_CHECKING:
    import torch
    from torch import nn


class OffloadHook(Protocol):
    """What a caller uses of accelerate's ``UserCpuOffloadHook``: sending its module home."""

    def offload(self) -> None: ...


@frozen
class Where:
    """Where a mechanism moves weights: onto ``onload`` for a forward, back to ``offload``; the
    blocks a layerwise placement streams (the others stay where they are); the children group
    offloading looks into for blocks (None: the model's own ``_group_offload_block_modules``)."""

    onload: torch.device
    offload: torch.device
    blocks: tuple[nn.Module, ...] = ()
    block_modules: tuple[str, ...] | None = None  # group: children whose blocks lie below them


class Mechanism(Protocol):
    """One way of moving a module's weights on and off the device, by a library's own hooks."""

    @property
    def name(self) -> str: ...

    def install(self, module: nn.Module, where: Where) -> OffloadHook | None:
        """The mechanism on ``module``; the hook that sends it home, where it has one."""
        ...

    def installed(self, module: nn.Module) -> bool:
        """Whether the mechanism's hooks sit on ``module`` or below it."""
        ...

    def remove(self, module: nn.Module) -> None:
        """The mechanism's hooks off ``module`` and below it (tensors stay where they are)."""
        ...


class ModelOffload:
    """accelerate's hooks: a whole module onloaded when it starts, offloaded by its hook."""

    name = "model"

    def install(self, module: nn.Module, where: Where) -> OffloadHook | None:
        from accelerate import cpu_offload_with_hook

        _, hook = cpu_offload_with_hook(module, where.onload)
        out: OffloadHook = hook
        return out

    def installed(self, module: nn.Module) -> bool:
        return any(accelerate_hook(m) is not None for m in module.modules())

    def remove(self, module: nn.Module) -> None:
        from accelerate.hooks import remove_hook_from_module

        remove_hook_from_module(module, recurse=True)

    def before(self, module: nn.Module, call: Callable[[], None]) -> None:
        """``call()`` each time ``module``'s forward starts, after the hooks it already has."""
        from accelerate.hooks import ModelHook, add_hook_to_module

        class Before(ModelHook):
            """Calls ``call`` before the module's forward."""

            def pre_forward(
                self, module: nn.Module, *args: object, **kwargs: object
            ) -> tuple[tuple[object, ...], dict[str, object]]:
                call()
                return args, kwargs

        add_hook_to_module(module, Before(), append=True)

    def send_inputs(self, module: nn.Module, device: torch.device) -> None:
        """Where the module's inputs go: diffusers asks its top accelerate hook."""
        setattr(accelerate_hook(module), "execution_device", device)  # noqa: B010 - a ModelHook


class GroupOffload:
    """diffusers' group offloading: one block a group, onloaded for its forward."""

    name = "group"

    def install(self, module: nn.Module, where: Where) -> OffloadHook | None:
        from diffusers.hooks import apply_group_offloading

        apply_group_offloading(
            module,
            onload_device=where.onload,
            offload_device=where.offload,
            offload_type="block_level",
            num_blocks_per_group=1,
            block_modules=None if where.block_modules is None else list(where.block_modules),
        )
        return None

    def installed(self, module: nn.Module) -> bool:
        return any(getattr(diffusers_registry(m), "hooks", None) for m in module.modules())

    def remove(self, module: nn.Module) -> None:
        """The group-offloading hooks off, and the registries they leave empty."""
        for sub in module.modules():
            registry = diffusers_registry(sub)
            if registry is None:
                continue
            for hook in GROUP_HOOKS:
                registry.remove_hook(hook, recurse=False)
            if not registry.hooks:
                drop_registry(sub)


class LayerwiseStreaming:
    """A plan's streamed blocks: each group-offloaded alone, the rest of the module resident."""

    name = "layerwise"

    def install(self, module: nn.Module, where: Where) -> OffloadHook | None:
        for block in where.blocks:
            GROUP.install(block, where)
        return None

    def installed(self, module: nn.Module) -> bool:
        return GROUP.installed(module)

    def remove(self, module: nn.Module) -> None:
        GROUP.remove(module)


@define
class TopGroup:
    """A grouped module's weights outside its blocks (the group its own hook moves): onloaded
    when the module starts by any method, sent home when another component starts."""

    group: ModuleGroup | None = None

    def onload(self) -> None:
        if self.group is not None:
            self.group.onload_()

    def offload(self) -> None:
        if self.group is not None:
            self.group.offload_()


class GroupedComponent:
    """A whole component group-offloaded (``group``), its top group onloaded at every entry."""

    name = "grouped"

    def install(self, module: nn.Module, where: Where) -> OffloadHook | None:
        top = TopGroup()
        MODEL.before(module, top.onload)  # first: diffusers' forward wraps accelerate's
        GROUP.install(module, where)
        top.group = offload_group(module)
        return top

    def installed(self, module: nn.Module) -> bool:
        return GROUP.installed(module)

    def remove(self, module: nn.Module) -> None:
        """diffusers' hooks off first (they wrap accelerate's), then accelerate's."""
        GROUP.remove(module)
        MODEL.remove(module)


MODEL = ModelOffload()
GROUP = GroupOffload()
LAYERWISE = LayerwiseStreaming()
GROUPED = GroupedComponent()

#: Every placement mechanism by name.
MECHANISMS: Mapping[str, Mechanism] = MappingProxyType(
    {mechanism.name: mechanism for mechanism in (MODEL, GROUP, LAYERWISE, GROUPED)}
)


def has_offload_hooks(module: nn.Module) -> bool:
    """Whether any mechanism's hooks (accelerate's or diffusers') sit on ``module`` or below."""
    return any(mechanism.installed(module) for mechanism in MECHANISMS.values())
