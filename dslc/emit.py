"""Checked program to the artifact: a versioned JSON document of closed expression trees."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import Protocol

import attrs

from artifact import write
from artifact.atomic import write_atomically
from artifact.document import FORMAT, FORMAT_VERSION
from artifact.ir import ComponentUse, SourceDecl
from artifact.ir import Span as Where
from artifact.tree_checks import CheckedTrees
from artifact.write import JsonObject, add_all, dumps, number
from dslc import __version__, ast
from dslc.fmt import format_expr
from dslc.interp import EvalError, evaluate
from dslc.model import LIST, Program, ResolvedPipeline, list_items
from dslc.source import SourceFile, Span

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "Emitted",
    "IrCache",
    "SpanTable",
    "artifact",
    "dumps",
    "number",
    "pipeline_document",
    "write_atomically",
]

_BINARY = {
    "+": "add",
    "-": "sub",
    "*": "mul",
    "/": "div",
    "//": "floordiv",
    "%": "mod",
    "==": "eq",
    "!=": "ne",
    "<": "lt",
    "<=": "le",
    ">": "gt",
    ">=": "ge",
    "and": "and",
    "or": "or",
}
ONE: JsonObject = number(Fraction(1))
# Where each emitted object came from: id(object) -> its AST span (and `(id, "name")` -> the
# name's span), so the compiler can point at the source of whatever the loader would refuse.
SpanTable = dict[object, Span | None]


class _Placed(Protocol):
    """A node the emitter notes: it knows where in the source it came from."""

    @property
    def span(self) -> Span | None: ...


class IrCache:
    """The IR one compilation emitted, shared by every pipeline that inherits it (issue 23).

    A let, field, contract or call is emitted once per emission context (which names are params,
    which list lets fold into it) and its JSON object reused by each child, so validating and
    emitting a family costs what its own members cost; `spans` records where each object came
    from, `index` numbers the sources. Only the emitter fills it (the compiler's emit pass and
    `artifact`); the cost pass reads what the emit pass made.
    """

    def __init__(self, index: Mapping[str, int]) -> None:
        self.index = index
        self.spans: SpanTable = {}
        self.entries: dict[tuple[object, ...], tuple[object, JsonObject]] = {}
        self.contexts: dict[tuple[object, ...], int] = {}


@attrs.frozen
class Emitted:
    """What a compilation emitted (`ir`) and what the loader's checks made of it (`checked`, the
    cost pass's), for `dslc.build` to reuse rather than emit and check it all again."""

    ir: IrCache
    checked: CheckedTrees


class _IrEmitter:
    """Emits one pipeline's expressions as IR; list lets are folded away (the artifact has none)."""

    def __init__(
        self,
        pipeline: ResolvedPipeline,
        spans: SpanTable | None = None,
        cache: IrCache | None = None,
    ):
        self.spans = spans if cache is None else cache.spans
        self.params = {p.name for p in pipeline.params}
        self.lists = {
            let.name: let.value for let in pipeline.lets if pipeline.types.get(let.name) == LIST
        }
        self.cache = cache
        self.context = 0
        if cache is not None:
            key = (frozenset(self.params), tuple(sorted((n, id(v)) for n, v in self.lists.items())))
            self.context = cache.contexts.setdefault(key, len(cache.contexts))

    def once(self, node: object, make: Callable[[], JsonObject], *extra: object) -> JsonObject:
        """The object `make` emits for `node`, made once per context when emission is shared."""
        if self.cache is None:
            return make()
        key = (id(node), self.context, *extra)
        found = self.cache.entries.get(key)
        if found is not None and found[0] is node:
            return found[1]
        entry = make()
        self.cache.entries[key] = (node, entry)  # keeps `node` alive: its id stays its own
        return entry

    def _items(self, expr: ast.Expr) -> tuple[ast.Expr, ...]:
        items = list_items(expr, self.lists)
        assert items is not None, "type checking admits only lists here"
        return items

    def expr(self, node: ast.Expr) -> JsonObject:
        """The EXPR of `node` (its span recorded when a span table is kept)."""
        emitted = self._emit(node)
        if self.spans is not None:
            self.spans[id(emitted)] = node.span
        return emitted

    def _emit(self, node: ast.Expr) -> JsonObject:
        if isinstance(node, ast.Num):
            return number(node.value)
        if isinstance(node, ast.Bool):
            return write.boolean(node.value)
        if isinstance(node, ast.Name):
            return write.ref("param" if node.id in self.params else "let", node.id)
        if isinstance(node, ast.Unary):
            return write.node("not" if node.op == "not" else "neg", [self.expr(node.operand)])
        if isinstance(node, ast.Binary):
            if node.op == "**":
                exponent = evaluate(node.right)
                assert isinstance(exponent, Fraction)
                return write.power(self.expr(node.left), int(exponent))
            return write.node(_BINARY[node.op], [self.expr(node.left), self.expr(node.right)])
        if isinstance(node, ast.IfElse):
            return write.node(
                "if", [self.expr(node.cond), self.expr(node.then), self.expr(node.orelse)]
            )
        if isinstance(node, ast.Call):
            return self._call(node)
        raise EvalError("cannot emit this node", node)

    def _call(self, node: ast.Call) -> JsonObject:
        func, args = node.func, node.args
        is_list = len(args) == 1 and (
            isinstance(args[0], ast.ListLit)
            or (isinstance(args[0], ast.Name) and args[0].id in self.lists)
        )
        if is_list:
            items = [self.expr(item) for item in self._items(args[0])]
            if func == "len":
                return number(Fraction(len(items)))
            if func == "sum":
                return add_all(items) if items else number(Fraction(0))
            return write.node(func, items)
        return write.node(func, [self.expr(arg) for arg in args])

    def field(
        self, pipeline: ResolvedPipeline, field: ast.Field | None, index: Mapping[str, int]
    ) -> JsonObject:
        """`{"expr", "span"}`, plus `"terms"` (each `{"expr", "span"}`) for a memory of several
        terms.
        """
        if field is None:
            return write.field(ONE, None)
        return self.once(field, lambda: self._field(pipeline, field, index))

    def _field(
        self, pipeline: ResolvedPipeline, field: ast.Field, index: Mapping[str, int]
    ) -> JsonObject:
        terms = pipeline.terms(field)
        if len(terms) == 1:
            return self.note(write.field(self.expr(terms[0]), _span(terms[0].span, index)), field)
        total = add_all([self.expr(term) for term in terms])
        parts = [
            self.note(write.field(self.expr(term), _span(term.span, index)), term) for term in terms
        ]
        return self.note(write.field(total, _span(field.value.span, index), parts), field)

    def note(self, entry: JsonObject, node: _Placed, name_span: Span | None = None) -> JsonObject:
        """Record where an emitted object (and its name) came from, when keeping a span table."""
        if self.spans is not None:
            self.spans[id(entry)] = node.span
            self.spans[(id(entry), "name")] = name_span
        return entry


def _span(span: Span | None, index: Mapping[str, int]) -> Where | None:
    """Where `span` lies, as the artifact numbers its sources."""
    if span is None:
        return None
    return (index[span.source.name], span.line, span.column, span.end_line, span.end_column)


def pipeline_document(
    pipeline: ResolvedPipeline,
    index: Mapping[str, int],
    spans: SpanTable | None = None,
    cache: IrCache | None = None,
) -> JsonObject:
    """One pipeline's object in the artifact; `index` numbers the sources, `spans` (when given)
    receives where each emitted object came from; with `cache` (whose `index` and `spans` it
    uses), inherited members are the objects emitted before."""
    if cache is not None:
        index = cache.index
    emitter = _IrEmitter(pipeline, spans, cache)
    members = {
        "params": _params(pipeline, index, emitter),
        "contracts": _contracts(pipeline, index, emitter),
        "lets": _lets(pipeline, index, emitter),
        "stages": _stages(pipeline, index, emitter),
        "calls": [emitter.once(c, partial(_call_entry, emitter, c, index)) for c in pipeline.calls],
    }
    document = write.pipeline(
        pipeline.name,
        pipeline.parent,
        _span(pipeline.decl.name_span, index),
        members,
        [probe.names for probe in pipeline.probes],
        _probe_minimums(pipeline),
    )
    return emitter.note(document, pipeline.decl, pipeline.decl.name_span)


def _params(
    pipeline: ResolvedPipeline, index: Mapping[str, int], emitter: _IrEmitter
) -> list[JsonObject]:
    return [
        emitter.note(
            write.param(p.name, p.type, p.default, p.lo, p.hi, _span(p.decl.span, index)),
            p.decl,
            p.decl.name_span,
        )
        for p in pipeline.params
    ]


def _stages(
    pipeline: ResolvedPipeline, index: Mapping[str, int], emitter: _IrEmitter
) -> list[JsonObject]:
    stages = []
    for stage in pipeline.stages:
        fields = {name: emitter.field(pipeline, stage.field(name), index) for name in ast.FIELDS}
        uses = [ComponentUse(u.component, u.entry) for u in stage.uses]
        where = _span(stage.decl.name_span, index)
        entry = write.stage(stage.name, where, fields, uses, stage.per_step)
        stages.append(emitter.note(entry, stage.decl, stage.decl.name_span))
    return stages


def _probe_minimums(pipeline: ResolvedPipeline) -> dict[str, int]:
    """The declared `probe NAME >= N` bounds, for calibration."""
    return {
        name: minimum
        for probe in pipeline.probes
        for i, name in enumerate(probe.names)
        if (minimum := probe.minimum(i)) is not None
    }


def _contracts(
    pipeline: ResolvedPipeline, index: Mapping[str, int], emitter: _IrEmitter
) -> list[JsonObject]:
    return [
        emitter.once(where, partial(_contract_entry, emitter, p.name, where, index), p.name)
        for p, where in pipeline.contracts
    ]


def _contract_entry(
    emitter: _IrEmitter, param: str, where: ast.Expr, index: Mapping[str, int]
) -> JsonObject:
    return write.contract(param, format_expr(where), emitter.expr(where), _span(where.span, index))


def _call_entry(emitter: _IrEmitter, call: ast.CallArg, index: Mapping[str, int]) -> JsonObject:
    entry = write.call(call.arg, emitter.expr(call.value), _span(call.span, index))
    return emitter.note(entry, call)


def _lets(
    pipeline: ResolvedPipeline, index: Mapping[str, int], emitter: _IrEmitter
) -> list[JsonObject]:
    """The lets but the list lets (folded into their uses)."""
    return [
        emitter.once(let, partial(_let_entry, emitter, let, index))
        for let in pipeline.lets
        if pipeline.types.get(let.name) != LIST
    ]


def _let_entry(emitter: _IrEmitter, let: ast.Let, index: Mapping[str, int]) -> JsonObject:
    entry = write.let(let.name, emitter.expr(let.value), _span(let.span, index))
    return emitter.note(entry, let, let.name_span)


def artifact(program: Program, cache: IrCache | None = None) -> JsonObject:
    """The artifact document of docs/artifact.md for a checked program (`cache`: the IR its
    compilation emitted, reused)."""
    index = {source.name: i for i, source in enumerate(program.sources)}
    if cache is not None and dict(cache.index) != index:
        cache = None  # numbered for other sources: emit afresh
    sources = [SourceDecl(_display_path(s), s.sha256) for s in program.sources]
    pipelines = [pipeline_document(p, index, cache=cache) for p in program.pipelines]
    return write.document(("dslc", __version__), sources, pipelines)


def _display_path(source: SourceFile) -> str:
    return Path(source.name).as_posix()
