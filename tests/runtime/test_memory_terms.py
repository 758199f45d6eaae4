"""A memory measure with several terms (`memory ~ [t1, t2, ...]`): loading, `memory_terms`,
errors.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest

from artifact.document import MAX_DEPTH, MAX_MEMORY_TERMS
from runtime import (
    ArtifactError,
    EvaluationError,
    FormulaError,
    InadmissibleError,
    Pipeline,
    load_formulas,
)

from .builders import (
    SPAN,
    B,
    F,
    I,
    L,
    P,
    left_sum,
    let,
    op,
    stage,
)
from .video_formulas import AREA, NOT_FOUR, RISKY_TERMS, load, video

VOLUME = op("mul", P("frames"), AREA)
THIRD = op("div", P("height"), I(3))  # a rational term


@pytest.fixture(scope="module")
def p() -> Pipeline:
    """Decode: [area, frames*area]; Mix: [area, frames*area, height/3]; Encode: area; Idle: none."""
    return load(
        video(
            stage("Decode", memory_terms=[AREA, VOLUME]),
            stage("Mix", memory_terms=[AREA, VOLUME, THIRD]),
            stage("Encode", memory=AREA),
            stage("Idle"),
        )
    )


# ---------------------------------------------------------------- values


def test_two_terms_and_their_sum_at_the_defaults(p: Pipeline) -> None:
    assert p.memory_terms("Decode") == (20, 180)
    assert p.memory("Decode") == 200
    assert all(type(v) is int for v in p.memory_terms("Decode"))


def test_three_terms_are_exact_ints_and_fractions(p: Pipeline) -> None:
    terms = p.memory_terms("Mix")
    assert terms == (20, 180, Fraction(4, 3))
    assert [type(v) for v in terms] == [int, int, Fraction]
    assert p.memory("Mix") == Fraction(604, 3) == sum(terms)


def test_overrides_and_defaults(p: Pipeline) -> None:
    assert p.memory_terms("Decode", frames=2) == (20, 40)
    assert p.memory_terms("Mix", height=6, width=1) == (6, 54, 2)
    assert type(p.memory_terms("Mix", height=6)[2]) is int  # an integral Fraction is an int
    assert p.memory("Mix", height=6, width=1) == 62
    for point in ({}, {"frames": 1}, {"height": 0}, {"height": 7, "width": 3, "frames": 1000}):
        assert sum(p.memory_terms("Mix", **point)) == p.memory("Mix", **point)
        assert sum(p.memory_terms("Decode", **point)) == p.memory("Decode", **point)


def test_a_single_term_memory_is_a_one_tuple(p: Pipeline) -> None:
    assert p.memory_terms("Encode") == (20,)
    assert p.memory_terms("Encode", width=7) == (28,)
    assert p.memory_terms("Idle") == (1,)  # memory left out: its default, 1


def test_evaluate_keeps_three_values(p: Pipeline) -> None:
    values = p.evaluate(frames=2)["Decode"]
    assert (values.iterations, values.memory, values.time) == (1, 40 + 20, 1)


def test_terms_may_use_lets_and_have_null_spans() -> None:
    doc = video(
        stage("S", memory_terms=[L("area"), op("mul", L("area"), F(1, 2))]),
        lets=[let("area", AREA)],
    )
    doc["pipelines"][0]["stages"][0]["memory"]["terms"][1]["span"] = None
    pipeline_ = load(doc)
    assert pipeline_.memory_terms("S", height=3) == (15, Fraction(15, 2))
    assert pipeline_.memory("S", height=3) == Fraction(45, 2)


def test_the_generated_source_shows_one_closure_per_term(p: Pipeline) -> None:
    assert "def s1t2(" in p.source and "def s0t1(" in p.source and "def s2t0(" not in p.source


def test_as_many_terms_as_allowed_load() -> None:
    terms = [op("mul", I(k + 1), P("width")) for k in range(MAX_MEMORY_TERMS)]
    pipeline_ = load(video(stage("S", memory_terms=terms)))
    assert pipeline_.memory_terms("S") == tuple(5 * (k + 1) for k in range(MAX_MEMORY_TERMS))
    assert pipeline_.memory("S") == 5 * MAX_MEMORY_TERMS * (MAX_MEMORY_TERMS + 1) // 2


def test_the_deepest_terms_compare_without_recursion() -> None:
    # The sum is MAX_DEPTH deep: each term is MAX_DEPTH - 1 deep.
    def deep(leaf: dict[str, Any]) -> dict[str, Any]:
        node = leaf
        for _ in range(MAX_DEPTH - 2):
            node = op("abs", node)
        return node

    pipeline_ = load(video(stage("S", memory_terms=[deep(P("width")), deep(P("height"))])))
    assert pipeline_.memory_terms("S", width=8) == (8, 4)


# ---------------------------------------------------------------- the loader refuses


def with_terms(edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """A one-stage document with `memory ~ [area, frames*area, height/3]`, then `edit(stage)`."""
    doc = video(stage("S", memory_terms=[AREA, VOLUME, THIRD]))
    edit(doc["pipelines"][0]["stages"][0])
    return doc


def set_terms(exprs: list[Any], fix_sum: bool = True) -> Callable[[dict[str, Any]], None]:
    def edit(st: dict[str, Any]) -> None:
        st["memory"]["terms"] = [{"expr": e, "span": SPAN} for e in exprs]
        if fix_sum:
            st["memory"]["expr"] = left_sum(exprs)

    return edit


def terms_with_sum(exprs: list[Any], total: Any) -> Callable[[dict[str, Any]], None]:
    def edit(st: dict[str, Any]) -> None:
        set_terms(exprs, fix_sum=False)(st)
        st["memory"]["expr"] = total

    return edit


def set_sum(expr: Any) -> Callable[[dict[str, Any]], None]:
    def edit(st: dict[str, Any]) -> None:
        st["memory"]["expr"] = expr

    return edit


def edit_term(j: int, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(st: dict[str, Any]) -> None:
        st["memory"]["terms"][j][key] = value

    return edit


def move_terms(field: str) -> Callable[[dict[str, Any]], None]:
    def edit(st: dict[str, Any]) -> None:
        st[field] = copy.deepcopy(st["memory"])
        del st["memory"]["terms"]
        st["memory"]["expr"] = I(1)

    return edit


def replace_terms(value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(st: dict[str, Any]) -> None:
        st["memory"]["terms"] = value

    return edit


def replace_term(j: int, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(st: dict[str, Any]) -> None:
        st["memory"]["terms"][j] = value

    return edit


AT = "pipelines[0].stages[0]"
SUM_MESSAGE = "memory.expr must be the sum of memory.terms"
REFUSED = [
    ("one term", set_terms([AREA]), f"{AT}.memory.terms", "expected 2 to 16 terms, got 1"),
    ("no terms", replace_terms([]), f"{AT}.memory.terms", "expected 2 to 16 terms, got 0"),
    (
        "seventeen terms",
        set_terms([op("mul", I(k + 1), P("width")) for k in range(17)]),
        f"{AT}.memory.terms",
        "expected 2 to 16 terms, got 17",
    ),
    (
        "terms not a list",
        replace_terms({"expr": AREA}),
        f"{AT}.memory.terms",
        "expected a list, got an object",
    ),
    ("terms null", replace_terms(None), f"{AT}.memory.terms", "expected a list, got null"),
    (
        "a boolean term",
        set_terms([AREA, op("lt", P("height"), I(2))], fix_sum=False),
        f"{AT}.memory.terms[1].expr",
        "a memory term must be a number, not a boolean",
    ),
    (
        "a boolean literal term",
        set_terms([B(True), AREA], fix_sum=False),
        f"{AT}.memory.terms[0].expr",
        "a memory term must be a number, not a boolean",
    ),
    (
        "a non-object term",
        replace_term(0, 3),
        f"{AT}.memory.terms[0]",
        "expected an object, got an integer 3",
    ),
    (
        "a bare expression as a term",
        replace_term(2, THIRD),
        f"{AT}.memory.terms[2]",
        "missing key 'expr'",
    ),
    (
        "an unknown key in a term",
        edit_term(1, "note", "x"),
        f"{AT}.memory.terms[1]",
        "unexpected key 'note'",
    ),
    (
        "a term without a span",
        lambda st: st["memory"]["terms"][1].pop("span"),
        f"{AT}.memory.terms[1]",
        "missing key 'span'",
    ),
    (
        "a bad span in a term",
        edit_term(2, "span", {**SPAN, "source": 3}),
        f"{AT}.memory.terms[2].span.source",
        "source index 3 but only 1 sources",
    ),
    (
        "an unknown node kind in a term",
        edit_term(1, "expr", {"k": "exec", "args": []}),
        f"{AT}.memory.terms[1].expr.k",
        "unknown node kind 'exec'",
    ),
    (
        "an unknown param in a term",
        edit_term(0, "expr", P("depth")),
        f"{AT}.memory.terms[0].expr.name",
        "unknown param 'depth'",
    ),
    ("terms on iterations", move_terms("iterations"), f"{AT}.iterations", "unexpected key 'terms'"),
    (
        "the right fold",
        set_sum(op("add", AREA, op("add", VOLUME, THIRD))),
        f"{AT}.memory.expr",
        SUM_MESSAGE,
    ),
    (
        "another order",
        set_sum(op("add", op("add", VOLUME, AREA), THIRD)),
        f"{AT}.memory.expr",
        SUM_MESSAGE,
    ),
    ("a missing term", set_sum(op("add", AREA, VOLUME)), f"{AT}.memory.expr", SUM_MESSAGE),
    (
        "another operation",
        set_sum(op("add", op("mul", AREA, VOLUME), THIRD)),
        f"{AT}.memory.expr",
        SUM_MESSAGE,
    ),
    (
        "an equal value, another tree",
        set_sum(left_sum([AREA, VOLUME, op("div", op("mul", I(2), P("height")), I(6))])),
        f"{AT}.memory.expr",
        SUM_MESSAGE,
    ),
    (
        "another leaf",
        set_sum(left_sum([AREA, VOLUME, op("div", P("width"), I(3))])),
        f"{AT}.memory.expr",
        SUM_MESSAGE,
    ),
    (
        "another constant",
        set_sum(left_sum([AREA, VOLUME, op("div", P("height"), I(4))])),
        f"{AT}.memory.expr",
        SUM_MESSAGE,
    ),
    (
        "a plus zero",
        set_sum(op("add", left_sum([AREA, VOLUME, THIRD]), I(0))),
        f"{AT}.memory.expr",
        SUM_MESSAGE,
    ),
    ("a single term as the sum", set_sum(AREA), f"{AT}.memory.expr", SUM_MESSAGE),
    (
        "another exponent",
        terms_with_sum(
            [op("pow", P("height"), exp=2), AREA], op("add", op("pow", P("height"), exp=3), AREA)
        ),
        f"{AT}.memory.expr",
        SUM_MESSAGE,
    ),
]


@pytest.mark.parametrize(
    ("edit", "path", "message"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_the_loader_refuses_malformed_terms(
    edit: Callable[[dict[str, Any]], None], path: str, message: str
) -> None:
    doc = with_terms(edit)
    with pytest.raises(ArtifactError) as info:
        load_formulas(doc)
    assert isinstance(info.value, FormulaError) and isinstance(info.value, ValueError)
    assert (info.value.path, info.value.problem[: len(message)]) == (path, message)
    assert str(info.value).startswith(f"invalid workload-formulas artifact: at {path}: {message}")


def test_the_untouched_document_loads() -> None:  # so each refusal above is the edit's doing
    assert load(with_terms(lambda st: None)).memory_terms("S") == (20, 180, Fraction(4, 3))


def test_the_sum_message_names_the_rule() -> None:
    with pytest.raises(ArtifactError) as info:
        load_formulas(with_terms(set_sum(op("add", AREA, op("add", VOLUME, THIRD)))))
    assert info.value.problem == (
        "memory.expr must be the sum of memory.terms (add(add(t1, t2), t3)..., in order)"
    )


def test_a_term_invalid_at_the_default_workload_is_refused() -> None:
    negative = op("sub", P("height"), I(10))  # -6 at the defaults
    doc = video(stage("S", memory_terms=[AREA, negative]))
    with pytest.raises(ArtifactError) as info:
        load_formulas(doc)
    assert info.value.path == f"{AT}.memory.terms[1].expr"
    assert info.value.problem == "at the default workload this is -6, which is invalid"
    doc = video(stage("S", memory_terms=[op("div", I(1), op("sub", P("height"), I(4))), AREA]))
    with pytest.raises(ArtifactError) as info:
        load_formulas(doc)
    assert info.value.path == f"{AT}.memory.expr"  # the sum divides by zero first
    assert (
        info.value.problem == "at the default workload this is division by zero, which is invalid"
    )


def test_a_negative_term_whose_sum_is_positive_is_refused_at_the_defaults() -> None:
    doc = video(stage("S", memory_terms=[AREA, op("neg", P("height"))]))  # 20 + (-4) = 16
    with pytest.raises(ArtifactError) as info:
        load_formulas(doc)
    assert info.value.path == f"{AT}.memory.terms[1].expr"


# ---------------------------------------------------------------- evaluation errors


@pytest.fixture(scope="module")
def risky() -> Pipeline:
    """memory ~ [area, 100 / (height - 2), width - 3]: divides by zero at height 2, negative below
    width 3; the contract `width % 5 != 4` makes width 4 inadmissible."""
    return load(video(stage("S", memory_terms=RISKY_TERMS), contracts=[NOT_FOUR]))


def test_a_negative_term_is_an_evaluation_error(risky: Pipeline) -> None:
    assert risky.memory_terms("S") == (20, 50, 2)
    with pytest.raises(EvaluationError) as info:
        risky.memory_terms("S", width=1)
    assert isinstance(info.value, ArithmeticError)
    assert (info.value.pipeline, info.value.what) == ("video", "S.memory[2]")
    assert str(info.value) == (
        "video.S.memory[2] is -2, not non-negative, at frames = 9, height = 4, width = 1"
    )
    assert risky.memory("S", width=1) == 4 + 50 - 2  # the sum alone is non-negative


def test_a_division_by_zero_names_the_term(risky: Pipeline) -> None:
    with pytest.raises(EvaluationError) as info:
        risky.memory_terms("S", height=2)
    assert info.value.what == "S.memory[1]"
    assert str(info.value) == (
        "division by zero evaluating video.S.memory[1] at frames = 9, height = 2, width = 5"
    )
    with pytest.raises(EvaluationError) as info:
        risky.memory("S", height=2)
    assert info.value.what == "S.memory"


def outcome(call: Callable[[], Any]) -> tuple[type, str, tuple[Any, ...]]:
    try:
        call()
    except FormulaError as exc:
        attrs = tuple(
            getattr(exc, a, None) for a in ("pipeline", "param", "violations", "stage", "known")
        )
        return type(exc), str(exc), attrs
    raise AssertionError("expected an error")


@pytest.mark.parametrize(
    ("stage_name", "point"),
    [
        ("S", {"width": 4}),  # violates the contract
        ("S", {"height": -1, "width": 4}),  # out of range and violates the contract
        ("S", {"frames": 0}),
        ("S", {"widht": 5}),
        ("S", {"width": True}),
        ("S", {"width": 5.0}),
        ("Z", {}),
        ("s", {"width": 4}),
    ],
)
def test_request_errors_are_those_of_memory(
    risky: Pipeline, stage_name: str, point: dict[str, Any]
) -> None:
    got = outcome(lambda: risky.memory_terms(stage_name, **point))
    assert got == outcome(lambda: risky.memory(stage_name, **point))
    assert got == outcome(lambda: Pipeline.memory(risky, stage_name, **point))


def test_an_inadmissible_point_is_inadmissible(risky: Pipeline) -> None:
    with pytest.raises(InadmissibleError, match="width = 4 violates `width % 5 != 4`"):
        risky.memory_terms("S", width=4)


def test_params_are_keyword_only(risky: Pipeline) -> None:
    with pytest.raises(TypeError):
        risky.memory_terms("S", 4)  # type: ignore[call-arg]


# ---------------------------------------------------------------- from source text


def test_compiled_terms_load_end_to_end() -> None:
    from dslc.build import load_program
    from dslc.compiler import compile_text
    from dslc.limits import MAX_MEASURE_TERMS

    assert MAX_MEASURE_TERMS == MAX_MEMORY_TERMS  # what the compiler allows, the loader accepts
    text = """
pipeline v {
    param area: int = 400 in [1, 100000]
    param frames: int = 9 in [1, 1000] where frames % 2 == 1
    let half = area / 2
    stage D { memory ~ [area] }
    stage E { memory ~ [half, frames * half, 3] }
}
pipeline w extends v {
    stage D { memory ~ [area, frames] }
}
"""
    result = compile_text(text, "v.wf")
    assert result.ok and result.program is not None, [d.message for d in result.diagnostics]
    book = load_program(result.program)
    v, w = book["v"], book["w"]
    assert v.memory_terms("D") == (400,)
    assert v.memory_terms("E") == (200, 1800, 3) and v.memory("E") == 2003
    assert w.memory_terms("D", frames=5) == (400, 5) and w.memory("D", frames=5) == 405
    assert w.memory_terms("E", area=3) == (Fraction(3, 2), Fraction(27, 2), 3)
    with pytest.raises(InadmissibleError, match="frames = 4 violates `frames % 2 == 1`"):
        w.memory_terms("D", frames=4)
