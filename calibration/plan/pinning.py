"""The pin state across placements, made on the tensors: ``PinBook`` is one worker's (or several
pipelines') bookkeeping (``calibration.plan.pinstate.PinState``) together with the pinned host
copies it says to hold (``calibration.placement.pins.SharedPins``).

``calibration.plan.apply.apply`` places its owner's pins as the plan keeps them (``plan_pins``:
an offloaded component's every part, a streamed one's streamed layers or its frontier), and
``Applied.undo`` leaves: each change pins only what no owner had pinned and releases only what no
owner holds any more; ``PinBook.changes`` is the sequence of ``PinChange`` a lifecycle made (apply,
re-plan, fallback, the final undo). A rollback between two placements (``undo(keep_pins=True)``)
leaves the owner's pins in the book: the next ``apply`` keeps those it still wants, untouched, and
releases only the rest. Where copies cannot be pinned (the CPU) the bookkeeping runs and no
tensor is pinned. Imports torch when called. See docs/planning.md "Pin state across placements".
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TYPE_CHECKING

from attrs import define, field

from calibration.placement.mechanisms import OffloadHook
from calibration.placement.pins import HostCopies, SharedPins
from calibration.plan.model import Placement, PlacementKind, Plan
from calibration.plan.pinstate import REST, PinChange, PinKey, PinState, plan_pins

if TYPE_CHECKING:
    import torch
    from torch import nn

#: The owner a worker's own placements pin for (one per lifecycle).
WORKER = "worker"


def _none(_: PinKey) -> Iterable[torch.Tensor]:
    return ()


@define
class PinBook:
    """Every owner's pins (``state``), the pinned copies made for them, the changes so far."""

    state: PinState = field(factory=PinState)
    copies: SharedPins = field(factory=lambda: SharedPins(can_pin=True))
    changes: list[PinChange] = field(factory=list)

    def place(
        self,
        owner: str,
        wanted: Iterable[PinKey],
        tensors: Callable[[PinKey], Iterable[torch.Tensor]],
        *,
        can_pin: bool,
    ) -> PinChange:
        """``owner``'s pins become ``wanted``: released what no owner holds now, pinned (where
        ``can_pin``) what no owner had; the change kept in ``changes``."""
        change = self.state.place(owner, wanted)
        self.state = change.state
        self.changes.append(change)

        def of(key: Hashable) -> Iterable[torch.Tensor]:
            return tensors(key) if isinstance(key, PinKey) else ()

        self.copies.move(change.pin if can_pin else (), change.release, of)
        return change

    def leave(self, owner: str) -> PinChange:
        """``owner`` holds nothing any more (its placement undone)."""
        return self.place(owner, (), _none, can_pin=False)

    def held(self, owner: str) -> dict[PinKey, HostCopies]:
        """The pinned copies ``owner`` holds (none where nothing could be pinned)."""
        made = self.copies.copies
        return {k: made[k] for k in sorted(self.state.of(owner)) if k in made}


def layer_names(module: nn.Module, placement: Placement) -> tuple[str, ...]:
    """``placement``'s layers by index as ``module`` names them (none when they do not match:
    its every tensor is then the rest, ``REST``)."""
    from runtime.measure.layers import repeated_layers

    if not placement.layers or placement.kind is PlacementKind.RESIDENT:
        return ()
    names = tuple(n for n, _ in repeated_layers(module))
    return names if len(names) == placement.layers else ()


def part_tensors(module: nn.Module, names: tuple[str, ...]) -> dict[int, list[torch.Tensor]]:
    """``module``'s tensors by part: each layer's (by index in ``names``) and the rest's (``REST``);
    a tied tensor in its first part only."""
    out: dict[int, list[torch.Tensor]] = {}
    seen: set[int] = set()
    tensors: list[tuple[str, torch.Tensor]] = [*module.named_parameters(remove_duplicate=False)]
    tensors += module.named_buffers(remove_duplicate=False)
    for name, tensor in tensors:
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        part = next((i for i, n in enumerate(names) if name.startswith(n + ".")), REST)
        out.setdefault(part, []).append(tensor)
    return out


def pin_plan(
    book: PinBook,
    owner: str,
    plan: Plan,
    modules: Mapping[str, nn.Module],
    hooks: Mapping[str, OffloadHook],
    *,
    can_pin: bool,
) -> PinChange:
    """``owner``'s pins become what ``plan`` keeps pinned (``plan_pins``), made on ``modules``'
    tensors; each copy parked before its offload (accelerate's hook for a component offloaded
    whole, diffusers' groups for a streamed layer)."""
    from calibration.placement.groups import hooked_groups
    from calibration.placement.private import before_group_offload, before_model_offload

    wanted = plan_pins(plan)
    names = {p.component: layer_names(modules[p.component], p) for p in plan.placements}
    parts = {c: part_tensors(modules[c], names[c]) for c in sorted({k.component for k in wanted})}
    change = book.place(
        owner, wanted, lambda k: parts[k.component].get(k.part, ()), can_pin=can_pin
    )
    held = book.held(owner)
    for copies in held.values():  # kept from this owner's placement before: held again
        copies.settle()
    grouped = {p.component for p in plan.placements if p.kind is PlacementKind.GROUPED}
    for component in sorted({k.component for k in held}):
        mine = [c for k, c in held.items() if k.component == component]
        if component in grouped:  # every group of it parks every copy of it before its offload
            for _, group in hooked_groups(modules[component]):
                before_group_offload(group, functools.partial(_park, mine))
            continue
        if component in hooks:
            before_model_offload(hooks[component], functools.partial(_park, mine))
            continue
        for key in (k for k in held if k.component == component and k.part != REST):
            block = modules[component].get_submodule(names[component][key.part])
            for _, group in hooked_groups(block):
                before_group_offload(group, held[key].park)
    return change


def _park(copies: list[HostCopies]) -> None:
    for one in copies:
        one.park()
