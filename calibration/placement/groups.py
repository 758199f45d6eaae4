"""The groups diffusers' group-offloading hooks move, read from the hooks themselves, each move told
to a listener: on the CPU, where device and host are one memory, the live-tensor backend counts
what the hooks hold on the "device" group by group, as the CUDA allocator would see it
(``runtime.measure.residency.Residency``). Imports torch when called."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

from calibration.placement.private import ModuleGroup, intercept_moves, offload_group

if TYPE_CHECKING:
    import torch
    from torch import nn

    from runtime.measure.residency import Group


class GroupListener(Protocol):
    """Told each time a hook moves a group: ``LiveTensorBackend``."""

    def group_onloaded(self, group: Group) -> None: ...

    def group_offloaded(self, group: Group) -> None: ...


def hooked_groups(module: nn.Module) -> Iterator[tuple[str, ModuleGroup]]:
    """Each group the hooks on ``module`` and below it move, once, by the name of the module
    whose hook holds it (blocks first met first)."""
    seen: set[int] = set()
    for name, sub in module.named_modules():
        group = offload_group(sub)
        if group is not None and id(group) not in seen:
            seen.add(id(group))
            yield name, group


def _storages(group: ModuleGroup) -> dict[int, torch.UntypedStorage]:
    """The storages of every tensor ``group`` moves, each once."""
    tensors = [t for m in group.modules for t in (*m.parameters(), *m.buffers())]  # type: ignore[attr-defined]
    out = {}
    for t in (*tensors, *group.parameters, *group.buffers):
        storage = t.untyped_storage()  # type: ignore[attr-defined]
        out[id(storage)] = storage
    return out


def group_nbytes(group: ModuleGroup) -> int:
    """The bytes ``group`` moves, each storage once."""
    return sum(s.nbytes() for s in _storages(group).values())


def is_block(group: ModuleGroup) -> bool:
    """Whether ``group`` is a block's (its forward onloads it), not the weights outside them."""
    return group.onload_leader is not None and group.onload_leader in group.modules


def _label(module: nn.Module, holder: str, group: ModuleGroup) -> str:
    """``transformer_blocks.0`` for a block; the weights outside the blocks for the rest."""
    names = {id(m): n for n, m in module.named_modules()}
    if is_block(group):
        return ", ".join(names.get(id(m), "?") for m in group.modules)
    return f"{holder} (outside its blocks)" if holder else "weights outside its blocks"


def count_groups(modules: Mapping[str, nn.Module], listener: GroupListener) -> tuple[Group, ...]:
    """Every group the hooks on ``modules`` move, each move of it told to ``listener``."""
    from runtime.measure.residency import Group

    out = []
    for component, module in modules.items():
        for holder, hooked in hooked_groups(module):
            storages = _storages(hooked)
            group = Group(
                component,
                _label(module, holder, hooked),
                group_nbytes(hooked),
                tuple(storages.values()),
            )
            intercept_moves(
                hooked,
                functools.partial(listener.group_onloaded, group),
                functools.partial(listener.group_offloaded, group),
            )
            out.append(group)
    return tuple(out)


def offload_every_group(modules: Mapping[str, nn.Module]) -> None:
    """Every group back to the host: a forward that raised skipped its hooks' offload, and the
    groups it onloaded would stay on the device through every later request."""
    for module in modules.values():
        for _, group in hooked_groups(module):
            group.offload_()
