"""Checked program to the artifact: a versioned JSON document of closed expression trees."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import Any

import attrs

from artifact.atomic import write_atomically
from artifact.checks import CheckedTrees
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

FORMAT = "workload-formulas"
FORMAT_VERSION = 1

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
ONE: dict[str, Any] = {"k": "int", "v": 1}
# Where each emitted object came from: id(object) -> its AST span (and `(id, "name")` -> the
# name's span), so the compiler can point at the source of whatever the loader would refuse.
SpanTable = dict[object, Span | None]


def number(value: Fraction) -> dict[str, Any]:
    if value.denominator == 1:
        return {"k": "int", "v": int(value)}
    return {"k": "frac", "n": value.numerator, "d": value.denominator}


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
        self.entries: dict[tuple[object, ...], tuple[object, dict[str, Any]]] = {}
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

    def once(
        self, node: object, make: Callable[[], dict[str, Any]], *extra: object
    ) -> dict[str, Any]:
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

    def expr(self, node: ast.Expr) -> dict[str, Any]:
        """The EXPR of `node` (its span recorded when a span table is kept)."""
        emitted = self._emit(node)
        if self.spans is not None:
            self.spans[id(emitted)] = node.span
        return emitted

    def _emit(self, node: ast.Expr) -> dict[str, Any]:
        if isinstance(node, ast.Num):
            return number(node.value)
        if isinstance(node, ast.Bool):
            return {"k": "bool", "v": node.value}
        if isinstance(node, ast.Name):
            return {"k": "param" if node.id in self.params else "let", "name": node.id}
        if isinstance(node, ast.Unary):
            return {"k": "not" if node.op == "not" else "neg", "args": [self.expr(node.operand)]}
        if isinstance(node, ast.Binary):
            if node.op == "**":
                exponent = evaluate(node.right)
                assert isinstance(exponent, Fraction)
                return {"k": "pow", "args": [self.expr(node.left)], "exp": int(exponent)}
            return {"k": _BINARY[node.op], "args": [self.expr(node.left), self.expr(node.right)]}
        if isinstance(node, ast.IfElse):
            return {
                "k": "if",
                "args": [self.expr(node.cond), self.expr(node.then), self.expr(node.orelse)],
            }
        if isinstance(node, ast.Call):
            return self._call(node)
        raise EvalError("cannot emit this node", node)

    def _call(self, node: ast.Call) -> dict[str, Any]:
        func, args = node.func, node.args
        is_list = len(args) == 1 and (
            isinstance(args[0], ast.ListLit)
            or (isinstance(args[0], ast.Name) and args[0].id in self.lists)
        )
        if is_list:
            items = [self.expr(item) for item in self._items(args[0])]
            if func == "len":
                return {"k": "int", "v": len(items)}
            if func == "sum":
                return add_all(items) if items else {"k": "int", "v": 0}
            return {"k": func, "args": items}
        return {"k": func, "args": [self.expr(arg) for arg in args]}

    def field(
        self, pipeline: ResolvedPipeline, field: ast.Field | None, index: Mapping[str, int]
    ) -> dict[str, Any]:
        """`{"expr", "span"}`, plus `"terms"` (each `{"expr", "span"}`) for a memory of several
        terms.
        """
        if field is None:
            return {"expr": ONE, "span": None}
        return self.once(field, lambda: self._field(pipeline, field, index))

    def _field(
        self, pipeline: ResolvedPipeline, field: ast.Field, index: Mapping[str, int]
    ) -> dict[str, Any]:
        terms = pipeline.terms(field)
        if len(terms) == 1:
            return self.note(
                {"expr": self.expr(terms[0]), "span": _span(terms[0].span, index)}, field
            )
        return self.note(
            {
                "expr": add_all([self.expr(term) for term in terms]),
                "span": _span(field.value.span, index),
                "terms": [
                    self.note({"expr": self.expr(term), "span": _span(term.span, index)}, term)
                    for term in terms
                ],
            },
            field,
        )

    def note(
        self, entry: dict[str, Any], node: Any, name_span: Span | None = None
    ) -> dict[str, Any]:
        """Record where an emitted object (and its name) came from, when keeping a span table."""
        if self.spans is not None:
            self.spans[id(entry)] = node.span
            self.spans[(id(entry), "name")] = name_span
        return entry


def add_all(items: list[dict[str, Any]]) -> dict[str, Any]:
    """The left fold `((a + b) + c) + ...` that `sum([...])` and a memory's terms both emit."""
    total = items[0]
    for item in items[1:]:
        total = {"k": "add", "args": [total, item]}
    return total


def _span(span: Span | None, index: Mapping[str, int]) -> dict[str, int] | None:
    if span is None:
        return None
    return {
        "source": index[span.source.name],
        "line": span.line,
        "column": span.column,
        "end_line": span.end_line,
        "end_column": span.end_column,
    }


def pipeline_document(
    pipeline: ResolvedPipeline,
    index: Mapping[str, int],
    spans: SpanTable | None = None,
    cache: IrCache | None = None,
) -> dict[str, Any]:
    """One pipeline's object in the artifact; `index` numbers the sources, `spans` (when given)
    receives where each emitted object came from; with `cache` (whose `index` and `spans` it
    uses), inherited members are the objects emitted before."""
    if cache is not None:
        index = cache.index
    emitter = _IrEmitter(pipeline, spans, cache)
    document = {
        "name": pipeline.name,
        "extends": pipeline.parent,
        "span": _span(pipeline.decl.name_span, index),
        "params": _params(pipeline, index, emitter),
        "contracts": _contracts(pipeline, index, emitter),
        "lets": _lets(pipeline, index, emitter),
        "stages": _stages(pipeline, index, emitter),
        **_facts(pipeline, index, emitter),
    }
    return emitter.note(document, pipeline.decl, pipeline.decl.name_span)


def _params(
    pipeline: ResolvedPipeline, index: Mapping[str, int], emitter: _IrEmitter
) -> list[dict[str, Any]]:
    params = []
    for p in pipeline.params:
        entry: dict[str, Any] = {"name": p.name, "type": p.type, "default": p.default}
        if p.type == "int":
            entry.update({"min": p.lo, "max": p.hi})
        entry["span"] = _span(p.decl.span, index)
        params.append(emitter.note(entry, p.decl, p.decl.name_span))
    return params


def _stages(
    pipeline: ResolvedPipeline, index: Mapping[str, int], emitter: _IrEmitter
) -> list[dict[str, Any]]:
    stages = []
    for stage in pipeline.stages:
        entry: dict[str, Any] = {"name": stage.name, "span": _span(stage.decl.name_span, index)}
        for name in ast.FIELDS:
            entry[name] = emitter.field(pipeline, stage.field(name), index)
        if stage.uses:
            entry["uses"] = [{"component": u.component, "method": u.entry} for u in stage.uses]
        if stage.per_step:
            entry["per_step"] = True
        stages.append(emitter.note(entry, stage.decl, stage.decl.name_span))
    return stages


def _facts(
    pipeline: ResolvedPipeline, index: Mapping[str, int], emitter: _IrEmitter
) -> dict[str, Any]:
    """The optional keys for calibration: `calls`, `probe_axes`, `probe_minimums`."""
    facts: dict[str, Any] = {}
    if pipeline.calls:
        facts["calls"] = [
            emitter.once(c, partial(_call_entry, emitter, c, index)) for c in pipeline.calls
        ]
    if pipeline.probes:
        facts["probe_axes"] = [list(probe.names) for probe in pipeline.probes]
        minimums = {
            name: probe.minimum(i)
            for probe in pipeline.probes
            for i, name in enumerate(probe.names)
            if probe.minimum(i) is not None
        }
        if minimums:
            facts["probe_minimums"] = minimums
    return facts


def _contracts(
    pipeline: ResolvedPipeline, index: Mapping[str, int], emitter: _IrEmitter
) -> list[dict[str, Any]]:
    return [
        emitter.once(where, partial(_contract_entry, emitter, p.name, where, index), p.name)
        for p, where in pipeline.contracts
    ]


def _contract_entry(
    emitter: _IrEmitter, param: str, where: ast.Expr, index: Mapping[str, int]
) -> dict[str, Any]:
    return {
        "param": param,
        "text": format_expr(where),
        "expr": emitter.expr(where),
        "span": _span(where.span, index),
    }


def _call_entry(emitter: _IrEmitter, call: ast.CallArg, index: Mapping[str, int]) -> dict[str, Any]:
    entry = {"arg": call.arg, "expr": emitter.expr(call.value), "span": _span(call.span, index)}
    return emitter.note(entry, call)


def _lets(
    pipeline: ResolvedPipeline, index: Mapping[str, int], emitter: _IrEmitter
) -> list[dict[str, Any]]:
    """The lets but the list lets (folded into their uses)."""
    return [
        emitter.once(let, partial(_let_entry, emitter, let, index))
        for let in pipeline.lets
        if pipeline.types.get(let.name) != LIST
    ]


def _let_entry(emitter: _IrEmitter, let: ast.Let, index: Mapping[str, int]) -> dict[str, Any]:
    entry = {"name": let.name, "expr": emitter.expr(let.value), "span": _span(let.span, index)}
    return emitter.note(entry, let, let.name_span)


def artifact(program: Program, cache: IrCache | None = None) -> dict[str, Any]:
    """The artifact document of docs/artifact.md for a checked program (`cache`: the IR its
    compilation emitted, reused)."""
    index = {source.name: i for i, source in enumerate(program.sources)}
    if cache is not None and dict(cache.index) != index:
        cache = None  # numbered for other sources: emit afresh
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "compiler": {"name": "dslc", "version": __version__},
        "sources": [{"path": _display_path(s), "sha256": s.sha256} for s in program.sources],
        "pipelines": [pipeline_document(p, index, cache=cache) for p in program.pipelines],
    }


def _display_path(source: SourceFile) -> str:
    return Path(source.name).as_posix()


def dumps(document: dict[str, Any]) -> str:
    """Compact JSON (the C encoder; `indent` would fall back to the pure-Python one)."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n"
