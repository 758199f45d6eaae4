"""The compilation driver: sources in, a checked Program and every diagnostic out."""

from __future__ import annotations

import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

from dslc import ast
from dslc.diagnostics import CompileError, Diagnostic, dedupe, error
from dslc.limits import MAX_ERRORS, MAX_FILE_BYTES
from dslc.model import Program, ResolvedPipeline
from dslc.parse import parse
from dslc.passes.cost import CostBudget, check_cost
from dslc.passes.domain import check_default_workload, resolve_params
from dslc.passes.facts import check_facts
from dslc.passes.members import Members
from dslc.passes.prove import ProofCache, check_properties
from dslc.passes.resolve import check_names, check_pipeline_names, flatten, order_lets
from dslc.passes.types import check_types
from dslc.source import SourceFile, Span


@attrs.frozen
class CompileResult:
    program: Program | None
    diagnostics: tuple[Diagnostic, ...]

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.is_error)

    @property
    def ok(self) -> bool:
        return self.program is not None and not self.errors


def discover(paths: Iterable[str | Path]) -> tuple[list[Path], list[Diagnostic]]:
    """Files as given and every `*.wf` below given folders, in a stable order."""
    found: list[Path] = []
    problems = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += sorted(p for p in path.rglob("*.wf") if p.is_file())
        elif path.is_file():
            found.append(path)
        elif path.exists():  # a FIFO, a device, a socket: never opened (a FIFO would block)
            problems.append(error("syntax", f"not a regular file: {raw}", None))
        else:
            problems.append(error("syntax", f"no such file or folder: {raw}", None))
    unique = list(dict.fromkeys(found))
    return unique, problems


def read_source(path: Path) -> tuple[SourceFile | None, list[Diagnostic]]:
    """Read one file as UTF-8 (size checked before reading it all)."""
    name = str(path)
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            return None, [error("syntax", f"not a regular file: {name}", None)]
        size = info.st_size
        if size > MAX_FILE_BYTES:
            return None, [
                error("limit", f"{name} is {size:,} bytes; the limit is {MAX_FILE_BYTES:,}", None)
            ]
        data = path.read_bytes()
    except OSError as exc:
        return None, [error("syntax", f"cannot read {name}: {exc.strerror}", None)]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        source = SourceFile(name, data.decode("utf-8", "replace"))
        return None, [
            error(
                "syntax",
                "the file is not valid UTF-8 text",
                source.span(exc.start, exc.start + 1),
                hints=["is this a binary file?"],
            )
        ]
    return SourceFile(name, text.removeprefix("\ufeff")), []


def _inside(inner: Span, outer: Span) -> bool:
    return inner.source.name == outer.source.name and (
        (outer.line, outer.column) <= (inner.line, inner.column)
        and (inner.end_line, inner.end_column) <= (outer.end_line, outer.end_column)
    )


@attrs.frozen
class _Broken:
    """The members errors lie in, each set aside on its own: stage fields (None: the stage's
    header, so the whole stage), lets and call arguments."""

    fields: dict[str, set[str | None]] = attrs.field(factory=dict)
    lets: set[str] = attrs.field(factory=set)
    calls: set[str] = attrs.field(factory=set)


def _broken_members(pipeline: ResolvedPipeline, problems: Sequence[Diagnostic]) -> _Broken | None:
    """Where the errors lie; None when one lies outside every stage, let and call (a param, a
    contract, a probe: everything may depend on it)."""
    broken = _Broken()
    for problem in problems:
        if not problem.is_error:
            continue
        span = problem.span
        if span is None:
            return None
        owner = _stage_owner(pipeline, span)
        if owner is not None:
            broken.fields.setdefault(owner[0], set()).add(owner[1])
        elif let := next((x for x in pipeline.lets if _within(span, x.span)), None):
            broken.lets.add(let.name)
        elif call := next((c for c in pipeline.calls if _within(span, c.span)), None):
            broken.calls.add(call.arg)
        else:
            return None
    return broken


def _within(inner: Span, outer: Span | None) -> bool:
    return outer is not None and _inside(inner, outer)


def _stage_owner(pipeline: ResolvedPipeline, span: Span) -> tuple[str, str | None] | None:
    """The stage and field (None: the stage's header) a place lies in."""
    for stage in pipeline.stages:
        for field in stage.fields.values():
            if _within(span, field.span):
                return stage.name, field.name
        if _within(span, stage.decl.span):
            return stage.name, None
    return None


def _set_aside(pipeline: ResolvedPipeline, broken: _Broken) -> ResolvedPipeline:
    """The pipeline without its broken members and without whatever reads a broken let (its
    error is the let's): what is left is checked and proved on its own."""
    dropped: set[str] = set()
    for let in pipeline.lets:  # dependency order: a let's inputs are decided before it
        if let.name in broken.lets or _reads(let.value, dropped):
            dropped.add(let.name)
    stages = []
    for stage in pipeline.stages:
        fields = broken.fields.get(stage.name, set())
        if None in fields:
            continue
        kept = {
            name: field
            for name, field in stage.fields.items()
            if name not in fields and not _reads(field.value, dropped)
        }
        stages.append(attrs.evolve(stage, fields=kept))
    return attrs.evolve(
        pipeline,
        lets=tuple(let for let in pipeline.lets if let.name not in dropped),
        stages=tuple(stages),
        calls=tuple(
            call
            for call in pipeline.calls
            if call.arg not in broken.calls and not _reads(call.value, dropped)
        ),
    )


def _reads(expr: ast.Expr, names: set[str]) -> bool:
    return bool(names) and any(node.id in names for node in ast.names(expr))


def _resolve_one(
    name: str, by_name: dict[str, ast.Pipeline], budget: CostBudget, members: Members
) -> tuple[ResolvedPipeline | None, list[Diagnostic]]:
    """Every pass up to the prover; each reports all it can.

    Errors set aside the member they lie in: a stage field (an error in a stage's header, the
    stage), a let with every let, field and call that reads it, a call argument. The rest goes on
    to the cost, domain and default-workload checks and the prover, so one typo does not hide the
    errors of other members. A type error in a param or a contract stops the pipeline before its
    params are resolved, any other error there right after (None): everything may depend on it.
    Nothing is evaluated before the cost pass bounded it (constant defaults and ranges aside).
    """
    pipeline, problems = flatten(name, by_name)
    if pipeline is None:
        return None, problems
    lets, cycle = order_lets(pipeline)
    problems += cycle + check_names(pipeline, members=members) + check_facts(pipeline)
    if cycle:
        return None, problems
    pipeline = attrs.evolve(pipeline, lets=lets)
    types, type_problems = check_types(pipeline, members)
    problems += type_problems
    if _broken_members(pipeline, type_problems) is None:
        return None, problems
    broken = _broken_members(pipeline, problems)
    pipeline = _set_aside(attrs.evolve(pipeline, types=types), broken or _Broken())
    resolved, domain_problems = resolve_params(pipeline)
    problems += domain_problems
    if resolved is None or domain_problems or broken is None:
        return None, problems
    cost_problems = check_cost(resolved, budget)
    problems += cost_problems
    if cost_problems:
        return None, problems
    default_problems = check_default_workload(resolved)
    return (None if default_problems else resolved), problems + default_problems


def compile_sources(
    sources: Sequence[SourceFile], *, strict: bool = False, prove: bool = True
) -> CompileResult:
    """Parse, resolve, type, check domains and prove every pipeline; collect every diagnostic."""
    diagnostics: list[Diagnostic] = []
    modules: list[ast.Module] = []
    for source in sources:
        try:
            modules.append(parse(source))
        except CompileError as exc:
            diagnostics += exc.diagnostics
    by_name, name_problems = check_pipeline_names(modules)
    diagnostics += name_problems
    resolved: list[ResolvedPipeline] = []
    budget = CostBudget({source.name: i for i, source in enumerate(sources)})
    proofs = ProofCache()  # a child re-proves only what it changed; each file's work is bounded
    members = Members()  # and walks and types only the members it adds or changes
    if any(d.code == "limit" for d in name_problems):
        by_name = {}  # too many pipelines: refuse before resolving any
    for name in by_name:
        if budget.exhausted:  # the artifact is already over a limit of its own: stop there
            break
        pipeline, problems = _resolve_one(name, by_name, budget, members)
        diagnostics += problems
        if pipeline is not None:
            if prove:
                diagnostics += check_properties(pipeline, proofs=proofs)
            resolved.append(pipeline)
        if sum(d.is_error for d in diagnostics) >= MAX_ERRORS:
            break
    if strict:
        diagnostics = [d.as_error() for d in diagnostics]
    diagnostics = sorted(dedupe(diagnostics), key=lambda d: d.sort_key())
    errors = [d for d in diagnostics if d.is_error]
    if len(errors) > MAX_ERRORS:
        kept = set(map(id, errors[:MAX_ERRORS]))
        diagnostics = [d for d in diagnostics if not d.is_error or id(d) in kept]
    program = (
        None
        if any(d.is_error for d in diagnostics)
        else Program(tuple(sources), tuple(modules), tuple(resolved), budget.lowered)
    )
    return CompileResult(program, tuple(diagnostics))


def compile_paths(
    paths: Iterable[str | Path], *, strict: bool = False, prove: bool = True
) -> CompileResult:
    """Compile files and folders (every `*.wf` below them)."""
    files, problems = discover(paths)
    sources = []
    for path in files:
        source, read_problems = read_source(path)
        problems += read_problems
        if source is not None:
            sources.append(source)
    result = compile_sources(sources, strict=strict, prove=prove)
    if problems:
        return CompileResult(None, tuple(problems) + result.diagnostics)
    return result


def compile_text(text: str, name: str = "<string>", *, strict: bool = False) -> CompileResult:
    return compile_sources([SourceFile(name, text)], strict=strict)
