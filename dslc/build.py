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
from dslc.emit import artifact, dumps
from dslc.model import Program
from runtime import FormulaBook, load_formulas
from runtime.formulas import load_checked

__all__ = ["NotCompiled", "emit_and_load", "load_program", "load_sources", "load_text"]


class NotCompiled(CompileError):
    """The sources have errors: `diagnostics` holds every one, the message renders the errors."""

    def __init__(self, what: str, diagnostics: Sequence[Diagnostic]) -> None:
        super().__init__(diagnostics)
        self.what = what
        self.errors = tuple(d for d in self.diagnostics if d.is_error)
        self.args = (f"{what} does not compile:\n" + "\n".join(render(d) for d in self.errors),)


def emit_and_load(program: Program) -> tuple[str, FormulaBook]:
    """The artifact's JSON text and the book the runtime loads from it.

    When the compilation's cost pass emitted and validated the formulas already (with the
    loader's own checks), the document reuses those objects and is validated through them:
    `json.loads` of the text must give the document back, and the loader's checks then find
    each formula it saw before (`CheckedTrees`), so a family of N children costs what its own
    members cost rather than N re-reads of what they inherit (bench/README.md "compile").
    """
    shared = program.lowered
    document = artifact(program, shared)
    text = dumps(document)
    if shared is None or shared.index != {s.name: i for i, s in enumerate(program.sources)}:
        return text, load_formulas(text)
    if json.loads(text) != document:  # our emitter's bug (a tuple, a non-string key): exit 3
        raise AssertionError("the artifact's JSON text does not read back as its document")
    return text, load_checked(document, shared.trees)


def load_program(program: Program) -> FormulaBook:
    """A checked program as a serving worker would load it."""
    return emit_and_load(program)[1]


def _checked(result: CompileResult, what: str) -> Program:
    if not result.ok or result.program is None:
        raise NotCompiled(what, result.diagnostics)
    return result.program


def load_sources(paths: Iterable[str | Path], *, strict: bool = False) -> FormulaBook:
    """Files and folders (every `*.wf` below them) compiled and loaded; NotCompiled on errors."""
    paths = list(paths)
    what = ", ".join(str(path) for path in paths)
    return load_program(_checked(compile_paths(paths, strict=strict), what))


def load_text(text: str, name: str = "<string>", *, strict: bool = False) -> FormulaBook:
    """One source text (named `name` in diagnostics) compiled and loaded; NotCompiled on errors."""
    return load_program(_checked(compile_text(text, name, strict=strict), name))
