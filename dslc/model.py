"""The resolved program: pipelines with inheritance flattened, names bound and lets ordered."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from dslc import ast
from dslc.source import SourceFile, Span

# Static types of expressions.
INT, RAT, BOOL, LIST = "int", "rational", "bool", "list"


@attrs.frozen
class ResolvedParam:
    """A param after inheritance: its declaration and the (possibly overriding) default's node."""

    name: str
    type: str  # "int" or "bool"
    decl: ast.Param = attrs.field(eq=False, repr=False)
    default_decl: ast.Param = attrs.field(eq=False, repr=False)
    default: int | bool = 0  # filled by the domain pass
    lo: int | None = None  # int params; filled by the domain pass
    hi: int | None = None  # None: `inf`

    @property
    def where(self) -> ast.Expr | None:
        return self.decl.where


@attrs.frozen
class ResolvedStage:
    name: str
    decl: ast.Stage = attrs.field(eq=False, repr=False)
    fields: Mapping[str, ast.Field] = attrs.field(factory=dict, eq=False, repr=False)
    # The declaration whose header gave `uses` and `per step` (an override without them inherits).
    header: ast.Stage | None = attrs.field(default=None, eq=False, repr=False)

    def field(self, name: str) -> ast.Field | None:
        return self.fields.get(name)

    @property
    def uses(self) -> tuple[ast.Use, ...]:
        return (self.header or self.decl).uses

    @property
    def per_step(self) -> bool:
        return (self.header or self.decl).per_step

    @property
    def per_step_span(self) -> Span | None:
        return (self.header or self.decl).per_step_span


@attrs.frozen
class ResolvedPipeline:
    name: str
    parent: str | None
    decl: ast.Pipeline = attrs.field(eq=False, repr=False)
    params: tuple[ResolvedParam, ...] = ()
    lets: tuple[ast.Let, ...] = ()  # dependency order: a let uses only params and earlier lets
    stages: tuple[ResolvedStage, ...] = ()
    types: Mapping[str, str] = attrs.field(factory=dict, eq=False, repr=False)  # params and lets
    calls: tuple[ast.CallArg, ...] = ()  # declaration order, a child's replacing its parent's
    probes: tuple[ast.Probe, ...] = ()  # probe-axis groups, first lightened first

    @property
    def span(self) -> Span | None:
        return self.decl.span

    def param(self, name: str) -> ResolvedParam | None:
        return next((p for p in self.params if p.name == name), None)

    def let(self, name: str) -> ast.Let | None:
        return next((let for let in self.lets if let.name == name), None)

    def terms(self, field: ast.Field) -> tuple[ast.Expr, ...]:
        """A field's terms: the items of a measure's list (a literal or a list let), else its
        value.
        """
        if field.name not in ast.MEASURES:
            return (field.value,)
        return list_items(field.value, {let.name: let.value for let in self.lets}) or (field.value,)

    def field_value(self, field: ast.Field) -> ast.Expr:
        """What a field evaluates to: its only term, or `sum([...])` of a measure's terms."""
        terms = self.terms(field)
        if len(terms) == 1:
            return terms[0]
        span = field.value.span
        return ast.Call("sum", (ast.ListLit(terms, span=span),), span=span, func_span=span)

    @property
    def contracts(self) -> tuple[tuple[ResolvedParam, ast.Expr], ...]:
        return tuple((p, p.where) for p in self.params if p.where is not None)

    @property
    def default_workload(self) -> dict[str, int | bool]:
        return {p.name: p.default for p in self.params}


def list_items(expr: ast.Expr, lets: Mapping[str, ast.Expr]) -> tuple[ast.Expr, ...] | None:
    """The items of a list literal, or of the list literal a let names (through other lets)."""
    seen: set[str] = set()
    while isinstance(expr, ast.Name) and expr.id in lets and expr.id not in seen:
        seen.add(expr.id)
        expr = lets[expr.id]
    return expr.items if isinstance(expr, ast.ListLit) else None


@attrs.frozen
class Program:
    """What a successful compilation yields: the sources and every resolved pipeline."""

    sources: tuple[SourceFile, ...]
    modules: tuple[ast.Module, ...] = attrs.field(eq=False, repr=False)
    pipelines: tuple[ResolvedPipeline, ...]

    def pipeline(self, name: str) -> ResolvedPipeline | None:
        return next((p for p in self.pipelines if p.name == name), None)
