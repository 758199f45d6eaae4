"""The artifact's writer beside its reader: typed values in, the JSON document of
docs/artifact.md out.

The compiler's emitter hands over names, numbers, spans and the objects made before; the shape
and key order of every object (what makes two builds byte-identical) is decided here alone.
Each function returns a fresh object, so the emitter may key its span table by identity.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TypeAlias

from artifact.document import FORMAT, FORMAT_VERSION
from artifact.ir import ComponentUse, SourceDecl, Span

__all__ = [
    "JsonObject",
    "JsonValue",
    "add_all",
    "boolean",
    "call",
    "contract",
    "document",
    "dumps",
    "field",
    "let",
    "node",
    "number",
    "param",
    "pipeline",
    "power",
    "ref",
    "span",
    "stage",
]

JsonValue: TypeAlias = "None | bool | int | float | str | list[JsonValue] | dict[str, JsonValue]"
JsonObject: TypeAlias = "dict[str, JsonValue]"


def span(where: Span | None) -> JsonObject | None:
    """A SPAN object (or null): source index, 1-based line and column, exclusive end."""
    if where is None:
        return None
    source, line, column, end_line, end_column = where
    return {
        "source": source,
        "line": line,
        "column": column,
        "end_line": end_line,
        "end_column": end_column,
    }


def number(value: Fraction) -> JsonObject:
    """An `int` node, or a `frac` node for a non-integral rational."""
    if value.denominator == 1:
        return {"k": "int", "v": int(value)}
    return {"k": "frac", "n": value.numerator, "d": value.denominator}


def boolean(value: bool) -> JsonObject:
    return {"k": "bool", "v": value}


def ref(kind: str, name: str) -> JsonObject:
    """A `param` or `let` node reading `name`."""
    return {"k": kind, "name": name}


def node(kind: str, args: Sequence[JsonObject]) -> JsonObject:
    """A compound node `{"k", "args"}` (every kind but `pow`)."""
    return {"k": kind, "args": list(args)}


def power(base: JsonObject, exponent: int) -> JsonObject:
    return {"k": "pow", "args": [base], "exp": exponent}


def add_all(items: Sequence[JsonObject]) -> JsonObject:
    """The left fold `((a + b) + c) + ...` that `sum([...])` and a memory's terms both emit."""
    total = items[0]
    for item in items[1:]:
        total = node("add", [total, item])
    return total


def field(expr: JsonObject, where: Span | None, terms: Sequence[JsonObject] = ()) -> JsonObject:
    """A stage field `{"expr", "span"}`, plus `"terms"` for a measure of several terms."""
    entry: JsonObject = {"expr": expr, "span": span(where)}
    if terms:
        entry["terms"] = list(terms)
    return entry


def param(
    name: str, type: str, default: int | bool, low: int | None, high: int | None, where: Span | None
) -> JsonObject:
    """A param; an `int` param carries its range (`null` for an open end)."""
    entry: JsonObject = {"name": name, "type": type, "default": default}
    if type == "int":
        entry.update({"min": low, "max": high})
    entry["span"] = span(where)
    return entry


def contract(param: str, text: str, expr: JsonObject, where: Span | None) -> JsonObject:
    return {"param": param, "text": text, "expr": expr, "span": span(where)}


def let(name: str, expr: JsonObject, where: Span | None) -> JsonObject:
    return {"name": name, "expr": expr, "span": span(where)}


def call(arg: str, expr: JsonObject, where: Span | None) -> JsonObject:
    return {"arg": arg, "expr": expr, "span": span(where)}


def stage(
    name: str,
    where: Span | None,
    fields: Mapping[str, JsonObject],
    uses: Sequence[ComponentUse],
    per_step: bool,
) -> JsonObject:
    """A stage: its fields in the order given, then `uses` and `per_step` when present."""
    entry: JsonObject = {"name": name, "span": span(where), **fields}
    if uses:
        entry["uses"] = [{"component": u.component, "method": u.method} for u in uses]
    if per_step:
        entry["per_step"] = True
    return entry


def pipeline(
    name: str,
    extends: str | None,
    where: Span | None,
    members: Mapping[str, Sequence[JsonObject]],
    probe_axes: Sequence[Sequence[str]] = (),
    probe_minimums: Mapping[str, int] | None = None,
) -> JsonObject:
    """A pipeline; `members` holds `params`, `contracts`, `lets`, `stages` and, when any,
    `calls`; the probe facts are written only when present."""
    entry: JsonObject = {"name": name, "extends": extends, "span": span(where)}
    for key in ("params", "contracts", "lets", "stages"):
        entry[key] = list(members[key])
    if members.get("calls"):
        entry["calls"] = list(members["calls"])
    if probe_axes:
        entry["probe_axes"] = [list(names) for names in probe_axes]
    if probe_minimums:
        entry["probe_minimums"] = dict(probe_minimums)
    return entry


def document(
    compiler: tuple[str, str], sources: Sequence[SourceDecl], pipelines: Sequence[JsonObject]
) -> JsonObject:
    """The whole artifact: format, version, the compiler's (name, version), sources, pipelines."""
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "compiler": {"name": compiler[0], "version": compiler[1]},
        "sources": [{"path": s.path, "sha256": s.sha256} for s in sources],
        "pipelines": list(pipelines),
    }


def dumps(doc: JsonObject) -> str:
    """Compact JSON (the C encoder; `indent` would fall back to the pure-Python one)."""
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n"
