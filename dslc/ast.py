"""The syntax tree: frozen nodes whose source spans never take part in equality."""

from __future__ import annotations

from fractions import Fraction

import attrs

from dslc.source import SourceFile, Span


def _span() -> Span | None:
    return attrs.field(default=None, eq=False, repr=False, kw_only=True)


@attrs.frozen
class Trivia:
    """The comments a built node (one no source holds) carries for `fmt`, which places a parsed
    node's comments by their lines; like a span, never part of equality."""

    lead: tuple[str, ...] = ()  # the lines above it: `# ...` comments, "" for a blank line
    trail: str | None = None  # `# ...` at the end of its line
    close: tuple[str, ...] = ()  # a stage's or pipeline's comments before its closing `}`


def _trivia() -> Trivia | None:
    return attrs.field(default=None, eq=False, repr=False, kw_only=True)


@attrs.frozen
class Num:
    """A numeric literal; `text` keeps the author's spelling for `fmt`."""

    value: Fraction
    text: str = attrs.field(default="", eq=False, repr=False)
    span: Span | None = _span()


@attrs.frozen
class Bool:
    value: bool
    span: Span | None = _span()


@attrs.frozen
class Inf:
    """`inf`, meaningful only as a range's upper bound."""

    span: Span | None = _span()


@attrs.frozen
class Name:
    id: str
    span: Span | None = _span()


@attrs.frozen
class ListLit:
    items: tuple[Expr, ...]
    span: Span | None = _span()


@attrs.frozen
class Unary:
    """`-x` (op '-') or `not x` (op 'not')."""

    op: str
    operand: Expr
    span: Span | None = _span()


@attrs.frozen
class Binary:
    """Arithmetic (+ - * / // % **), comparison (== != < <= > >=) and logic (and, or)."""

    op: str
    left: Expr
    right: Expr
    span: Span | None = _span()
    op_span: Span | None = _span()


@attrs.frozen
class IfElse:
    cond: Expr
    then: Expr
    orelse: Expr
    span: Span | None = _span()


@attrs.frozen
class Call:
    func: str
    args: tuple[Expr, ...]
    span: Span | None = _span()
    func_span: Span | None = _span()


Expr = Num | Bool | Inf | Name | ListLit | Unary | Binary | IfElse | Call

ARITHMETIC = frozenset({"+", "-", "*", "/", "//", "%", "**"})
COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})
LOGIC = frozenset({"and", "or"})
FUNCTIONS = ("ceil", "floor", "abs", "min", "max", "len", "sum")
FIELDS = ("iterations", "memory", "time")
MEASURES = ("memory", "time")  # the fields that may list terms (`memory ~ [a, b]`)
TYPES = ("int", "bool")


@attrs.frozen
class Param:
    """`param NAME: TYPE = DEFAULT in [LO, HI] where PRED`; `type` is None for a default-only
    override.
    """

    name: str
    type: str | None
    default: Expr
    lo: Expr | None = None
    hi: Expr | None = None
    where: Expr | None = None
    span: Span | None = _span()
    trivia: Trivia | None = _trivia()
    name_span: Span | None = _span()
    type_span: Span | None = _span()


@attrs.frozen
class Let:
    name: str
    value: Expr
    span: Span | None = _span()
    trivia: Trivia | None = _trivia()
    name_span: Span | None = _span()


@attrs.frozen
class Field:
    """`iterations = EXPR`, `memory ~ EXPR` or `time ~ EXPR` (op is '=' or '~')."""

    name: str
    op: str
    value: Expr
    span: Span | None = _span()
    trivia: Trivia | None = _trivia()
    name_span: Span | None = _span()


@attrs.frozen
class Use:
    """`COMPONENT` or `COMPONENT.METHOD` in a stage's `uses` list; `method` None means `forward`."""

    component: str
    method: str | None = None
    span: Span | None = _span()

    @property
    def entry(self) -> str:
        """The method whose call opens the stage (`forward` unless the author named one)."""
        return self.method or "forward"

    @property
    def text(self) -> str:
        return self.component if self.method is None else f"{self.component}.{self.method}"


@attrs.frozen
class Stage:
    """`stage NAME [uses USE, ...] [per step] { FIELDS }`."""

    name: str
    fields: tuple[Field, ...]
    uses: tuple[Use, ...] = ()
    per_step: bool = False
    span: Span | None = _span()
    trivia: Trivia | None = _trivia()
    name_span: Span | None = _span()
    per_step_span: Span | None = _span()

    @property
    def has_header_facts(self) -> bool:
        """Whether the header says anything past the name (an override then replaces both facts)."""
        return bool(self.uses) or self.per_step


@attrs.frozen
class CallArg:
    """`call ARG = EXPR`: the pipeline's `__call__` keyword `arg` takes the expression's value."""

    arg: str
    value: Expr
    span: Span | None = _span()
    trivia: Trivia | None = _trivia()
    name_span: Span | None = _span()


@attrs.frozen
class Probe:
    """`probe NAME, ...`: one group of probe axes, lightened together; `probe frames >= 9` also
    says no probe goes below 9 frames (the stage's steady regime starts there)."""

    names: tuple[str, ...]
    span: Span | None = _span()
    trivia: Trivia | None = _trivia()
    name_spans: tuple[Span, ...] = attrs.field(default=(), eq=False, repr=False, kw_only=True)
    minimums: tuple[int | None, ...] = attrs.field(default=(), kw_only=True)  # per name, or ()
    minimum_spans: tuple[Span | None, ...] = attrs.field(
        default=(), eq=False, repr=False, kw_only=True
    )

    def minimum(self, index: int) -> int | None:
        """The declared minimum of the `index`-th axis (None: none declared)."""
        return self.minimums[index] if index < len(self.minimums) else None


Member = Param | Let | Stage | CallArg | Probe


@attrs.frozen
class Pipeline:
    name: str
    parent: str | None
    members: tuple[Member, ...]
    span: Span | None = _span()
    trivia: Trivia | None = _trivia()
    name_span: Span | None = _span()
    parent_span: Span | None = _span()


@attrs.frozen
class Comment:
    """A `#` comment, kept beside the tree so that `fmt` never drops one."""

    text: str
    line: int
    own_line: bool


@attrs.frozen
class Module:
    pipelines: tuple[Pipeline, ...]
    source: SourceFile | None = attrs.field(default=None, eq=False, repr=False)
    comments: tuple[Comment, ...] = attrs.field(default=(), eq=False, repr=False)


def children(expr: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of a node, in source order."""
    if isinstance(expr, ListLit):
        return expr.items
    if isinstance(expr, Unary):
        return (expr.operand,)
    if isinstance(expr, Binary):
        return (expr.left, expr.right)
    if isinstance(expr, IfElse):
        return (expr.cond, expr.then, expr.orelse)
    if isinstance(expr, Call):
        return expr.args
    return ()


def walk(expr: Expr) -> list[Expr]:
    """Every node of an expression, pre-order, without recursion."""
    out: list[Expr] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(children(node)))
    return out


def depth(expr: Expr) -> int:
    """Levels of an expression (a leaf: 1), without recursion (a long sum is a deep chain)."""
    deepest, stack = 0, [(expr, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack += [(child, level + 1) for child in children(node)]
    return deepest


def names(expr: Expr) -> list[Name]:
    """Every name an expression refers to, in source order."""
    return [node for node in walk(expr) if isinstance(node, Name)]
