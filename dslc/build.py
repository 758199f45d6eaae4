"""Compile, emit and load in one step: `.wf` sources to a `runtime.FormulaBook`, through the JSON
text a serving worker would read, so every tool and test evaluates what `dslc build` ships.

A tool module of the compiler: it imports the runtime (tests/test_layering.py allows it); the
compiler's core never does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from dslc.compiler import CompileResult, compile_paths, compile_text
from dslc.diagnostics import CompileError, Diagnostic, render
from dslc.emit import Emitted, artifact, dumps
from dslc.model import Program
from runtime import FormulaBook, load_formulas
from runtime.book import load_checked

__all__ = [
    "NotCompiled",
    "emit_and_load",
    "load_program",
    "load_result",
    "load_sources",
    "load_text",
]


class NotCompiled(CompileError):
    """The sources have errors: `diagnostics` holds every one, the message renders the errors."""

    def __init__(self, what: str, diagnostics: Sequence[Diagnostic]) -> None:
        super().__init__(diagnostics)
        self.what = what
        self.errors = tuple(d for d in self.diagnostics if d.is_error)
        self.args = (f"{what} does not compile:\n" + "\n".join(render(d) for d in self.errors),)


def emit_and_load(program: Program, emitted: Emitted | None = None) -> tuple[str, FormulaBook]:
    """The artifact's JSON text and the book the runtime loads from it.

    `emitted`, what the compilation's emit and cost passes made of the program (its
    `CompileResult.emitted`), is reused: the document shares those IR objects and is validated
    through what the loader's checks found of them. `json.loads` of the text must give the
    document back, and the checks then find each formula they saw before (`CheckedTrees`), so a
    family of N children costs what its own members cost rather than N re-reads of what they
    inherit (bench/README.md "compile"). Without it everything is emitted and checked afresh.
    """
    ir = None if emitted is None else emitted.ir
    document = artifact(program, ir)
    text = dumps(document)
    if emitted is None or emitted.ir.index != {s.name: i for i, s in enumerate(program.sources)}:
        return text, load_formulas(text)
    if json.loads(text) != document:  # our emitter's bug (a tuple, a non-string key): exit 3
        raise AssertionError("the artifact's JSON text does not read back as its document")
    return text, load_checked(document, emitted.checked)


def load_program(program: Program, emitted: Emitted | None = None) -> FormulaBook:
    """A checked program as a serving worker would load it (`emitted`: see `emit_and_load`)."""
    return emit_and_load(program, emitted)[1]


def load_result(result: CompileResult, what: str) -> FormulaBook:
    """A compilation's program loaded, reusing what it emitted; NotCompiled on errors."""
    return load_program(_checked(result, what), result.emitted)


def _checked(result: CompileResult, what: str) -> Program:
    if not result.ok or result.program is None:
        raise NotCompiled(what, result.diagnostics)
    return result.program


def load_sources(paths: Iterable[str | Path], *, strict: bool = False) -> FormulaBook:
    """Files and folders (every `*.wf` below them) compiled and loaded; NotCompiled on errors."""
    paths = list(paths)
    what = ", ".join(str(path) for path in paths)
    return load_result(compile_paths(paths, strict=strict), what)


def load_text(text: str, name: str = "<string>", *, strict: bool = False) -> FormulaBook:
    """One source text (named `name` in diagnostics) compiled and loaded; NotCompiled on errors."""
    return load_result(compile_text(text, name, strict=strict), name)
