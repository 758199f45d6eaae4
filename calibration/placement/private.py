"""Every private name of diffusers and accelerate that placement reads or writes, in one module: a
library release that renames one breaks here and nowhere else. Imports nothing of either."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

#: Where diffusers keeps a module's ``HookRegistry`` (``diffusers.hooks.hooks``).
DIFFUSERS_REGISTRY = "_diffusers_hook"
#: Where accelerate keeps a module's ``ModelHook`` (``accelerate.hooks.add_hook_to_module``).
ACCELERATE_HOOK = "_hf_hook"
#: The names diffusers' group offloading registers its hooks under (``diffusers.hooks``).
GROUP_HOOKS = ("group_offloading", "layer_execution_tracker", "lazy_prefetch_group_offloading")
#: The ``UserCpuOffloadHook``s diffusers' model CPU offload installed on a pipeline.
PIPELINE_HOOKS = "_all_hooks"
#: The components a pipeline keeps out of diffusers' model CPU offload.
EXCLUDED = "_exclude_from_cpu_offload"


class Registry(Protocol):
    """What placement uses of diffusers' ``HookRegistry``: its hooks by name, removing one."""

    hooks: dict[str, object]

    def remove_hook(self, name: str, recurse: bool = True) -> None: ...


def diffusers_registry(module: object) -> Registry | None:
    """The module's own diffusers hook registry, None when it has none."""
    registry: Registry | None = getattr(module, DIFFUSERS_REGISTRY, None)
    return registry


def drop_registry(module: object) -> None:
    """The module's (emptied) diffusers registry off it, as if diffusers never hooked it."""
    delattr(module, DIFFUSERS_REGISTRY)


def accelerate_hook(module: object) -> object | None:
    """The module's accelerate hook (a ``SequentialHook`` when several), None when it has none."""
    return getattr(module, ACCELERATE_HOOK, None)


def pipeline_hooks(pipe: object) -> Iterable[object]:
    """The hooks diffusers' model CPU offload installed on ``pipe`` (each has a ``.hook``)."""
    hooks: Iterable[object] = getattr(pipe, PIPELINE_HOOKS, ())
    return hooks


def excluded(pipe: object) -> frozenset[str]:
    """The components ``pipe`` keeps out of diffusers' model CPU offload."""
    return frozenset(getattr(pipe, EXCLUDED, ()) or ())
