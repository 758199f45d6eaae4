"""dslc.fmt: golden layouts, precedence, comments, and round-trip properties."""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dslc import ast
from dslc.diagnostics import CompileError
from dslc.fmt import format_expr, format_module, format_source
from dslc.parse import parse_text
from dslc.source import SourceFile
from tests.examples import ROOT


def fmt(text: str) -> str:
    return format_source(SourceFile("t.wf", text))


def comment_texts(text: str) -> list[str]:
    """Every comment of a text, found independently of the parser."""
    return sorted(line[line.index("#") :].rstrip() for line in text.split("\n") if "#" in line)


def assert_canonical(source: str) -> str:
    """Formatting keeps meaning and comments, and is idempotent; returns the formatted text."""
    out = fmt(source)
    assert parse_text(out) == parse_text(source)
    assert comment_texts(out) == comment_texts(source)
    assert fmt(out) == out
    return out


# --- layout ----------------------------------------------------------------------------------

FMT_GOLDEN = ROOT / "tests" / "golden" / "fmt"
LAYOUT_CASES = sorted(FMT_GOLDEN.glob("*.source"))


@pytest.mark.parametrize("case", LAYOUT_CASES, ids=[c.stem for c in LAYOUT_CASES])
def test_layout(case: Path) -> None:
    """`tests/golden/fmt/NAME.source` formats to exactly `NAME.expected` (bytes: CRLF stays CRLF).

    Regenerate (then review every change by eye) with
    `UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/dslc/test_fmt.py -k test_layout`.
    """
    source = case.read_bytes().decode()
    expected_path = case.with_suffix(".expected")
    out = assert_canonical(source)
    if os.environ.get("UPDATE_GOLDEN"):
        expected_path.write_bytes(out.encode())
    assert out == expected_path.read_bytes().decode()


def test_there_are_layout_cases() -> None:
    assert len(LAYOUT_CASES) >= 20
    assert all(c.with_suffix(".expected").exists() for c in LAYOUT_CASES)


def test_stage_goes_to_block_past_100_columns() -> None:
    fits = "x" * (100 - len("    stage S { iterations =  }"))
    assert (
        fmt(f"pipeline p {{ stage S {{ iterations = {fits} }} }}").splitlines()[1]
        == f"    stage S {{ iterations = {fits} }}"
    )
    too_long = fits + "y"
    assert fmt(f"pipeline p {{ stage S {{ iterations = {too_long} }} }}").splitlines()[1:4] == [
        "    stage S {",
        f"        iterations = {too_long}",
        "    }",
    ]


# --- expressions -----------------------------------------------------------------------------

PRECEDENCE = [
    ("(a + b) * c", "(a + b) * c"),
    ("a * (b + c)", "a * (b + c)"),
    ("a - (b - c)", "a - (b - c)"),
    ("(a - b) - c", "a - b - c"),
    ("a - b - c", "a - b - c"),
    ("a / (b * c)", "a / (b * c)"),
    ("(a * b) // c", "a * b // c"),
    ("a % (b // c)", "a % (b // c)"),
    ("-(x ** 2)", "-x ** 2"),
    ("-x ** 2", "-x ** 2"),
    ("(-x) ** 2", "(-x) ** 2"),
    ("2 ** 3 ** 2", "2 ** 3 ** 2"),
    ("2 ** (3 ** 2)", "2 ** 3 ** 2"),
    ("(2 ** 3) ** 2", "(2 ** 3) ** 2"),
    ("2 ** (-1)", "2 ** -1"),
    ("2 ** -x ** 2", "2 ** -x ** 2"),
    ("(a + b) ** 2", "(a + b) ** 2"),
    ("f(x) ** 2", "f(x) ** 2"),
    ("-(a * b)", "-(a * b)"),
    ("(-a) * b", "-a * b"),
    ("-(-x)", "- -x"),
    ("a - -b", "a - -b"),
    ("not (a and b)", "not (a and b)"),
    ("(not a) and b", "not a and b"),
    ("not not a", "not not a"),
    ("not a == b", "not a == b"),
    ("(not a) == b", "(not a) == b"),
    ("a or b and c", "a or b and c"),
    ("(a or b) and c", "(a or b) and c"),
    ("a or (b or c)", "a or (b or c)"),
    ("(a or b) or c", "a or b or c"),
    ("(a < b) and (b <= c)", "a < b and b <= c"),
    ("(a == b) == c", "(a == b) == c"),
    ("a != (b > c)", "a != (b > c)"),
    ("(a + 1) >= b * 2", "a + 1 >= b * 2"),
    ("(if c then 1 else 2) + 1", "(if c then 1 else 2) + 1"),
    ("if c then 1 else 2", "if c then 1 else 2"),
    ("(if c then 1 else 2)", "if c then 1 else 2"),
    ("if a then b else if c then d else e", "if a then b else if c then d else e"),
    ("-(if c then 1 else 2)", "-(if c then 1 else 2)"),
    ("not (if c then a else b)", "not (if c then a else b)"),
    ("(((a)))", "a"),
    ("f((a), [1,2 ,3], if c then 1 else 2,)", "f(a, [1, 2, 3], if c then 1 else 2)"),
    ("max()+len([])", "max() + len([])"),
    ("true and not false", "true and not false"),
]


@pytest.mark.parametrize(("source", "expected"), PRECEDENCE)
def test_precedence(source: str, expected: str) -> None:
    out = fmt(f"pipeline p {{ let x = {source} }}")
    assert out == f"pipeline p {{\n    let x = {expected}\n}}\n"
    assert parse_text(out) == parse_text(f"pipeline p {{ let x = {source} }}")
    assert fmt(out) == out


def _num(value: Fraction | int, text: str = "") -> ast.Num:
    return ast.Num(Fraction(value), text)


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (_num(5), "5"),
        (_num(Fraction(29, 40)), "0.725"),
        (_num(Fraction(1, 8)), "0.125"),
        (_num(Fraction(-5, 2)), "-2.5"),
        (_num(Fraction(1, 3)), "(1 / 3)"),
        (_num(1000, "1_000"), "1_000"),
        (_num(3, "1_000"), "3"),  # a stale spelling is not trusted
        (ast.Binary("**", _num(-2), _num(2)), "(-2) ** 2"),
        (ast.Unary("-", _num(-2)), "- -2"),
        (ast.Binary("*", _num(Fraction(2, 3)), ast.Name("x")), "(2 / 3) * x"),
        (
            ast.Binary("==", ast.Binary("%", ast.Name("frames"), _num(4)), _num(1)),
            "frames % 4 == 1",
        ),
        (ast.Binary(">=", ast.Name("steps"), _num(1)), "steps >= 1"),
        (ast.Inf(), "inf"),
    ],
)
def test_format_expr(node: ast.Expr, expected: str) -> None:
    assert format_expr(node) == expected


def test_format_expr_rejects_unknown_nodes() -> None:
    with pytest.raises(TypeError):
        format_expr(ast.Binary("^", ast.Name("a"), ast.Name("b")))


def test_format_module_without_spans() -> None:
    module = ast.Module(
        (
            ast.Pipeline(
                "p",
                None,
                (
                    ast.Param("steps", "int", _num(40), _num(1), _num(1000)),
                    ast.Let("t", ast.Binary("*", ast.Name("steps"), _num(Fraction(1, 2)))),
                    ast.Stage("S", (ast.Field("iterations", "=", ast.Name("steps")),)),
                ),
            ),
        )
    )
    assert format_module(module) == (
        "pipeline p {\n"
        "    param steps: int = 40 in [1, 1000]\n"
        "    let t = steps * 0.5\n"
        "    stage S { iterations = steps }\n"
        "}\n"
    )


def test_deep_nesting_round_trips_within_the_parser_limits() -> None:
    deep = "a - a"
    for _ in range(45):
        deep = f"a - ({deep})"  # every group is needed, so the output nests as deep
    out = assert_canonical(f"pipeline p {{ let x = {deep} }}")
    assert out == f"pipeline p {{\n    let x = {deep}\n}}\n"
    minus = "-" * 90 + "x"
    assert assert_canonical(f"pipeline p {{ let x = {minus} }}").count("(") == 0


def test_stale_number_spelling_is_not_trusted() -> None:
    assert format_expr(_num(100000, "1e5")) == "100000"


def test_syntax_error_raises_compile_error() -> None:
    with pytest.raises(CompileError):
        fmt("pipeline p { let x = }")


# --- comments --------------------------------------------------------------------------------

COMMENTED = """\
# file header


pipeline p { # about p
  # before x


  let x = (1 + # inside x
  # own line inside x
   2)  # after x

  stage S {
  iterations = 1 # after iterations
 }
 stage T {  # about T
  # before memory
  memory ~ x


  # before T closes
 }  # after T
 stage U {
   iterations = 2 }  # after U


 # before p closes
} # after p
# before q
pipeline q extends p {}


# tail 1

# tail 2
"""

COMMENTED_FORMATTED = """\
# file header

pipeline p {  # about p
    # before x

    # inside x
    # own line inside x
    let x = 1 + 2  # after x

    stage S {
        iterations = 1  # after iterations
    }
    stage T {  # about T
        # before memory
        memory ~ x

        # before T closes
    }  # after T
    stage U { iterations = 2 }  # after U

    # before p closes
}  # after p

# before q
pipeline q extends p {}

# tail 1

# tail 2
"""


def test_comments_golden() -> None:
    assert assert_canonical(COMMENTED) == COMMENTED_FORMATTED


def test_comment_with_unicode_line_separator_is_kept_whole() -> None:
    source = "pipeline p {\n    let x = 1  # a\u2028b\x85c\n    let y = 2  # y\n}\n"
    assert fmt(source) == source


WAN = """\
# formulas/wan2_2.wf — Wan 2.2 text/image-to-video (VAE: 4x temporal, 8x spatial, 2x2 patches)
pipeline wan2_2_t2v_a14b {
    param steps:  int  = 40   in [1, 1000]
    param frames: int  = 81   in [1, 1021] where frames % 4 == 1
    param height: int  = 720  in [16, 4096] where height % 16 == 0
    param width:  int  = 1280 in [16, 4096] where width % 16 == 0
    param cfg:    bool = true

    let latent_frames = (frames - 1) // 4 + 1
    let tokens = latent_frames * (height // 16) * (width // 16)

    stage TextEncodingStage { iterations = 1 }
    stage DenoisingStage {
        iterations = steps
        memory ~ tokens
        time ~ tokens * (if cfg then 2 else 1)
    }
    stage DecodingStage {
        memory ~ latent_frames * height * width
        time ~ latent_frames * height * width
    }
}

pipeline wan2_2_i2v_a14b extends wan2_2_t2v_a14b {
    stage ImageEncodingStage { iterations = 1 }
}

# A distilled (DMD) variant: a fixed 4-step schedule, whatever `steps` says.
pipeline wan2_1_t2v_dmd extends wan2_2_t2v_a14b {
    param steps = 4
    let schedule = [1000, 750, 500, 250]
    stage DenoisingStage { iterations = len(schedule) }
}

# MiniMax-H3 runs one denoiser call fewer than its step count.
pipeline minimax_h3 {
    param steps: int = 50 in [1, 1000]
    stage DenoisingStage { iterations = steps - 1 }
}
"""


def test_wan_example_round_trips() -> None:
    out = assert_canonical(WAN)
    # Only the column alignment of the params changes.
    assert out == WAN.replace("steps:  int  = 40   in", "steps: int = 40 in").replace(
        "frames: int  = 81   in", "frames: int = 81 in"
    ).replace("height: int  = 720  in", "height: int = 720 in").replace(
        "width:  int  = 1280 in", "width: int = 1280 in"
    ).replace("cfg:    bool = true", "cfg: bool = true")


# --- properties ------------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "steps", "frames", "x_1"])
DECIMALS = st.builds(
    lambda n, places: Fraction(n, 10**places), st.integers(0, 10**6), st.integers(1, 4)
)


def _spelled_int(n: int) -> st.SearchStrategy[ast.Num]:
    plain = str(n)
    grouped = f"{n:_}"
    return st.sampled_from(
        [ast.Num(Fraction(n)), ast.Num(Fraction(n), plain), ast.Num(Fraction(n), grouped)]
    )


LEAVES = st.one_of(
    NAMES.map(ast.Name),
    st.integers(0, 10**9).flatmap(_spelled_int),
    DECIMALS.map(ast.Num),
    st.booleans().map(ast.Bool),
    st.just(ast.Inf()),
)
BINARY_OPS = st.sampled_from(sorted(ast.ARITHMETIC | ast.COMPARISONS | ast.LOGIC))


def _extend(children: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
    return st.one_of(
        st.builds(ast.Unary, st.sampled_from(["-", "not"]), children),
        st.builds(ast.Binary, BINARY_OPS, children, children),
        st.builds(ast.IfElse, children, children, children),
        st.builds(
            ast.Call, st.sampled_from(ast.FUNCTIONS), st.lists(children, max_size=3).map(tuple)
        ),
        st.builds(ast.ListLit, st.lists(children, max_size=3).map(tuple)),
    )


EXPRESSIONS = st.recursive(LEAVES, _extend, max_leaves=16)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EXPRESSIONS)
def test_expression_round_trip(expr: ast.Expr) -> None:
    source = f"pipeline p {{ let x = {format_expr(expr)} }}"
    parsed = parse_text(source).pipelines[0].members[0]
    assert isinstance(parsed, ast.Let) and parsed.value == expr
    out = fmt(source)
    assert fmt(out) == out
    again = parse_text(out).pipelines[0].members[0]
    assert isinstance(again, ast.Let) and again.value == expr


# Random files: members, stages and pipelines joined by every kind of separator, blank line
# and comment, including comments inside multi-line expressions and stage blocks.
MEMBERS = [
    "param steps: int = 40 in [1, 1000]",
    "param frames: int = 81 in [1, 1021] where frames % 4 == 1",
    "param steps = 4",
    "param cfg: bool = true",
    "let t = (steps +{c}\n  1) * 2",
    "let s = [1000,{c}\n 750]",
    "let u = steps",
]
FIELDS = ["iterations = steps", "memory ~ (t *{c}\n t)", "time ~ 1"]


@st.composite
def separators(draw: st.DrawFn, counter: list[int]) -> str:
    def comment() -> str:
        counter[0] += 1
        return f"# c{counter[0]}"

    kind = draw(st.sampled_from(["nl", "nls", "semi", "trail", "own", "block"]))
    if kind == "nl":
        return "\n"
    if kind == "nls":
        return "\n" * draw(st.integers(2, 4))
    if kind == "semi":
        return draw(st.sampled_from(["; ", " ;\n", ";\n\n"]))
    if kind == "trail":
        return f"  {comment()}\n"
    if kind == "own":
        return f"\n{comment()}\n"
    return f"\n\n{comment()}\n\n{comment()}\n\n"


@st.composite
def files(draw: st.DrawFn) -> str:
    counter = [0]

    def sep() -> str:
        return draw(separators(counter))

    def inner() -> str:
        if draw(st.booleans()):
            counter[0] += 1
            return f" # i{counter[0]}"
        return ""

    def block(items: list[str]) -> str:
        text = "{" + draw(st.sampled_from(["", " ", "\n", "  # h\n"]))
        for index, item in enumerate(items):
            text += (sep() if index else "") + item
        return text + draw(st.sampled_from(["", "\n", sep()])) + "}"

    out = draw(st.sampled_from(["", "# header\n\n", "\n"]))
    for index in range(draw(st.integers(0, 3))):
        members: list[str] = []
        for _ in range(draw(st.integers(0, 4))):
            if draw(st.integers(0, 3)) == 0:
                fields = draw(st.lists(st.sampled_from(FIELDS), max_size=3))
                fields = [f.format(c=inner()) for f in fields]
                members.append(f"stage S{len(members)} " + block(fields))
            else:
                members.append(draw(st.sampled_from(MEMBERS)).format(c=inner()))
        parent = " extends p0" if index and draw(st.booleans()) else ""
        out += f"pipeline p{index}{parent} " + block(members) + sep()
    return out + draw(st.sampled_from(["", "# tail\n", "\n\n# tail\n"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files())
def test_file_round_trip(source: str) -> None:
    assert_canonical(source)
    assert assert_canonical(source.replace("\n", "\r\n")) == fmt(source)
