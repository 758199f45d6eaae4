"""The parser: the whole surface syntax, spans outside equality, and one door for errors."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dslc import ast
from dslc.compiler import compile_text
from dslc.diagnostics import CompileError
from dslc.parse import _parser, parse_text
from tests.budget import within_linear_budget
from tests.examples import LANGUAGE_EXAMPLE


def only_let(text: str) -> ast.Expr:
    (pipeline,) = parse_text(f"pipeline p {{\n    let x = {text}\n}}\n").pipelines
    (let,) = pipeline.members
    assert isinstance(let, ast.Let)
    return let.value


def test_language_example_parses_with_every_pipeline() -> None:
    module = parse_text(LANGUAGE_EXAMPLE, "wan.wf")
    assert [p.name for p in module.pipelines] == [
        "wan2_2_t2v_a14b",
        "wan2_2_i2v_a14b",
        "wan2_1_t2v_dmd",
        "minimax_h3",
    ]
    assert [p.parent for p in module.pipelines] == [
        None,
        "wan2_2_t2v_a14b",
        "wan2_2_t2v_a14b",
        None,
    ]
    frames = module.pipelines[0].members[1]
    assert isinstance(frames, ast.Param) and frames.type == "int"
    assert frames.where == ast.Binary(
        "==", ast.Binary("%", ast.Name("frames"), ast.Num(Fraction(4))), ast.Num(Fraction(1))
    )


def test_no_anonymous_terminal_can_reach_a_message() -> None:
    names = [t.name for t in _parser().terminals]
    assert names and not [n for n in names if n.startswith("__ANON")]


def test_spans_do_not_take_part_in_equality_but_are_right() -> None:
    a = parse_text("pipeline p { let x = 1 + steps }")
    b = parse_text("pipeline p {\n\n    let x =   1+steps\n}")
    assert a == b
    let = b.pipelines[0].members[0]
    assert isinstance(let, ast.Let)
    value = let.value
    assert value.span is not None and (value.span.line, value.span.column) == (3, 15)
    assert (value.span.end_line, value.span.end_column) == (3, 22)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1_000", Fraction(1000)),
        ("0.725", Fraction(29, 40)),
        ("1_0.2_5", Fraction(41, 4)),
    ],
)
def test_numeric_literals_are_exact(text: str, expected: Fraction) -> None:
    assert only_let(text) == ast.Num(expected)


def test_precedence_and_associativity() -> None:
    n = ast.Num
    x, y = ast.Name("x"), ast.Name("y")
    assert only_let("1 + 2 * 3") == ast.Binary(
        "+", n(Fraction(1)), ast.Binary("*", n(Fraction(2)), n(Fraction(3)))
    )
    assert only_let("x - y - 1") == ast.Binary("-", ast.Binary("-", x, y), n(Fraction(1)))
    assert only_let("2 ** 3 ** 2") == ast.Binary(
        "**", n(Fraction(2)), ast.Binary("**", n(Fraction(3)), n(Fraction(2)))
    )
    assert only_let("-x ** 2") == ast.Unary("-", ast.Binary("**", x, n(Fraction(2))))
    assert only_let("not x and y") == ast.Binary("and", ast.Unary("not", x), y)
    assert only_let("x or y and x") == ast.Binary("or", x, ast.Binary("and", y, x))
    assert only_let("if x then 1 else y + 1") == ast.IfElse(
        x, n(Fraction(1)), ast.Binary("+", y, n(Fraction(1)))
    )
    assert only_let("x // 4 % 3") == ast.Binary(
        "%", ast.Binary("//", x, n(Fraction(4))), n(Fraction(3))
    )


def test_separators_comments_crlf_and_multiline_brackets() -> None:
    text = (
        "# header\r\npipeline p { # trailing\r\n  param a: int = 1 ; let b = max(a,\r\n   "
        "2,\r\n)\r\n"
        "  stage S { iterations = a; memory ~ b }\r\n\r\n}\r\n"
    )
    module = parse_text(text)
    assert [type(m).__name__ for m in module.pipelines[0].members] == ["Param", "Let", "Stage"]
    assert [c.text for c in module.comments] == ["# header", "# trailing"]


@pytest.mark.parametrize(
    "text",
    [
        "\x00\x01\x02binary junk\xff",
        "pipeline a { let x = " + "(" * 20_000 + "1" + ")" * 20_000 + " }",
        "pipeline a { let x = " + "9" * 5_000 + " }",
        "pipeline a { let x = 2 ** 1000 }",
        "pipeline a { let x = " + "-" * 20_000 + "1 }",
        "pipeline a { let x = " + " + ".join(["1"] * 20_000) + " }",
        "pipeline a { let x = " + " + ".join(["1"] * 8_000) + " }",
        "pipeline a {" + "\n let x = 1" * 4_000 + " }",
        "pipeline a { let x = " + "not " * 20_000 + "true }",
        "pipeline a { let x = [" + "[" * 20_000 + " }",
        "pipeline " * 20_000,
        "}" * 50_000,
    ],
)
def test_hostile_input_is_a_diagnostic_in_linear_work(text: str) -> None:
    compile_text("pipeline warm { let x = 1 }", "warm.wf")  # the parser is built once, not here
    result = within_linear_budget(lambda: compile_text(text, "hostile.wf"), len(text))
    assert not result.ok
    assert {d.code for d in result.errors} <= {"syntax", "limit", "duplicate"}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(
        alphabet=st.sampled_from(
            list("pipelinestagparmletif{}()[]=~:;,+-*/%<>!#\n 0123456789._xyz")
        ),
        max_size=120,
    )
)
def test_random_text_yields_a_result_never_a_traceback(text: str) -> None:
    result = compile_text(text, "fuzz.wf")
    assert all(d.span is None or d.span.line >= 1 for d in result.diagnostics)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_yield_a_result(data: bytes) -> None:
    result = compile_text(data.decode("utf-8", "replace"), "bytes.wf")
    assert result.ok or result.errors


def test_parse_errors_raise_compile_error_only() -> None:
    with pytest.raises(CompileError) as info:
        parse_text("pipeline p { param }")
    (diagnostic,) = info.value.diagnostics
    assert diagnostic.code == "syntax" and "expected a name" in diagnostic.message
