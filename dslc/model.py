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

    def field(self, name: str) -> ast.Field | None:
        return self.fields.get(name)


@attrs.frozen
class ResolvedPipeline:
    name: str
    parent: str | None
    decl: ast.Pipeline = attrs.field(eq=False, repr=False)
    params: tuple[ResolvedParam, ...] = ()
    lets: tuple[ast.Let, ...] = ()  # dependency order: a let uses only params and earlier lets
    stages: tuple[ResolvedStage, ...] = ()
    types: Mapping[str, str] = attrs.field(factory=dict, eq=False, repr=False)  # params and lets

    @property
    def span(self) -> Span | None:
        return self.decl.span

    def param(self, name: str) -> ResolvedParam | None:
        return next((p for p in self.params if p.name == name), None)

    def let(self, name: str) -> ast.Let | None:
        return next((let for let in self.lets if let.name == name), None)

    @property
    def contracts(self) -> tuple[tuple[ResolvedParam, ast.Expr], ...]:
        return tuple((p, p.where) for p in self.params if p.where is not None)

    @property
    def default_workload(self) -> dict[str, int | bool]:
        return {p.name: p.default for p in self.params}


@attrs.frozen
class Program:
    """What a successful compilation yields: the sources and every resolved pipeline."""

    sources: tuple[SourceFile, ...]
    modules: tuple[ast.Module, ...] = attrs.field(eq=False, repr=False)
    pipelines: tuple[ResolvedPipeline, ...]

    def pipeline(self, name: str) -> ResolvedPipeline | None:
        return next((p for p in self.pipelines if p.name == name), None)
