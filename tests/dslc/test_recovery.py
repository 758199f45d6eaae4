"""Error recovery: independent errors of one file all reported in one run, within a fixed budget."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dslc import parse as parse_module
from dslc.compiler import compile_text
from dslc.diagnostics import CompileError
from dslc.recover import MAX_SYNTAX_ERRORS, RECOVERY_TOKENS, blank, recover, scan
from dslc.source import SourceFile

# One line per member or field; each has a broken spelling with a syntax error of its own.
LINES = [
    ("pipeline a {", None),
    ("    param steps: int = 40 in [1, 1000]", "    param steps int = 40 in [1, 1000]"),
    ("    param frames: int = 81 in [1, 1000]", "    param frames: int = 81 in [1, 1000] where"),
    ("    let scale = 2 ** 3", "    let scale = 2 ^ 3"),
    ("    stage S {", None),
    ("        iterations = steps", "        iterations = steps &&& 1"),
    ("        memory ~ frames * scale", "        memory ~ frames * * scale"),
    ("    }", None),
    ("    stage T { time ~ steps + 1 }", "    stage T { time ~ steps + }"),
    ("}", None),
    ("pipeline b {", None),
    ("    param n: int = 2 in [1, 10]", "    param n: int = 2 in [1 10]"),
    ("    let y = n + 1", "    let y = n < 2 < 3"),
    ("    stage U { iterations = y }", "    stage U { iterations = (y }"),
    ("}", None),
]
BREAKABLE = [i for i, (_, broken) in enumerate(LINES) if broken is not None]


def error_lines(text: str) -> list[int]:
    result = compile_text(text, "r.wf")
    assert result.program is None
    return sorted(d.span.line for d in result.errors if d.span is not None)


def test_the_unbroken_file_compiles() -> None:
    assert compile_text("\n".join(good for good, _ in LINES) + "\n").ok


@settings(max_examples=40, deadline=None)
@given(st.sets(st.sampled_from(BREAKABLE), min_size=1))
def test_every_independent_syntax_error_is_reported_at_its_line(broken: set[int]) -> None:
    text = "\n".join(bad if i in broken and bad else good for i, (good, bad) in enumerate(LINES))
    assert error_lines(text + "\n") == sorted(i + 1 for i in broken)


def test_an_unclosed_stage_is_named_at_its_brace_with_where_the_parser_gave_up() -> None:
    text = (
        "pipeline a {\n"
        "    stage TextEncodingStage {\n"
        "        iterations = 1\n"
        "    stage DecodingStage { iterations = 2 }\n"
        "    let x = 2 ^ 3\n"
        "}\n"
    )
    first, second = compile_text(text).errors
    assert first.message == "unclosed '{' of stage 'TextEncodingStage'"
    assert first.span is not None and (first.span.line, first.span.column) == (2, 29)
    (note,) = first.notes
    assert note.message == "the parser gave up here"
    assert note.span is not None and note.span.line == 4
    assert "'}'" in first.hints[0]
    assert second.message == "unexpected character '^'"  # recovery goes on after the brace


def test_scan_finds_blocks_statements_and_where_an_unclosed_stage_ends() -> None:
    text = "pipeline p {\n  stage S {\n    iterations = 1\n  param q: int = 1\n}\n"
    found = scan(text)
    pipeline, stage = found.blocks
    assert (pipeline.kind, pipeline.name, pipeline.closed) == ("pipeline", "p", text.rindex("}"))
    assert (stage.kind, stage.name, stage.closed) == ("stage", "S", None)
    assert stage.ended == text.index("param")
    assert [text[s.start : s.end] for s in found.statements] == [
        "pipeline p ",
        "stage S ",
        "iterations = 1",
        "param q: int = 1",
    ]


@given(st.text(alphabet="ab{}()\n;# ", max_size=60))
def test_scan_accepts_any_text_and_blank_keeps_every_position(text: str) -> None:
    found = scan(text)
    for block in found.blocks:
        assert 0 <= block.start <= block.opened < len(text) and block.ended <= len(text)
    blanked = blank(text, 0, len(text))
    assert len(blanked) == len(text) and blanked.count("\n") == text.count("\n")


def test_a_bracket_left_open_stops_at_the_next_member() -> None:
    text = (
        "pipeline a {\n"
        "    param frames: int = 81 in [1, 1000\n"
        "    stage S { iterations = 1 + }\n"
        "}\n"
    )
    assert error_lines(text) == [3, 3]  # the 'stage' the parser stopped at, then the stage's own


def test_recovery_is_bounded_in_errors_and_reparsed_tokens() -> None:
    line = "    let x = 2 ^ 3\n"
    text = "pipeline a {\n" + line * 3 * MAX_SYNTAX_ERRORS + "}\n"
    source = SourceFile("many.wf", text)
    tokens = parse_module._count_tokens(text)
    calls = []
    real = parse_module._reparser(source)

    def counting(repaired: str):
        calls.append(len(repaired))
        return real(repaired)

    try:
        parse_module.parse(source)
    except CompileError as exc:
        first = exc.diagnostics[0]
    offset = text.index("^")
    problems = recover(source, first, offset, counting, tokens)
    assert len(problems) == MAX_SYNTAX_ERRORS
    assert len(calls) * tokens <= RECOVERY_TOKENS
    big = recover(source, first, offset, counting, RECOVERY_TOKENS // 2)
    assert len(big) <= 3  # a large file gets fewer re-parses


def test_an_undefined_name_does_not_hide_errors_of_other_fields_and_stages() -> None:
    text = (
        "pipeline a {\n"
        "    param steps: int = 4 in [1, 100]\n"
        "    stage S { iterations = stpes\n"
        "              memory ~ steps - 5 }\n"
        "    stage T { time ~ steps / (steps - 4) }\n"
        "}\n"
    )
    codes = sorted((d.span.line, d.code) for d in compile_text(text).errors if d.span)
    assert codes == [
        (3, "undefined-name"),
        (4, "negative"),
        (5, "division-by-zero"),
        (5, "negative"),
    ]


def test_a_let_error_sets_aside_the_let_and_its_readers_only() -> None:
    text = (
        "pipeline a {\n"
        "    param steps: int = 4 in [1, 100]\n"
        "    let broken = stpes + 1\n"
        "    let twice = broken * 2\n"
        "    stage S { iterations = twice - 100 }\n"  # reads the broken let: its error is the let's
        "    stage T { iterations = steps - 5 }\n"  # reads no broken let: still proved
        "    call num_inference_steps = broken - 1000\n"
        "}\n"
    )
    codes = [(d.span.line, d.code) for d in compile_text(text).errors if d.span]
    assert codes == [(3, "undefined-name"), (6, "negative")]


def test_an_error_in_a_param_or_a_contract_still_stops_the_prover() -> None:
    for param in (
        "param steps: int = 4 in [1, 100] where stpes % 2 == 0",  # a name error in a contract
        "param steps: int = 4 in [1, 100] where steps + 1",  # a contract that is not a boolean
        "param steps: int = 400 in [1, 100]",  # a default outside the range
    ):
        text = f"pipeline a {{\n    {param}\n    stage T {{ iterations = steps - 5 }}\n}}\n"
        codes = [d.code for d in compile_text(text).errors]
        assert len(codes) == 1 and codes != ["negative"], (param, codes)


def test_a_brace_that_closes_nothing_says_so() -> None:
    text = "pipeline a {\n    stage S { iterations = 1 } }\n}\n"
    (problem,) = compile_text(text).errors
    assert problem.span is not None and problem.span.line == 3
    assert problem.hints == ("this '}' closes no block: remove it",)


def test_recovery_covers_calls_probes_and_stage_facts() -> None:
    text = (
        "pipeline a {\n"
        "    param steps: int = 4 in [1, 100]\n"
        "    call num_inference_steps =\n"
        "    probe steps,\n"
        "    stage S uses transformer. per step { iterations = steps }\n"
        "    stage T uses vae {\n"
        "        iterations = 1\n"
        "    stage U { iterations = steps + }\n"
        "}\n"
    )
    found = [(d.span.line, d.message.split(";")[0]) for d in compile_text(text).errors if d.span]
    assert found == [
        (3, "unexpected end of line"),
        (4, "unexpected end of line"),
        (5, "unexpected 'step'"),
        (6, "unclosed '{' of stage 'T'"),
        (8, "unexpected '}'"),
    ]


def test_a_flood_of_open_braces_is_repaired_in_one_pass() -> None:
    # bench/fuzz.py found it (seed 0, source 10523): 5,000 '{' in one formula opened 5,000 blocks,
    # each reported and blanked out of the whole text in turn (2.5 s); now at most
    # MAX_SYNTAX_ERRORS of them are reported and all are blanked in one pass.
    from tests.budget import within_linear_budget

    text = (
        "pipeline p {\n    param x: int = 1 in [1, 9]\n    stage S { iterations = max(0,"
        + ("{" * 5000)
        + "\n}\n"
    )
    compile_text("pipeline warm { let x = 1 }", "warm.wf")
    result = within_linear_budget(lambda: compile_text(text, "flood.wf"), len(text))
    codes = [d.code for d in result.diagnostics]
    assert codes and set(codes) == {"syntax"} and len(codes) <= MAX_SYNTAX_ERRORS
    assert any("unclosed '{'" in d.message for d in result.diagnostics)


@given(
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=8), st.text(max_size=40)
)
def test_blank_all_is_blank_applied_range_by_range(
    ranges: list[tuple[int, int]], text: str
) -> None:
    from dslc.recover import blank_all

    ranges = [(min(a, b), max(a, b)) for a, b in ranges]  # blank's ranges run forwards
    expected = text
    for start, end in ranges:
        expected = blank(expected, start, end)
    assert blank_all(text, ranges) == expected
