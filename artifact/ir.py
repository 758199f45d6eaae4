"""Frozen value types of the runtime: the validated artifact's declarations and evaluation results.

Hand-rolled instead of attrs because `import attrs` alone takes ~30 ms on the serving machines,
the whole budget for importing the runtime and loading an artifact.
"""

from __future__ import annotations

from fractions import Fraction
from operator import itemgetter

__all__ = [
    "NUMERIC",
    "Artifact",
    "CallDecl",
    "ComponentUse",
    "ContractDecl",
    "Expr",
    "FieldDecl",
    "Frozen",
    "LetDecl",
    "ParamDecl",
    "ParamInfo",
    "PipelineDecl",
    "SourceDecl",
    "Span",
    "StageDecl",
    "StageValues",
]

NUMERIC = ("int", "rat")  # static numeric types of expressions: `rat` may hold a Fraction
# Where a declaration came from: (source index, line, column, end line, end column), 1-based lines
# and columns, exclusive end. A plain tuple: there are many, and nothing reads them at run time.
Span = tuple[int, int, int, int, int]

TYPE_CHECKING = False
if TYPE_CHECKING:  # tells mypy that subclasses get an __init__ from their annotations
    from collections.abc import Callable
    from typing import dataclass_transform
else:

    def dataclass_transform(**_: object) -> object:
        """A no-op at run time: the decorator only informs type checkers."""
        return lambda cls: cls


@dataclass_transform(frozen_default=True, eq_default=True)
class Frozen:
    """Immutable slotted value: fields are the class's annotations, in order, set once by
    __init__.
    """

    __slots__ = ()
    _names: tuple[str, ...] = ()
    _setters: tuple[Callable[[object, object], None], ...] = ()

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        # (not inspect.get_annotations: importing inspect costs ~9 ms of the load budget)
        cls._names = tuple(cls.__dict__.get("__annotations__", {}))  # noqa: RUF063
        assert set(cls._names) == set(cls.__slots__), (
            f"{cls.__name__}: slots and annotations differ"
        )
        # each slot's own setter, called directly: twice as fast as object.__setattr__
        cls._setters = tuple(cls.__dict__[name].__set__ for name in cls._names)

    def __init__(self, *args: object, **kwargs: object) -> None:
        names = self._names
        if len(args) == len(names) and not kwargs:  # the loader's case: positional, complete
            for setter, value in zip(self._setters, args):
                setter(self, value)
            return
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes {len(names)} fields, got {len(args)}")
        values = dict(zip(names, args))
        for name, value in kwargs.items():
            if name not in names or name in values:
                raise TypeError(f"{type(self).__name__}: unexpected or repeated field {name!r}")
            values[name] = value
        for name in names:
            if name not in values:
                raise TypeError(f"{type(self).__name__}: missing field {name!r}")
            object.__setattr__(self, name, values[name])

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _fields(self) -> tuple[object, ...]:
        """The field values in constructor order, for equality, hashing and pickling."""
        return tuple(getattr(self, name) for name in self._names)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._fields()))

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._names)
        return f"{type(self).__name__}({inner})"

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), self._fields())


class StageValues(Frozen):
    """One stage at one point: `iterations` is an int, `memory` and `time` exact (int or
    Fraction).
    """

    __slots__ = ("iterations", "memory", "time")
    iterations: int
    memory: int | Fraction
    time: int | Fraction


class ParamInfo(Frozen):
    """A param's metadata: `type` is "int" or "bool"; `max` None means inf; `contracts` as text."""

    __slots__ = ("contracts", "default", "max", "min", "name", "type")
    name: str
    type: str
    default: int | bool
    min: int | None
    max: int | None
    contracts: tuple[str, ...]

    @property
    def range_text(self) -> str:
        """The range as the language writes it (`[1, 1000]`, `[0, inf]`); empty for a bool."""
        if self.type == "bool":
            return ""
        return f"[{self.min}, {'inf' if self.max is None else self.max}]"


class Expr(tuple[object, ...]):
    """A validated expression node: `type` is int/rat/bool; `ref` indexes params or lets.

    `bits`, `dbits` and `work` are its static cost (artifact/cost.py): bounds on the bit lengths of
    its value's numerator and denominator over the declared ranges, and the word operations
    evaluating it takes (its args included).

    A tuple underneath (immutable by construction, and made in one C call: an artifact has
    thousands of nodes and a slotted class took ~1.5 us a node to set), with its fields read by
    name; equal only to an Expr of equal fields, like the Frozen types.
    """

    __slots__ = ()
    _names = ("kind", "type", "args", "value", "ref", "exp", "bits", "dbits", "work")

    if TYPE_CHECKING:
        kind: str
        type: str
        args: tuple[Expr, ...]
        value: int | Fraction | bool | None
        ref: int | None
        exp: int | None
        bits: int
        dbits: int
        work: int

    def __new__(  # noqa: PYI034  (Expr has no subclasses)
        cls,
        kind: str,
        type: str,
        args: tuple[Expr, ...],
        value: int | Fraction | bool | None,
        ref: int | None,
        exp: int | None,
        bits: int = 1,
        dbits: int = 0,
        work: int = 1,
    ) -> Expr:
        return _new_tuple(cls, (kind, type, args, value, ref, exp, bits, dbits, work))

    def __eq__(self, other: object) -> bool:
        # False, not NotImplemented: tuple's own == would otherwise equate it with a plain tuple
        return type(other) is Expr and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return tuple.__hash__(self)

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={v!r}" for n, v in zip(self._names, self))
        return f"Expr({inner})"

    def __getnewargs__(self) -> tuple[object, ...]:
        return tuple(self)


_new_tuple = tuple.__new__
if not TYPE_CHECKING:
    for _i, _name in enumerate(Expr._names):
        setattr(Expr, _name, property(itemgetter(_i), doc=f"field {_i}: {_name}"))


class ParamDecl(Frozen):
    """A request parameter: `int` (with `min`; `max` None is inf) or `bool` (no range)."""

    __slots__ = ("default", "max", "min", "name", "span", "type")
    name: str
    type: str
    default: int | bool
    min: int | None
    max: int | None
    span: Span


class ContractDecl(Frozen):
    """A `where` predicate: declared by param `param`, shown as `text`, decided by `expr`."""

    __slots__ = ("expr", "param", "span", "text")
    param: str
    text: str
    expr: Expr
    span: Span


class LetDecl(Frozen):
    """A named derived value; refers only to params and earlier lets."""

    __slots__ = ("expr", "name", "span")
    name: str
    expr: Expr
    span: Span


class FieldDecl(Frozen):
    """One stage field; `span` is None when the source left the field out (its default)."""

    __slots__ = ("expr", "span")
    expr: Expr
    span: Span | None


class ComponentUse(Frozen):
    """A pipeline component whose call opens a stage: `pipe.components[component].<method>`."""

    __slots__ = ("component", "method")
    component: str
    method: str  # "forward" unless the formula names another entry point (`vae.decode`)


class StageDecl(Frozen):
    """A stage with its three fields, named as the serving code names it.

    `memory_terms` holds the terms of `memory ~ [t1, t2, ...]` (then `memory` is their sum, folded
    from the left); it is empty for a memory of one term; `time_terms` likewise for `time`. `uses`
    lists the component calls that open the stage; `per_step` says the step callback counts its
    iterations.
    """

    __slots__ = (
        "iterations",
        "memory",
        "memory_terms",
        "name",
        "per_step",
        "span",
        "time",
        "time_terms",
        "uses",
    )
    name: str
    iterations: FieldDecl
    memory: FieldDecl
    time: FieldDecl
    span: Span
    memory_terms: tuple[FieldDecl, ...]
    uses: tuple[ComponentUse, ...]
    per_step: bool
    time_terms: tuple[FieldDecl, ...]


class CallDecl(Frozen):
    """`call ARG = EXPR`: the pipeline's `__call__` keyword `arg` and the expression it takes."""

    __slots__ = ("arg", "expr", "span")
    arg: str
    expr: Expr
    span: Span


class PipelineDecl(Frozen):
    """A fully resolved pipeline; `index` is its position in `pipelines`, for error paths.

    `calls` are in declaration order; `probe_axes` are groups of int params, first lightened first;
    `probe_minimums` the declared `probe frames >= 9` bounds.
    """

    __slots__ = (
        "calls",
        "contracts",
        "extends",
        "index",
        "lets",
        "name",
        "params",
        "probe_axes",
        "probe_minimums",
        "span",
        "stages",
    )
    name: str
    extends: str | None
    params: tuple[ParamDecl, ...]
    contracts: tuple[ContractDecl, ...]
    lets: tuple[LetDecl, ...]
    stages: tuple[StageDecl, ...]
    span: Span
    index: int
    calls: tuple[CallDecl, ...]
    probe_axes: tuple[tuple[str, ...], ...]
    probe_minimums: tuple[tuple[str, int], ...]  # (axis, the smallest value a probe may take)


class SourceDecl(Frozen):
    """A compiled source file and the sha256 of its bytes."""

    __slots__ = ("path", "sha256")
    path: str
    sha256: str


class Artifact(Frozen):
    """The whole validated document."""

    __slots__ = ("compiler_name", "compiler_version", "format_version", "pipelines", "sources")
    format_version: int
    compiler_name: str
    compiler_version: str
    sources: tuple[SourceDecl, ...]
    pipelines: tuple[PipelineDecl, ...]
