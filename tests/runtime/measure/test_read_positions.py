"""The CPU tracker reads only the arguments an op's schema says can hold a tensor: the same weight
reads as looking at every argument, op by op, over a model that reads weights every way."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from runtime.measure.op_args import Reads
from runtime.measure.residency import WeightMap, WeightReads

aten = torch.ops.aten


def test_the_schema_says_which_arguments_can_be_tensors():
    assert Reads.of(aten.view.default) == Reads((0,), ())  # not its sizes
    assert Reads.of(aten.cat.default) == Reads((), (0,))  # a list of tensors: looked into
    assert Reads.of(aten.convolution.default) == Reads((0, 1, 2), ())  # the bias optional
    assert Reads.of(aten.index.Tensor) == Reads((0,), (1,))  # a list of optional tensors
    assert Reads.of(aten.native_group_norm.default) == Reads((0, 1, 2), ())
    assert Reads.of(aten.arange.default) == Reads((), ())  # nothing to read


class Mixer(nn.Module):
    """Weights read by a linear (a transposed view), a conv, norms, an embedding, a concat with
    an activation, an index by a list of tensors and an in-place add."""

    table: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.conv = nn.Conv2d(2, 2, 3, padding=1)
        self.norm = nn.GroupNorm(1, 2)
        self.layer = nn.LayerNorm(8)
        self.proj = nn.Linear(8, 8)
        self.register_buffer("table", torch.arange(8.0))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.layer(self.embed(ids))
        x = F.scaled_dot_product_attention(x[None], x[None], x[None])[0]
        x = self.proj(x)
        image = self.norm(self.conv(x.reshape(1, 2, 2, -1)))
        both = torch.cat([self.table[None], image.reshape(-1, 8)])
        picked = aten.index.Tensor(self.table, [torch.tensor([0, 2])])
        both.add_(self.proj.bias)
        return both.sum() + picked.sum()


class _Calls(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch's is untyped
    """Keeps every op and its arguments."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.calls: list[tuple[object, tuple[object, ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.calls.append((func, args))
        return func(*args, **(kwargs or {}))


class _Names:
    """The components read, in order."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def component_read(self, name: str) -> None:
        self.names.append(name)


def _read(reads: WeightReads, names: _Names, look: object) -> list[str]:
    names.names.clear()
    reads.new_segment()
    look()  # type: ignore[operator]
    return list(names.names)


def test_reads_by_schema_are_the_reads_of_every_argument():
    torch.manual_seed(0)
    parts = {"mixer": Mixer(), "spare": nn.Linear(2, 2)}
    names = _Names()
    reads = WeightReads(WeightMap.of({"mixer": parts["mixer"]}), listener=names)
    mode = _Calls()
    with torch.no_grad(), mode:
        parts["mixer"](torch.arange(4))
    read_ops = set()
    for func, args in mode.calls:
        every = _read(reads, names, lambda args=args: reads.seen(args))
        by_schema = _read(reads, names, lambda f=func, a=args: reads.seen_at(a, Reads.of(f)))
        assert by_schema == every, func
        if every:
            read_ops.add(func)
    # the weights are read through plain, optional, listed and viewed arguments
    assert {aten.cat.default, aten.convolution.default, aten.addmm.default} <= read_ops
    assert aten.embedding.default in read_ops and aten.index.Tensor in read_ops
