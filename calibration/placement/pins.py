"""Pinned host copies, made as planned (issue 39, item 5): on a CUDA device, what a plan keeps off
the device and chose pinned (``Placement.pinned_bytes``) is held in page-locked host memory, so the
offloading hooks' host-to-device copies read it directly; pageable components are left as the
libraries keep them.

A component's pinned copies are made once when the plan is applied (``pin``): each tensor then
holds its pinned copy. Before each offload its hook is told (``HostCopies.park``): the device copy
is written into the pinned one, which the tensor holds again, so the library's own move to the host
has nothing left to do (diffusers' stream offloading keeps its pinned copies the same way).
``HostCopies.release`` on undo gives each tensor still on the host a pageable copy and drops the
pins. torch's CPU build cannot pin (``pin_memory()`` needs an accelerator): on the CPU nothing is
pinned and ``CUDA_ONLY`` says so. ``SharedPins`` keeps the pins of several owners across their
placements (``calibration.plan.pinstate``: a shared copy is released only when no owner holds it).
Imports torch when called.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING

from attrs import define, field

if TYPE_CHECKING:
    import torch

#: What a report says where a plan's pinned host copies cannot be made.
CUDA_ONLY = "pinning applies on CUDA only"


def pinnable(onload: torch.device, offload: torch.device) -> bool:
    """Whether host copies can be pinned: a CUDA device, offloading to the host."""
    import torch

    return onload.type == "cuda" and offload.type == "cpu" and torch.cuda.is_available()


def _holds(tensor: torch.Tensor, host: torch.Tensor) -> bool:
    return tensor.device.type == "cpu" and tensor.data.data_ptr() == host.data_ptr()


@define
class HostCopies:
    """One component's pinned host copies: each tensor with the pinned copy it holds offloaded."""

    tensors: list[tuple[torch.Tensor, torch.Tensor]] = field(factory=list)

    def park(self) -> None:
        """Before an offload: each device copy written into its pinned copy, which the tensor
        holds again (the hook's own move to the host then finds it there)."""
        for tensor, host in self.tensors:
            if not _holds(tensor, host):
                host.copy_(tensor.data)
                tensor.data = host

    def settle(self) -> None:
        """A copy kept across placements: each tensor the new placement left on the host (a
        pageable copy the offload made) holds its pinned copy again, written from it."""
        for tensor, host in self.tensors:
            if tensor.device.type == "cpu" and not _holds(tensor, host):
                host.copy_(tensor.data)
                tensor.data = host

    def release(self) -> None:
        """Every tensor still holding its pinned copy gets a pageable one; the pins dropped."""
        import torch

        for tensor, host in self.tensors:
            if _holds(tensor, host):
                tensor.data = torch.empty_like(host, device="cpu").copy_(host)
        self.tensors.clear()

    @property
    def pinned_bytes(self) -> int:
        """The bytes measured pinned (``is_pinned()``) among the copies held."""
        return sum(h.numel() * h.element_size() for _, h in self.tensors if h.is_pinned())


def pin(tensors: Iterable[torch.Tensor]) -> HostCopies:
    """A pinned host copy of each of ``tensors`` (a tied one once), which each then holds."""
    copies = HostCopies()
    seen: set[int] = set()
    for tensor in tensors:
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        host = tensor.data.to("cpu").pin_memory()
        tensor.data = host
        copies.tensors.append((tensor, host))
    return copies


@define
class SharedPins:
    """The pinned host copies of several owners (workers, pipelines sharing a component), made
    and released as the bookkeeping says (``calibration.plan.pinstate.PinState.place``: what no
    owner had pinned is pinned, what no owner holds any more is released, a copy another owner
    holds stays). Where copies cannot be pinned (``pinnable``: the CPU) nothing is made."""

    can_pin: bool
    copies: dict[Hashable, HostCopies] = field(factory=dict)

    def move(
        self,
        pin_now: Iterable[Hashable],
        release_now: Iterable[Hashable],
        tensors: Callable[[Hashable], Iterable[torch.Tensor]],
    ) -> None:
        """Release, then pin (``tensors`` gives a part's tensors): a change's ``release`` and
        ``pin`` (``calibration.plan.pinstate.PinChange``); nothing pinned unless ``can_pin``."""
        for key in release_now:
            copies = self.copies.pop(key, None)
            if copies is not None:
                copies.release()
        for key in pin_now if self.can_pin else ():
            self.copies[key] = pin(tensors(key))

    @property
    def pinned_bytes(self) -> int:
        """The bytes measured pinned over every owner's copies."""
        return sum(c.pinned_bytes for c in self.copies.values())
