"""Compile and report for the commands: every diagnostic shown, a one-line summary, exit 1 on
errors; a FormulaBook from sources or an artifact, loaded as a serving worker loads it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import click

from dslc.cli_failures import Failure, cannot, runtime_errors
from dslc.cli_files import wf_files
from dslc.cli_ui import ui
from dslc.render_rich import plural

if TYPE_CHECKING:
    from dslc.compiler import CompileResult
    from dslc.emit import Emitted
    from dslc.model import Program
    from runtime import FormulaBook, Pipeline

__all__ = ["Compiled", "compile_files", "load_book", "pipeline_named", "summary"]


@attrs.frozen
class Compiled:
    """A compilation without errors: the program, and the IR it emitted for `dslc.build`."""

    program: Program
    emitted: Emitted | None


def compile_files(files: list[Path], *, strict: bool = False) -> Compiled:
    """Compile; every diagnostic to stderr; on errors, a summary and exit 1."""
    from dslc.compiler import compile_paths

    result = compile_paths(files, strict=strict)
    for diagnostic in result.diagnostics:
        ui().err.diagnostic(diagnostic)
    if not result.ok or result.program is None:
        ui().err.line(summary(result, files), style="bold red")
        raise click.exceptions.Exit(1)
    return Compiled(result.program, result.emitted)


def summary(result: CompileResult, files: Sequence[Path]) -> str:
    """`2 errors, 1 warning in 3 files` or `ok: 12 pipelines in 9 files`."""
    errors = len(result.errors)
    warnings = len(result.diagnostics) - errors
    where = plural(len(files), "file")
    if errors or not result.ok:
        counts = [plural(errors, "error")] + ([plural(warnings, "warning")] if warnings else [])
        return f"{', '.join(counts)} in {where}"
    extra = f" ({plural(warnings, 'warning')})" if warnings else ""
    pipelines = result.program.pipelines if result.program is not None else ()
    return f"ok: {plural(len(pipelines), 'pipeline')} in {where}{extra}"


def load_book(source: Path) -> tuple[FormulaBook, Program | None]:
    """A FormulaBook from a `.json` artifact, or from `.wf` sources compiled in memory.

    Returns (book, program); program is None for an artifact. Either way the values come from
    the runtime evaluator, loaded from JSON text exactly as a serving worker loads it.
    """
    from runtime import load_formulas

    if source.is_file() and source.suffix == ".json":
        try:
            with runtime_errors():
                return load_formulas(source), None
        except OSError as exc:
            raise cannot("read", source, exc) from None
    from dslc.build import load_program

    result = compile_files(wf_files([source]))
    return load_program(result.program, result.emitted), result.program


def pipeline_named(book: FormulaBook, name: str, source: Path) -> Pipeline:
    """`book[name]`; an unknown name fails naming the closest pipelines and `dslc list SOURCE`."""
    from runtime import UnknownPipelineError

    try:
        return book[name]
    except UnknownPipelineError as exc:
        from artifact.errors import one_of

        where = "artifact" if source.is_file() and source.suffix == ".json" else "sources"
        hint = f"; did you mean {one_of(exc.closest)}?" if exc.closest else ""
        raise Failure(
            f"no pipeline {name!r} in the {where} {source}{hint} "
            f"(list all {len(exc.known)} with: dslc list {source})"
        ) from None
