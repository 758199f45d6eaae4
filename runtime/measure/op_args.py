"""Which of an op's arguments can hold a tensor, from its schema: a dispatch mode that sees every
op reads the schema once per op, then looks at those arguments only (``WeightReads.seen_at``),
not at a ``view``'s sizes or a convolution's strides."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from attrs import frozen

if TYPE_CHECKING:
    from torch._ops import OpOverload

# Schema types that never hold a tensor (their ``kind()``); any other may (a list: its items).
_NO_TENSOR = frozenset(
    {
        "IntType", "SymIntType", "FloatType", "SymFloatType", "BoolType", "SymBoolType",
        "ComplexType", "NumberType", "StringType", "DeviceObjType", "LayoutType",
        "ScalarTypeType", "MemoryFormatType", "GeneratorType", "NoneType",
    }
)  # fmt: skip


def _holds(kind: torch._C.JitType) -> tuple[bool, bool]:
    """Whether an argument of this schema type is a tensor (or None), and whether it may hold
    tensors otherwise (a list of them; a type not known to hold none)."""
    name = kind.kind()
    if name in ("OptionalType", "ListType"):
        inner = _holds(kind.getElementType())
        if name == "OptionalType" or inner == (False, False):
            return inner
        return False, True
    return name == "TensorType", name not in _NO_TENSOR and name != "TensorType"


@frozen
class Reads:
    """Where one op's positional arguments can hold a tensor, from its schema: read once per op
    by the dispatch mode, so ``WeightReads.seen_at`` skips every size, stride and flag."""

    tensors: tuple[int, ...]  # a tensor or None
    lists: tuple[int, ...]  # a list of tensors, or a type that may hold one: looked into

    @classmethod
    def of(cls, func: OpOverload) -> Reads:
        tensors: list[int] = []
        lists: list[int] = []
        for i, arg in enumerate(func._schema.arguments):
            tensor, inside = _holds(arg.type)
            (tensors if tensor else lists if inside else []).append(i)
        return cls(tuple(tensors), tuple(lists))
