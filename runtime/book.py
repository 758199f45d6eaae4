"""A compiled artifact loaded once: every pipeline by name (``FormulaBook``), with the loaders that
validate the document first (``load_formulas``; ``load_checked`` for the compiler's own)."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator, Mapping

from artifact.document import parse_artifact, read_artifact
from artifact.errors import UnknownPipelineError
from artifact.ir import Artifact, SourceDecl
from artifact.stack import retried_on_fresh_stack
from artifact.tree_checks import CheckedTrees
from runtime.evaluator import FactoryCache
from runtime.formulas import Pipeline


class FormulaBook(Mapping[str, Pipeline]):
    """Every pipeline of one artifact by name; `book["x"]` raises UnknownPipelineError (a
    KeyError).
    """

    __slots__ = ("_pipelines", "compiler", "format_version", "sources")

    def __init__(self, artifact: Artifact) -> None:
        factories = FactoryCache()  # shared: identical formulas compile once per book
        paths = tuple(source.path for source in artifact.sources)
        self._pipelines = {
            decl.name: Pipeline(decl, factories, paths) for decl in artifact.pipelines
        }
        self.format_version = artifact.format_version
        self.compiler = (artifact.compiler_name, artifact.compiler_version)
        self.sources: tuple[SourceDecl, ...] = artifact.sources

    def __getitem__(self, name: str) -> Pipeline:
        try:
            return self._pipelines[name]
        except (KeyError, TypeError):
            raise UnknownPipelineError(str(name), tuple(self._pipelines)) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._pipelines)

    def __len__(self) -> int:
        return len(self._pipelines)

    def __repr__(self) -> str:
        return f"<FormulaBook: {', '.join(self._pipelines) or 'no pipelines'}>"


def load_formulas(
    source: str | bytes | bytearray | os.PathLike[str] | Mapping[str, object],
) -> FormulaBook:
    """Load and validate an artifact (a path, JSON text or bytes, or a parsed mapping) once, at
    start-up.

    The cyclic garbage collector is paused meanwhile (and resumed, if it was running): loading
    makes tens of thousands of objects, none in a cycle, and collections walking the growing heap
    made the load superlinear in the artifact's size (bench/README.md "load").
    """
    return _loaded(lambda: read_artifact(source))


def load_checked(document: Mapping[str, object], trees: CheckedTrees) -> FormulaBook:
    """`load_formulas(document)` for the compiler's own document, whose formulas its cost pass
    checked already (`trees`): `dslc build` validates what it writes at the cost of what is new."""
    return _loaded(lambda: parse_artifact(document, trees))


def _loaded(read: Callable[[], Artifact]) -> FormulaBook:
    """The book of what `read` validates, with the collector paused and a fresh stack if the
    caller's is too deep for the JSON's nesting."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        return retried_on_fresh_stack(lambda: FormulaBook(read()))
    finally:
        if paused:
            gc.enable()
