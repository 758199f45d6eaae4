"""One name limit on both sides: a name the compiler accepts always loads, a longer one is a
`limit` diagnostic at `check` time (a 65-character name used to pass `check` and fail `build`)."""

from __future__ import annotations

from dslc.build import load_program
from dslc.compiler import compile_text
from dslc.limits import MAX_NAME_LENGTH


def source(name: str) -> str:
    return (
        f"pipeline {name} {{\n    param {name}: int = 1 in [0, 2]\n"
        f"    let {name}_ = {name}\n    stage {name} {{ iterations = {name} }}\n}}\n"
    )


def test_a_name_at_the_limit_compiles_and_loads() -> None:
    name = "n" * (MAX_NAME_LENGTH - 1)  # the let adds one character
    result = compile_text(source(name))
    assert result.ok and result.program is not None
    book = load_program(result.program)
    assert book[name].iterations(name) == 1


def test_a_longer_name_is_a_limit_diagnostic() -> None:
    result = compile_text(source("n" * (MAX_NAME_LENGTH + 1)))
    assert result.errors and {d.code for d in result.errors} == {"limit"}
    assert "65 characters, over the limit of 64" in result.errors[0].message
