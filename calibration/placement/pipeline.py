"""A whole pipeline placed by one mechanism (``--calibrate-offload model`` or ``group``), and taken
off again: diffusers' model CPU offload through the pipeline's own method, group offloading on
every component through the registry. Imports torch, diffusers and accelerate when called."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

import attrs

from calibration.errors import CalibrationError
from calibration.placement.groups import group_nbytes, hooked_groups, is_block
from calibration.placement.mechanisms import GROUP, Where, has_offload_hooks
from calibration.placement.private import excluded, pipeline_hooks

if TYPE_CHECKING:
    from torch import nn


def offload_model(pipe: object, device: str, modules: Mapping[str, nn.Module]) -> frozenset[str]:
    """diffusers' model CPU offload, the device passed explicitly (it would refuse the CPU); the
    components it moves on and off."""
    enable = getattr(pipe, "enable_model_cpu_offload", None)
    if not callable(enable) or getattr(pipe, "model_cpu_offload_seq", None) is None:
        raise CalibrationError(
            f"--calibrate-offload model: {type(pipe).__name__} has no model_cpu_offload_seq "
            "(diffusers' model CPU offload needs one); use --calibrate-offload group"
        )
    if device == "cpu":
        enable = _on_plain_cpu(pipe, enable)
    try:
        enable(device=device)
    except Exception as exc:  # noqa: BLE001 - any move failing: typed (``placed`` takes hooks off)
        raise CalibrationError(
            f"--calibrate-offload model: diffusers' model CPU offload failed on "
            f"{type(pipe).__name__}: {type(exc).__name__}: {exc}"
        ) from None
    kept = excluded(pipe)
    return frozenset(name for name in modules if name not in kept)


def _on_plain_cpu(pipe: object, enable: Callable[..., object]) -> Callable[..., object]:
    """diffusers names the execution device ``cpu:0``, and ``tensor.to("cpu:0")`` copies a CPU
    tensor: every onload would copy the weights. The hooks (those it installs again after each
    call too, ``maybe_free_model_hooks``) are pointed at ``cpu``, where moves are no-ops."""
    import torch

    def enable_on_cpu(*args: object, **kwargs: object) -> object:
        out = enable(*args, **kwargs)
        for user_hook in pipeline_hooks(pipe):
            user_hook.hook.execution_device = torch.device("cpu")  # type: ignore[attr-defined]
        return out

    object.__setattr__(pipe, "enable_model_cpu_offload", enable_on_cpu)
    return enable_on_cpu


def offload_groups(device: str, modules: Mapping[str, nn.Module]) -> frozenset[str]:
    """diffusers' group offloading on every component: one block a group, onloaded for its forward.

    On the CPU its moves are not copies: the live-tensor backend counts each group while its hooks
    hold it (``calibration.placement.groups``)."""
    import torch

    where = Where(torch.device(device), torch.device("cpu"))
    for module in modules.values():
        GROUP.install(module, attrs.evolve(where, block_modules=nested_blocks(module)))
    return frozenset(modules)


def block_groups(module: nn.Module) -> tuple[int, ...]:
    """The bytes of each block group ``offload_groups`` forms on ``module``, read from the hooks
    themselves: installed where its weights are (no move), read, taken off again. () where it
    forms none, its weights lie on several devices, or it carries offloading hooks already."""
    devices = {t.device for t in (*module.parameters(), *module.buffers())}
    if len(devices) != 1 or has_offload_hooks(module):
        return ()
    here = next(iter(devices))
    own = {id(s) for s in module.modules() if "forward" in s.__dict__}
    GROUP.install(module, Where(here, here, block_modules=nested_blocks(module)))
    try:
        return tuple(group_nbytes(g) for _, g in hooked_groups(module) if is_block(g))
    finally:
        GROUP.remove(module)
        for sub in module.modules():  # diffusers leaves ``forward`` on the instance
            if id(sub) not in own:
                sub.__dict__.pop("forward", None)


def module_groups(modules: Mapping[str, nn.Module]) -> dict[str, tuple[int, ...]]:
    """``block_groups`` of each module that forms some (a calibration's ``group_bytes``)."""
    groups = {name: block_groups(module) for name, module in modules.items()}
    return {name: sizes for name, sizes in groups.items() if sizes}


def nested_blocks(module: nn.Module) -> tuple[str, ...] | None:
    """The children whose blocks group offloading must look into, where the model names none and
    has no block list of its own: block level would onload it whole, one group (CogVideoX's VAE,
    its blocks in an encoder and a decoder). None where diffusers finds the blocks itself.

    diffusers looks into a named child with the same names, so a list further down is reached by
    naming every module on the way to it (CLIP's ``text_model`` and ``encoder``, its layers in
    ``text_model.encoder.layers``)."""
    from torch import nn

    lists = (nn.ModuleList, nn.Sequential)
    named = getattr(module, "_group_offload_block_modules", None)
    if named is not None or any(isinstance(c, lists) for c in module.children()):
        return None
    return tuple(dict.fromkeys(_on_the_way(module, module, lists))) or None


def _on_the_way(
    root: nn.Module, module: nn.Module, lists: tuple[type[nn.Module], ...]
) -> Iterator[str]:
    """The names of ``module``'s children (and theirs, down to the block lists) that hold a block
    list, skipping a child that shares a tensor with the rest of ``root``."""
    for name, child in module.named_children():
        if isinstance(child, lists) or _shares(root, child):
            continue
        if any(isinstance(m, lists) for m in child.modules()):
            yield name
            yield from _on_the_way(root, child, lists)


def _shares(module: nn.Module, child: nn.Module) -> bool:
    """Whether ``child`` holds a tensor the rest of ``module`` holds too (T5's embedding, shared by
    the model and its encoder): two groups would move it, each counting it."""
    mine = {id(t) for t in (*child.parameters(), *child.buffers())}
    inside = {id(m) for m in child.modules()}
    rest = (m for m in module.modules() if id(m) not in inside)
    return any(
        id(t) in mine
        for m in rest
        for t in (*m.parameters(recurse=False), *m.buffers(recurse=False))
    )


def remove_model_offload(pipe: object) -> None:
    """diffusers' model CPU offload off ``pipe`` (and ``_on_plain_cpu``'s wrapper)."""
    vars(pipe).pop("enable_model_cpu_offload", None)
    remove = getattr(pipe, "remove_all_hooks", None)
    if callable(remove):
        remove()


def remove_group_offload(modules: Mapping[str, nn.Module]) -> None:
    """diffusers' group offloading off every component."""
    for module in modules.values():
        GROUP.remove(module)
