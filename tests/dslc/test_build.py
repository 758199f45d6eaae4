"""The one compile-and-load helper: what it loads is what `dslc build` writes, and sources that do
not compile raise `NotCompiled` carrying every diagnostic, the errors rendered in its message."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dslc.build import NotCompiled, emit_and_load, load_program, load_sources, load_text
from dslc.compiler import compile_text
from dslc.diagnostics import CompileError, render
from dslc.emit import artifact, dumps
from tests.examples import program_of

GOOD = "pipeline p {\n    param steps: int = 4 in [1, 100]\n    stage S { iterations = steps }\n}\n"
BAD = "pipeline p {\n    stage S { iterations = nope }\n}\n"


def test_a_source_text_loads_as_its_artifact_does() -> None:
    program = program_of(compile_text(GOOD, "good.wf"))
    text, book = emit_and_load(program)
    assert text == dumps(artifact(program))
    assert load_text(GOOD, "good.wf")["p"].iterations("S", steps=7) == 7
    assert list(load_program(program)) == list(book) == ["p"]


def test_files_and_folders_load(tmp_path: Path) -> None:
    (tmp_path / "good.wf").write_text(GOOD)
    assert load_sources([tmp_path])["p"].iterations("S") == 4


def test_errors_raise_not_compiled_with_the_rendered_diagnostics(tmp_path: Path) -> None:
    with pytest.raises(NotCompiled) as info:
        load_text(BAD, "bad.wf")
    error = info.value
    assert isinstance(error, CompileError) and error.what == "bad.wf"
    assert error.errors and error.errors == error.diagnostics
    assert str(error) == "bad.wf does not compile:\n" + "\n".join(map(render, error.errors))
    (tmp_path / "bad.wf").write_text(BAD)
    where = re.escape(str(tmp_path))
    with pytest.raises(NotCompiled, match=f"^{where} does not compile:\n.*bad.wf:2:"):
        load_sources([tmp_path])
