"""The work of a request counted op by op, the same in every run: what `dslc infer`'s `time ~`
terms are chosen from.

A wall or CPU clock on a shared machine moves from run to run by more than a small term of a tiny
model's time, so a draft chosen from times alone can differ between two runs. The count here is
the same for the same shapes: each aten op's floating-point operations (torch's own formulas,
``torch.utils.flop_counter``, and the CPU's fused attention, which they leave out) plus
``BYTES_WEIGHT`` x the bytes it reads and writes (views move nothing). The recorder reads it as its
clock, so a stage's "seconds" per iteration in such a record are its work per iteration: the same
recorder, hooks and phases as every other measurement.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, TypeGuard

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from calibration.infer.time_terms import BYTES_WEIGHT

if TYPE_CHECKING:
    from torch._ops import OpOverload  # torch's private module: named in annotations only


def _tensors(value: object) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _tensors(item)


def _matrix(value: object) -> TypeGuard[torch.Tensor]:
    return isinstance(value, torch.Tensor) and value.dim() >= 2


def _attention_flops(args: tuple[object, ...]) -> int:
    """``q @ k^T`` and ``softmax @ v`` of a fused attention the registry does not know: 2 x 2
    x batch x heads x queries x keys x the head dims (q: [..., L, E], k: [..., S, E], v: [..., S,
    Ev])."""
    q, k, v = (a for a in args[:3])
    if not (_matrix(q) and _matrix(k) and _matrix(v)):
        return 0
    *batch, queries, dim = q.shape
    keys, value_dim = k.shape[-2], v.shape[-1]
    lead = 1
    for n in batch:
        lead *= int(n)
    return 2 * lead * int(queries) * int(keys) * (int(dim) + int(value_dim))


class WorkMeter(TorchDispatchMode):
    """Counts the work of every op run under it; ``clock`` is the recorder's clock."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def clock(self) -> float:
        return float(self.total)

    def __torch_dispatch__(
        self,
        func: OpOverload,
        types: object,
        args: tuple[object, ...] = (),
        kwargs: Mapping[str, object] | None = None,
    ) -> object:  # whatever the op returns
        kwargs = dict(kwargs or {})
        out = func(*args, **kwargs)
        packet = func._overloadpacket
        formula = flop_registry.get(packet)
        if formula is not None:
            self.total += int(formula(*args, **kwargs, out_val=out))
        elif packet.__name__.startswith("_scaled_dot_product") and len(args) >= 3:
            self.total += _attention_flops(args)
        if not func.is_view:
            moved = sum(t.nbytes for t in _tensors((args, kwargs, out)))
            self.total += BYTES_WEIGHT * moved
        return out
