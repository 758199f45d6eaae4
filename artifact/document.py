"""Read and validate a compiled artifact into frozen declarations (artifact/ir.py); nothing is
executed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from artifact.atomic import NotARegularFileError
from artifact.cost import node_bounds, param_bits
from artifact.errors import ArtifactError
from artifact.facts import StageFacts, calls, probe_axes, probe_minimums
from artifact.ir import (
    NUMERIC,
    Artifact,
    ContractDecl,
    Expr,
    FieldDecl,
    LetDecl,
    ParamDecl,
    PipelineDecl,
    SourceDecl,
    StageDecl,
)
from artifact.json_checks import (
    as_int,
    as_list,
    as_name,
    as_object,
    as_span,
    as_text,
    describe,
    fail,
    into,
    over_limit,
)
from artifact.limits import (
    MAX_BYTES,
    MAX_DEPTH,
    MAX_INT_DIGITS,
    MAX_MEASURE_TERMS,
    MAX_MEMBERS,
    MAX_MEMORY_TERMS,
    MAX_NAME_LENGTH,
    MAX_NODES,
    MAX_PIPELINES,
    MAX_POW_EXPONENT,
    MAX_STAGES,
)
from artifact.spelling import file_value
from artifact.strict_json import read_regular, strict_loads
from artifact.tree_checks import CheckedTrees, NodeBudget, Scope, check_formula, same_tree

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "MAX_MEASURE_TERMS",
    "MAX_MEMORY_TERMS",
    "MAX_NAME_LENGTH",
    "MAX_NODES",
    "MAX_POW_EXPONENT",
    "parse_artifact",
    "parse_pipeline",
    "read_artifact",
]

FORMAT = "workload-formulas"
FORMAT_VERSION = 1

# ---------------------------------------------------------------- reading the bytes


def read_artifact(
    source: str | bytes | bytearray | os.PathLike[str] | Mapping[str, object],
) -> Artifact:
    """Accept a path, JSON text (a str starting with `{` or `[`), JSON bytes or a parsed mapping."""
    if isinstance(source, Mapping):
        return parse_artifact(source)
    if isinstance(source, (bytes, bytearray)):
        data: str | bytes | bytearray = source
    elif isinstance(source, str) and source.lstrip()[:1] in ("{", "["):
        data = source
    else:
        data = _read_file(os.fspath(source))
    size = len(data) if not isinstance(data, str) else len(data.encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        raise over_limit(
            None, f"artifact is {size} bytes, over the {MAX_BYTES}-byte limit", limit="MAX_BYTES"
        )
    return parse_artifact(_parse_json(data))


def _read_file(path: str) -> bytes:
    """Read at most the size limit plus one byte, so a huge file is refused without reading it
    all; a FIFO or device is refused before it is opened (reading a FIFO would wait for a writer).
    """
    try:
        return read_regular(path, MAX_BYTES)
    except NotARegularFileError as exc:
        raise ArtifactError("", str(exc)) from None


def _parse_json(data: str | bytes | bytearray) -> object:
    """Parse JSON, turning every failure (syntax, nesting, huge ints, encoding) into
    ArtifactError.
    """
    try:
        return strict_loads(data)
    except RecursionError:
        raise ArtifactError("", "JSON nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, int digit limit, our hooks
        raise ArtifactError("", f"not valid JSON: {exc}") from None


# ---------------------------------------------------------------- the document


def parse_artifact(doc: object, trees: CheckedTrees | None = None) -> Artifact:
    """Validate a parsed document field by field; errors name the field by path (`trees`: the
    compiler's formulas checked already, see `CheckedTrees`)."""
    if not isinstance(doc, Mapping):
        raise fail(None, f"expected a JSON object at the top level, got {describe(doc)}")
    if doc.get("format") != FORMAT:
        raise fail(
            into(None, "format"), f"expected format {FORMAT!r}, got {describe(doc.get('format'))}"
        )
    version = doc.get("format_version")
    if type(version) is not int or version != FORMAT_VERSION:
        raise fail(
            into(None, "format_version"),
            f"unsupported format_version {file_value(version)}: this loader reads version "
            f"{FORMAT_VERSION}",
        )
    as_object(doc, None, ("format", "format_version", "compiler", "sources", "pipelines"))
    compiler = as_object(doc["compiler"], into(None, "compiler"), ("name", "version"))
    compiler_name = as_text(compiler["name"], into(into(None, "compiler"), ".name"))
    compiler_version = as_text(compiler["version"], into(into(None, "compiler"), ".version"))
    sources = tuple(
        _source(s, into(into(None, "sources"), f"[{i}]"))
        for i, s in enumerate(as_list(doc["sources"], into(None, "sources")))
    )
    pipelines_path = into(None, "pipelines")
    pipelines: list[PipelineDecl] = []
    seen: dict[str, int] = {}
    budget = NodeBudget()
    raw_pipelines = as_list(doc["pipelines"], pipelines_path)
    if len(raw_pipelines) > MAX_PIPELINES:
        raise over_limit(
            pipelines_path,
            f"{len(raw_pipelines):,} pipelines; the limit is {MAX_PIPELINES:,}",
            limit="MAX_PIPELINES",
        )
    for i, raw in enumerate(raw_pipelines):
        here = into(pipelines_path, f"[{i}]")
        pipeline = parse_pipeline(raw, here, i, len(sources), budget, trees)
        if pipeline.name in seen:
            raise fail(
                into(into(pipelines_path, f"[{i}]"), ".name"),
                f"duplicate pipeline {pipeline.name!r} (also pipelines[{seen[pipeline.name]}])",
            )
        seen[pipeline.name] = i
        pipelines.append(pipeline)
    return Artifact(version, compiler_name, compiler_version, sources, tuple(pipelines))


def _source(value: object, path: object) -> SourceDecl:
    """A compiled source: its path and the sha256 of its bytes."""
    obj = as_object(value, path, ("path", "sha256"))
    digest = as_text(obj["sha256"], into(path, ".sha256"))
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise fail(into(path, ".sha256"), "expected 64 lowercase hex digits")
    return SourceDecl(as_text(obj["path"], into(path, ".path")), digest)


_PIPELINE_KEYS = ("name", "extends", "span", "params", "contracts", "lets", "stages")
# optional (compiler 0.3.0): emitted only when declared
_PIPELINE_FACTS = ("calls", "probe_axes", "probe_minimums")


def parse_pipeline(
    value: object,
    path: object,
    index: int,
    n_sources: int,
    budget: NodeBudget,
    trees: CheckedTrees | None = None,
) -> PipelineDecl:
    """One pipeline (the compiler validates what it would emit with this too); lets are read
    before contracts and stages, which may use them; `budget` is the artifact's so far."""
    obj = as_object(value, path, _PIPELINE_KEYS, _PIPELINE_FACTS)
    name = as_name(obj["name"], into(path, ".name"))
    extends = None if obj["extends"] is None else as_name(obj["extends"], into(path, ".extends"))
    span = as_span(obj["span"], into(path, ".span"), n_sources)
    _count_members(obj, path)
    params = _params(obj["params"], into(path, ".params"), n_sources)
    bits = [param_bits(p.min, p.max, p.type == "bool") for p in params]
    scope = Scope({p.name: (i, p.type) for i, p in enumerate(params)}, {}, budget, bits, trees)
    lets = _lets(obj["lets"], into(path, ".lets"), n_sources, scope)
    contracts = _contracts(obj["contracts"], into(path, ".contracts"), n_sources, scope)
    stages = _stages(obj["stages"], into(path, ".stages"), n_sources, scope)
    call_decls = (
        calls(obj["calls"], into(path, ".calls"), n_sources, scope) if "calls" in obj else ()
    )
    axes = (
        probe_axes(obj["probe_axes"], into(path, ".probe_axes"), params)
        if "probe_axes" in obj
        else ()
    )
    minimums = (
        probe_minimums(obj["probe_minimums"], into(path, ".probe_minimums"), axes, params)
        if "probe_minimums" in obj
        else ()
    )
    assert span is not None
    return PipelineDecl(
        name, extends, params, contracts, lets, stages, span, index, call_decls, axes, minimums
    )


def _count_members(obj: Mapping[str, object], path: object) -> None:
    """Point, lets and stages within the limits, counted before any of them is read."""
    stages = obj["stages"]
    if isinstance(stages, (list, tuple)) and len(stages) > MAX_STAGES:
        raise over_limit(
            into(path, ".stages"),
            f"{len(stages):,} stages; the limit is {MAX_STAGES}",
            limit="MAX_STAGES",
        )
    count = sum(
        len(members) if isinstance(members, (list, tuple)) else 0
        for members in (obj["params"], obj["lets"], stages)
    )
    if count > MAX_MEMBERS:
        raise over_limit(
            path,
            f"{count:,} params, lets and stages; the limit is {MAX_MEMBERS} per pipeline",
            limit="MAX_MEMBERS",
        )


def _params(value: object, path: object, n_sources: int) -> tuple[ParamDecl, ...]:
    """Point: unique names, `int` with a non-empty range holding the default, or `bool`."""
    params: list[ParamDecl] = []
    names: set[str] = set()
    for i, raw in enumerate(as_list(value, path)):
        here = into(path, f"[{i}]")
        head = as_object(raw, here, ("name", "type", "default", "span"), ("min", "max"))
        kind = head["type"]
        default: int | bool
        low: int | None
        high: int | None
        if kind == "int":
            obj = as_object(raw, here, ("name", "type", "default", "min", "max", "span"))
            default = as_int(obj["default"], into(here, ".default"))
            low = as_int(obj["min"], into(here, ".min"))
            high = None if obj["max"] is None else as_int(obj["max"], into(here, ".max"))
            if high is not None and high < low:
                raise fail(here, f"empty range [{low}, {high}]")
            if default < low or (high is not None and default > high):
                raise fail(
                    into(here, ".default"),
                    f"default {default} is outside [{low}, {'inf' if high is None else high}]",
                )
        elif kind == "bool":
            obj = as_object(raw, here, ("name", "type", "default", "span"))
            if type(obj["default"]) is not bool:
                raise fail(
                    into(here, ".default"), f"expected a boolean, got {describe(obj['default'])}"
                )
            default, low, high = bool(obj["default"]), None, None
        else:
            raise fail(into(here, ".type"), f"expected 'int' or 'bool', got {describe(kind)}")
        name = as_name(obj["name"], into(here, ".name"))
        if name in names:
            raise fail(into(here, ".name"), f"duplicate param {name!r}")
        names.add(name)
        span = as_span(obj["span"], into(here, ".span"), n_sources)
        assert span is not None
        params.append(ParamDecl(name, kind, default, low, high, span))
    return tuple(params)


def _lets(value: object, path: object, n_sources: int, scope: Scope) -> tuple[LetDecl, ...]:
    """Lets in order: each refers only to params and earlier lets, and shadows nothing."""
    lets: list[LetDecl] = []
    for i, raw in enumerate(as_list(value, path)):
        here = into(path, f"[{i}]")
        obj = as_object(raw, here, ("name", "expr", "span"))
        name = as_name(obj["name"], into(here, ".name"))
        if name in scope.lets or name in scope.params:
            raise fail(into(here, ".name"), f"duplicate name {name!r} (a param or an earlier let)")
        expr = check_formula(obj["expr"], into(here, ".expr"), scope)
        span = as_span(obj["span"], into(here, ".span"), n_sources)
        assert span is not None
        scope.charge(expr, into(here, ".expr"))
        scope.let_work += expr.work
        scope.lets[name] = (i, expr.type)
        scope.let_bounds[i] = (expr.bits, expr.dbits)
        lets.append(LetDecl(name, expr, span))
    return tuple(lets)


def _contracts(
    value: object, path: object, n_sources: int, scope: Scope
) -> tuple[ContractDecl, ...]:
    """Contracts: boolean expressions declared by a known param."""
    contracts: list[ContractDecl] = []
    for i, raw in enumerate(as_list(value, path)):
        here = into(path, f"[{i}]")
        obj = as_object(raw, here, ("param", "text", "expr", "span"))
        param = as_name(obj["param"], into(here, ".param"))
        if param not in scope.params:
            raise fail(into(here, ".param"), f"unknown param {param!r}")
        text = as_text(obj["text"], into(here, ".text"))
        expr = check_formula(obj["expr"], into(here, ".expr"), scope)
        if expr.type != "bool":
            raise fail(into(here, ".expr"), "a contract must be a boolean expression")
        scope.charge(expr, into(here, ".expr"))
        span = as_span(obj["span"], into(here, ".span"), n_sources)
        assert span is not None
        contracts.append(ContractDecl(param, text, expr, span))
    return tuple(contracts)


def _stages(value: object, path: object, n_sources: int, scope: Scope) -> tuple[StageDecl, ...]:
    """Stages: unique names, each with three numeric fields; `memory` and `time` may list their
    terms; `uses` and `per_step` are optional facts."""
    stages: list[StageDecl] = []
    names: set[str] = set()
    facts = StageFacts()
    for i, raw in enumerate(as_list(value, path)):
        here = into(path, f"[{i}]")
        obj = as_object(
            raw, here, ("name", "span", "iterations", "memory", "time"), ("uses", "per_step")
        )
        name = as_name(obj["name"], into(here, ".name"))
        if name in names:
            raise fail(into(here, ".name"), f"duplicate stage {name!r}")
        names.add(name)
        fields = []
        terms: dict[str, tuple[FieldDecl, ...]] = {"memory": (), "time": ()}
        for field in ("iterations", "memory", "time"):
            at = into(here, "." + field)
            optional = ("terms",) if field in terms else ()
            body = as_object(obj[field], at, ("expr", "span"), optional)
            fields.append(_field(body, at, field, n_sources, scope))
            if "terms" in body:
                terms[field] = _measure_terms(
                    body["terms"], into(at, ".terms"), field, n_sources, scope
                )
                if not same_tree(fields[-1].expr, _left_sum(terms[field])):
                    raise fail(
                        into(at, ".expr"),
                        f"{field}.expr must be the sum of {field}.terms "
                        "(add(add(t1, t2), t3)..., in order)",
                    )
        span = as_span(obj["span"], into(here, ".span"), n_sources)
        assert span is not None
        uses, per_step = facts.read(obj, here, name)
        iterations, memory, time = fields
        stages.append(
            StageDecl(
                name, iterations, memory, time, span, terms["memory"], uses, per_step, terms["time"]
            )
        )
    return tuple(stages)


def _field(
    body: Mapping[str, object], at: object, what: str, n_sources: int, scope: Scope
) -> FieldDecl:
    """A numeric expression with its span (null when the source left it out)."""
    expr = check_formula(body["expr"], into(at, ".expr"), scope)
    if expr.type not in NUMERIC:
        raise fail(into(at, ".expr"), f"{what} must be a number, not a boolean")
    scope.charge(expr, into(at, ".expr"))
    return FieldDecl(expr, as_span(body["span"], into(at, ".span"), n_sources, nullable=True))


def _measure_terms(
    value: object, path: object, field: str, n_sources: int, scope: Scope
) -> tuple[FieldDecl, ...]:
    """The terms of `memory ~ [t1, t2, ...]` (or `time ~`): 2 to MAX_MEASURE_TERMS numeric
    expressions, each charged to the cost model like a field."""
    raw = as_list(value, path)
    if not 2 <= len(raw) <= MAX_MEASURE_TERMS:
        raise fail(path, f"expected 2 to {MAX_MEASURE_TERMS} terms, got {len(raw)}")
    terms = []
    for j, item in enumerate(raw):
        here = into(path, f"[{j}]")
        body = as_object(item, here, ("expr", "span"))
        terms.append(_field(body, here, f"a {field} term", n_sources, scope))
    return tuple(terms)


def _left_sum(terms: tuple[FieldDecl, ...]) -> Expr:
    """`add(add(t1, t2), t3)...`: the one tree a measure with these terms may have."""
    total = terms[0].expr
    for term in terms[1:]:
        typ = "int" if total.type == term.expr.type == "int" else "rat"
        args = (total, term.expr)
        total = Expr("add", typ, args, None, None, None, *node_bounds("add", args, None))
    return total
