"""Every private name of diffusers and accelerate that placement reads or writes, in one module: a
library release that renames one breaks here and nowhere else. Imports nothing of either."""

from __future__ import annotations

from collections.abc import Callable, Iterable
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


class ModuleGroup(Protocol):
    """What placement reads of diffusers' ``ModuleGroup``: its modules and loose tensors, the
    module whose forward onloads it, and the two moves its hook calls (instance attributes)."""

    modules: list[object]
    parameters: list[object]
    buffers: list[object]
    onload_leader: object | None

    def onload_(self) -> None: ...

    def offload_(self) -> None: ...


def offload_group(module: object) -> ModuleGroup | None:
    """The group that diffusers' group-offloading hook on ``module`` moves, None without one."""
    registry = diffusers_registry(module)
    hook = getattr(registry, "hooks", {}).get(GROUP_HOOKS[0]) if registry is not None else None
    group: ModuleGroup | None = getattr(hook, "group", None)
    return group


def intercept_moves(
    group: ModuleGroup, before_onload: Callable[[], None], after_offload: Callable[[], None]
) -> None:
    """``group``'s hook calls ``before_onload`` before each onload and ``after_offload`` after
    each offload (the group's own methods, shadowed on the instance; gone with the hooks)."""
    onload, offload = group.onload_, group.offload_

    def onload_() -> None:
        before_onload()
        onload()

    def offload_() -> None:
        offload()
        after_offload()

    object.__setattr__(group, "onload_", onload_)
    object.__setattr__(group, "offload_", offload_)


def before_model_offload(hook: object, call: Callable[[], None]) -> None:
    """accelerate's ``UserCpuOffloadHook`` calls ``call`` before it sends its module home (its
    ``CpuOffload.init_hook``, shadowed on the instance; gone with the hook)."""
    inner = getattr(hook, "hook")  # noqa: B009 - a private attribute, named here only
    init_hook = inner.init_hook

    def before(module: object) -> object:
        call()
        return init_hook(module)

    object.__setattr__(inner, "init_hook", before)


def before_group_offload(group: ModuleGroup, call: Callable[[], None]) -> None:
    """``group``'s hook calls ``call`` before each offload (shadowed on the instance)."""
    offload = group.offload_

    def offload_() -> None:
        call()
        offload()

    object.__setattr__(group, "offload_", offload_)
