"""The compilation driver: sources in, a checked Program and every diagnostic out."""

from __future__ import annotations

import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

from dslc import ast
from dslc.codes import Code
from dslc.diagnostics import CompileError, Diagnostic, dedupe, error
from dslc.emit import Emitted
from dslc.limits import MAX_ERRORS, MAX_FILE_BYTES
from dslc.model import Program, ResolvedPipeline
from dslc.parse import parse
from dslc.passes.chain import CHECKS, PASSES, Compilation, Unit, run_passes
from dslc.passes.resolve import check_pipeline_names
from dslc.source import SourceFile


@attrs.frozen
class CompileResult:
    program: Program | None
    diagnostics: tuple[Diagnostic, ...]
    # The IR the compilation emitted and checked, for `dslc.build` to reuse (None with errors).
    emitted: Emitted | None = attrs.field(default=None, eq=False, repr=False)

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
            problems.append(error(Code.SYNTAX, f"not a regular file: {raw}", None))
        else:
            problems.append(error(Code.SYNTAX, f"no such file or folder: {raw}", None))
    unique = list(dict.fromkeys(found))
    return unique, problems


def read_source(path: Path) -> tuple[SourceFile | None, list[Diagnostic]]:
    """Read one file as UTF-8 (size checked before reading it all)."""
    name = str(path)
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            return None, [error(Code.SYNTAX, f"not a regular file: {name}", None)]
        size = info.st_size
        if size > MAX_FILE_BYTES:
            return None, [
                error(
                    Code.LIMIT, f"{name} is {size:,} bytes; the limit is {MAX_FILE_BYTES:,}", None
                )
            ]
        data = path.read_bytes()
    except OSError as exc:
        return None, [error(Code.SYNTAX, f"cannot read {name}: {exc.strerror}", None)]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        source = SourceFile(name, data.decode("utf-8", "replace"))
        return None, [
            error(
                Code.SYNTAX,
                "the file is not valid UTF-8 text",
                source.span(exc.start, exc.start + 1),
                hints=["is this a binary file?"],
            )
        ]
    return SourceFile(name, text.removeprefix("\ufeff")), []


def compile_sources(
    sources: Sequence[SourceFile], *, strict: bool = False, prove: bool = True
) -> CompileResult:
    """Parse every file, then run each pipeline through the passes (`dslc.passes.chain`: names,
    facts, lets' order, types, domains, emission, cost, default workload, proofs); collect every
    diagnostic."""
    diagnostics: list[Diagnostic] = []
    modules: list[ast.Module] = []
    for source in sources:
        try:
            modules.append(parse(source))
        except CompileError as exc:
            diagnostics += exc.diagnostics
    by_name, name_problems = check_pipeline_names(modules)
    diagnostics += name_problems
    if any(d.code is Code.LIMIT for d in name_problems):
        by_name = {}  # too many pipelines: refuse before resolving any
    compilation = Compilation(by_name, {source.name: i for i, source in enumerate(sources)})
    passes = PASSES if prove else CHECKS
    resolved: list[ResolvedPipeline] = []
    for name in by_name:
        if compilation.budget.exhausted:  # the artifact is already over a limit: stop there
            break
        unit = run_passes(Unit(name), compilation, passes)
        diagnostics += unit.problems
        if not unit.stopped and unit.pipeline is not None:
            resolved.append(unit.pipeline)
        if sum(d.is_error for d in diagnostics) >= MAX_ERRORS:
            break
    if strict:
        diagnostics = [d.as_error() for d in diagnostics]
    diagnostics = sorted(dedupe(diagnostics), key=lambda d: d.sort_key())
    errors = [d for d in diagnostics if d.is_error]
    if len(errors) > MAX_ERRORS:
        kept = set(map(id, errors[:MAX_ERRORS]))
        diagnostics = [d for d in diagnostics if not d.is_error or id(d) in kept]
    if any(d.is_error for d in diagnostics):
        return CompileResult(None, tuple(diagnostics))
    program = Program(tuple(sources), tuple(modules), tuple(resolved))
    return CompileResult(program, tuple(diagnostics), compilation.emitted)


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
