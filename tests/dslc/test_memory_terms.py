"""A memory measure of several terms (`memory ~ [a, b]`): types, limits, proofs, the artifact,
fmt.
"""

from __future__ import annotations

import json
import textwrap
from fractions import Fraction

import jsonschema
import pytest

from dslc import ast
from dslc.compiler import compile_text
from dslc.diagnostics import Diagnostic
from dslc.fmt import format_expr, format_source
from dslc.interp import Interpreter
from dslc.limits import MAX_MEASURE_TERMS
from dslc.model import ResolvedPipeline
from dslc.parse import parse_text
from dslc.passes.context import Context
from dslc.passes.obligations import DIVISOR, NONNEG, collect
from dslc.source import SourceFile
from dslc.to_sympy import LowerError, lower_field
from tests.dslc.documents import artifact
from tests.examples import ROOT

SCHEMA = json.loads((ROOT / "artifact" / "schema" / "artifact.schema.json").read_text())

VAE = """\
pipeline vae {
    param frames: int = 81 in [1, 1021] where frames % 4 == 1
    param height: int = 720 in [16, 4096] where height % 16 == 0
    param width: int = 1280 in [16, 4096] where width % 16 == 0
    let latent_frames = (frames - 1) // 4 + 1
    let parts = [height * width, latent_frames * height * width]
    stage DecodingStage {
        memory ~ [height * width, latent_frames * height * width]  # working set + output
        time ~ latent_frames * height * width
    }
    stage LetStage { memory ~ parts }
    stage OneStage { memory ~ [height * width] }
    stage PlainStage { memory ~ height * width }
}
"""


def diagnostics(body: str) -> list[Diagnostic]:
    """Every diagnostic of a one-pipeline file whose body is `body` (members from line 2 on)."""
    return list(compile_text("pipeline p {\n" + body + "\n}\n", "t.wf").diagnostics)


def where(d: Diagnostic) -> tuple[str, str, int, int, str]:
    """Code, message, line, column, and the source text under the caret."""
    span = d.span
    assert span is not None and span.line == span.end_line
    text = span.source.text.splitlines()[span.line - 1][span.column - 1 : span.end_column - 1]
    return d.code, d.message, span.line, span.column, text


def vae() -> ResolvedPipeline:
    result = compile_text(VAE, "vae.wf")
    assert result.ok and result.program is not None, [d.message for d in result.diagnostics]
    return result.program.pipelines[0]


def stage_json(stage: str, text: str = VAE) -> dict:
    result = compile_text(text, "vae.wf")
    assert result.program is not None, [d.message for d in result.diagnostics]
    doc = artifact(result.program)
    jsonschema.validate(doc, SCHEMA)
    return next(s for s in doc["pipelines"][0]["stages"] if s["name"] == stage)


# -- parsing and the resolved program -------------------------------------------------------------


def test_a_list_memory_parses_as_a_list_literal() -> None:
    (pipeline,) = parse_text("pipeline p { stage S { memory ~ [h, 2 * h] } }").pipelines
    stage = pipeline.members[0]
    assert isinstance(stage, ast.Stage)
    assert stage.fields[0].value == ast.ListLit(
        (ast.Name("h"), ast.Binary("*", ast.Num(Fraction(2)), ast.Name("h")))
    )


def test_terms_of_a_literal_a_list_let_one_item_and_a_plain_memory() -> None:
    pipeline = vae()
    text = {
        s.name: [format_expr(t) for t in pipeline.terms(s.fields["memory"])]
        for s in pipeline.stages
    }
    assert text == {
        "DecodingStage": ["height * width", "latent_frames * height * width"],
        "LetStage": ["height * width", "latent_frames * height * width"],
        "OneStage": ["height * width"],
        "PlainStage": ["height * width"],
    }
    time = pipeline.stages[0].fields["time"]
    assert pipeline.terms(time) == (time.value,)


def test_the_oracle_and_sympy_value_a_list_memory_as_the_sum_of_its_terms() -> None:
    pipeline = vae()
    point = {"frames": Fraction(5), "height": Fraction(16), "width": Fraction(32)}
    oracle = Interpreter(point, pipeline.lets)
    for stage in pipeline.stages:
        field = stage.fields["memory"]
        value = oracle.eval(pipeline.field_value(field))
        assert value == (16 * 32 + 2 * 16 * 32 if len(pipeline.terms(field)) > 1 else 16 * 32), (
            stage.name
        )
        assert value == sum(_number(oracle.eval(term)) for term in pipeline.terms(field))
        lowered = lower_field(pipeline, pipeline.field_value(field))
        assert lowered.subs({s: point[s.name] for s in lowered.free_symbols}) == value
    for whole in (
        pipeline.stages[0].fields["memory"].value,
        pipeline.stages[1].fields["memory"].value,
    ):
        with pytest.raises(
            LowerError
        ):  # a whole list is never one number: only its terms are lowered
            lower_field(pipeline, whole)


def _number(value: object) -> Fraction:
    assert isinstance(value, Fraction)
    return value


# -- types and limits -----------------------------------------------------------------------------


def test_a_list_memory_and_a_list_let_memory_compile_clean() -> None:
    assert compile_text(VAE, "vae.wf").diagnostics == ()


def test_the_example_of_docs_formulas_md_compiles_to_two_terms() -> None:
    block = (ROOT / "docs" / "formulas.md").read_text().split("```wf\n")[1].split("```")[0]
    stage = textwrap.indent(textwrap.dedent(block), "    ")
    text = VAE.split("    stage DecodingStage")[0] + stage + "}\n"
    memory = stage_json("DecodingStage", text)["memory"]
    assert len(memory["terms"]) == 2


def test_an_empty_list_is_a_type_error_at_the_list() -> None:
    (d,) = diagnostics("    stage S { memory ~ [] }")
    assert where(d) == ("type", "a memory measure needs at least one term", 2, 24, "[]")
    (d,) = diagnostics("    let parts = []\n    stage S { memory ~ parts }")
    assert where(d) == ("type", "a memory measure needs at least one term", 3, 24, "parts")


def test_more_than_sixteen_terms_is_a_limit_error() -> None:
    many = ", ".join(["h"] * (MAX_MEASURE_TERMS + 1))
    (d,) = diagnostics(f"    param h: int = 4\n    stage S {{ memory ~ [{many}] }}")
    assert where(d) == (
        "limit",
        "'memory' of stage 'S' has 17 terms; the limit is 16",
        3,
        24,
        f"[{many}]",
    )
    sixteen = ", ".join(["h"] * MAX_MEASURE_TERMS)
    assert diagnostics(f"    param h: int = 4\n    stage S {{ memory ~ [{sixteen}] }}") == []
    (d,) = diagnostics(
        f"    param h: int = 4\n    let parts = [{many}]\n    stage S {{ memory ~ parts }}"
    )
    assert where(d) == (
        "limit",
        "'memory' of stage 'S' has 17 terms; the limit is 16",
        4,
        24,
        "parts",
    )


def test_a_bool_term_is_a_type_error_at_the_term() -> None:
    (d,) = diagnostics("    param cfg: bool = true\n    stage S { memory ~ [1, cfg] }")
    assert where(d) == ("type", "term 2 of 'memory' must be a number, not a boolean", 3, 28, "cfg")
    (d,) = diagnostics("    stage S { memory ~ [1 > 0] }")
    assert where(d) == ("type", "'memory' must be a number, not a boolean", 2, 25, "1 > 0")


@pytest.mark.parametrize("field", ["iterations = [1, 2]", "iterations = parts"])
def test_only_a_measure_takes_a_list(field: str) -> None:
    (d,) = diagnostics(f"    let parts = [1, 2]\n    stage S {{ {field} }}")
    name = field.split()[0]
    value = field.split(maxsplit=2)[2]
    message = f"'{name}' cannot be a list: only a memory or time measure takes a list of terms"
    assert where(d) == ("type", message, 3, 18 + len(name), value)


def test_a_list_elsewhere_names_memory_terms_in_its_message() -> None:
    (d,) = diagnostics("    stage S { memory ~ [1, 2] + 1 }")
    message = (
        "a list may only be a let's value, a memory or time measure's terms or the argument of "
        "len, sum, min or max"
    )
    assert where(d) == ("type", message, 2, 24, "[1, 2]")


def test_the_degree_limit_applies_to_each_term() -> None:
    found = diagnostics(
        "    param h: int = 2\n    let a = h ** 64\n    let b = a ** 16\n"
        "    stage S { memory ~ [h, b * a] }"
    )
    # The term is set aside, so the cost pass also reports the let's own size (an error of its own).
    (d,) = [x for x in found if "polynomial degree" in x.message]
    assert {x.code for x in found} == {"limit"}
    assert where(d) == (
        "limit",
        "term 2 of 'memory' of stage 'S' has a polynomial degree above 1024",
        5,
        28,
        "b * a",
    )


# -- proofs ----------------------------------------------------------------------------------------


def test_each_term_is_one_nonnegativity_obligation() -> None:
    pipeline = vae()
    obligations = collect(pipeline, Context(pipeline))
    nonneg = [ob.what for ob in obligations if ob.kind == NONNEG and "memory" in ob.what]
    assert nonneg == [
        "term 1 of 'memory' of stage 'DecodingStage'",
        "term 2 of 'memory' of stage 'DecodingStage'",
        "term 1 of 'memory' of stage 'LetStage'",
        "term 2 of 'memory' of stage 'LetStage'",
        "'memory' of stage 'OneStage'",
        "'memory' of stage 'PlainStage'",
    ]


def test_a_negative_term_is_an_error_at_the_term_even_when_the_sum_is_not() -> None:
    (d,) = diagnostics("    param h: int = 4 in [0, 10]\n    stage S { memory ~ [h + 5, h - 1] }")
    assert where(d) == (
        "negative",
        "term 2 of 'memory' of stage 'S' is -1 at h = 0",
        3,
        32,
        "h - 1",
    )


def test_a_negative_term_of_a_list_let_is_shown_in_the_let() -> None:
    (d,) = diagnostics(
        "    param h: int = 4 in [0, 10]\n    let parts = [h - 1, h + 5]\n"
        "    stage S { memory ~ parts }"
    )
    assert where(d) == (
        "negative",
        "term 1 of 'memory' of stage 'S' is -1 at h = 0",
        3,
        18,
        "h - 1",
    )


def test_a_one_item_list_is_the_plain_measure() -> None:
    (d,) = diagnostics("    param h: int = 4 in [0, 10]\n    stage S { memory ~ [h - 1] }")
    assert where(d) == ("negative", "'memory' of stage 'S' is -1 at h = 0", 3, 25, "h - 1")


def test_a_division_by_zero_in_a_term() -> None:
    (d,) = diagnostics("    param h: int = 4 in [0, 10]\n    stage S { memory ~ [h, 10 / h] }")
    assert where(d) == (
        "division-by-zero",
        "division by zero in term 2 of 'memory' of stage 'S' at h = 0",
        3,
        33,
        "h",
    )


def test_a_division_in_a_list_let_is_the_lets_alone() -> None:
    body = (
        "    param h: int = 4 in [0, 10]\n    let parts = [h, 10 / h]\n    stage S { memory ~ "
        "parts }"
    )
    (d,) = diagnostics(body)
    assert where(d) == ("division-by-zero", "division by zero in let 'parts' at h = 0", 3, 26, "h")
    pipeline = compile_text(
        "pipeline p {\n" + body.replace("10 / h", "10 / (h + 1)") + "\n}\n"
    ).program
    assert pipeline is not None
    divisors = [
        ob.what
        for ob in collect(pipeline.pipelines[0], Context(pipeline.pipelines[0]))
        if ob.kind == DIVISOR
    ]
    assert divisors == ["let 'parts'"]


def test_an_unprovable_term_is_a_warning_naming_it() -> None:
    (d,) = diagnostics(
        "    param a: int = 3 in [0, inf]\n    param b: int = 2 in [0, inf]\n"
        "    stage S { memory ~ [a, a*a*a*a - 4*a*a*a*b + 6*a*a*b*b - 4*a*b*b*b + b*b*b*b + 1] }"
    )
    assert (d.severity, d.code, d.message) == (
        "warning",
        "unproven",
        "cannot prove that term 2 of 'memory' of stage 'S' is >= 0",
    )


def test_a_childs_override_replaces_every_term() -> None:
    text = """\
pipeline parent {
    param h: int = 4 in [0, 10]
    stage S { memory ~ [h, h - 1]; time ~ h }
}
pipeline child extends parent {
    stage S { memory ~ h }
}
pipeline grandchild extends child {
    stage S { memory ~ [h, 2 * h, 3] }
}
"""
    result = compile_text(text, "t.wf")
    assert [(d.code, d.message) for d in result.diagnostics] == [
        ("negative", "term 2 of 'memory' of stage 'S' is -1 at h = 0")
    ]
    fixed = compile_text(text.replace("h - 1", "h + 1"), "t.wf")
    assert fixed.program is not None
    doc = artifact(fixed.program)
    memory = {p["name"]: p["stages"][0]["memory"] for p in doc["pipelines"]}
    assert len(memory["parent"]["terms"]) == 2
    assert "terms" not in memory["child"]
    assert memory["child"]["expr"] == {"k": "param", "name": "h"}
    assert len(memory["grandchild"]["terms"]) == 3
    assert doc["pipelines"][2]["stages"][0]["time"]["expr"] == {"k": "param", "name": "h"}  # kept


# -- the artifact ---------------------------------------------------------------------------------


def test_the_artifact_lists_terms_and_their_left_folded_sum() -> None:
    h_w = {"k": "mul", "args": [{"k": "param", "name": "height"}, {"k": "param", "name": "width"}]}
    out = {
        "k": "mul",
        "args": [
            {
                "k": "mul",
                "args": [{"k": "let", "name": "latent_frames"}, {"k": "param", "name": "height"}],
            },
            {"k": "param", "name": "width"},
        ],
    }
    memory = stage_json("DecodingStage")["memory"]
    assert memory == {
        "expr": {"k": "add", "args": [h_w, out]},
        "span": {"source": 0, "line": 8, "column": 18, "end_line": 8, "end_column": 66},
        "terms": [
            {
                "expr": h_w,
                "span": {"source": 0, "line": 8, "column": 19, "end_line": 8, "end_column": 33},
            },
            {
                "expr": out,
                "span": {"source": 0, "line": 8, "column": 35, "end_line": 8, "end_column": 65},
            },
        ],
    }
    assert "terms" not in stage_json("DecodingStage")["time"]
    assert "terms" not in stage_json("DecodingStage")["iterations"]


def test_three_terms_fold_from_the_left() -> None:
    text = "pipeline p { param h: int = 4 in [0, 10]\n stage S { memory ~ [h, 2, h * h] } }"
    memory = stage_json("S", text)["memory"]
    a, b, c = (term["expr"] for term in memory["terms"])
    assert memory["expr"] == {"k": "add", "args": [{"k": "add", "args": [a, b]}, c]}


def test_a_list_let_memory_spans_the_name_and_its_terms_the_items() -> None:
    memory = stage_json("LetStage")["memory"]
    assert memory["span"] == {
        "source": 0,
        "line": 11,
        "column": 31,
        "end_line": 11,
        "end_column": 36,
    }
    assert [t["span"]["line"] for t in memory["terms"]] == [6, 6]
    literal = stage_json("DecodingStage")["memory"]
    assert [t["expr"] for t in memory["terms"]] == [t["expr"] for t in literal["terms"]]
    assert memory["expr"] == literal["expr"]


def test_a_one_item_list_emits_the_plain_measure() -> None:
    one, plain = stage_json("OneStage")["memory"], stage_json("PlainStage")["memory"]
    assert "terms" not in one
    assert one["expr"] == plain["expr"]
    assert one["span"] == {
        "source": 0,
        "line": 12,
        "column": 32,
        "end_line": 12,
        "end_column": 46,
    }  # the item


def test_the_schema_takes_terms_on_measures_only_and_bounds_their_number() -> None:
    result = compile_text(VAE, "vae.wf")
    assert result.program is not None
    doc = artifact(result.program)
    stage = doc["pipelines"][0]["stages"][0]
    terms = stage["memory"]["terms"]
    for bad in (
        {**stage, "iterations": {**stage["iterations"], "terms": terms}},
        {**stage, "memory": {**stage["memory"], "terms": terms[:1]}},
        {**stage, "time": {**stage["time"], "terms": terms * 9}},
        {**stage, "memory": {**stage["memory"], "terms": terms * 9}},
        {**stage, "memory": {**stage["memory"], "terms": [{**terms[0], "extra": 1}, terms[1]]}},
    ):
        doc["pipelines"][0]["stages"][0] = bad
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(doc, SCHEMA)


def test_the_runtime_loads_the_terms_and_sums_them() -> None:
    from dslc.build import load_program

    result = compile_text(VAE, "vae.wf")
    assert result.program is not None
    pipeline = load_program(result.program)["vae"]
    assert pipeline.memory("DecodingStage", frames=5) == 720 * 1280 * 3
    assert pipeline.memory_terms("DecodingStage", frames=5) == (720 * 1280, 2 * 720 * 1280)
    assert pipeline.memory_terms("OneStage") == (720 * 1280,)


# -- fmt ------------------------------------------------------------------------------------------


def test_fmt_writes_a_list_memory_canonically_and_idempotently() -> None:
    text = "pipeline p {\n    param h: int = 4\n    stage S {memory~[ h*2 ,h ,]}\n}\n"
    once = format_source(SourceFile("t.wf", text))
    assert once == "pipeline p {\n    param h: int = 4\n    stage S { memory ~ [h * 2, h] }\n}\n"
    assert format_source(SourceFile("t.wf", once)) == once
    text = (
        "pipeline p {\n    param h: int = 4\n    stage S {\n        memory~[ h*2 ,\n  h ,]  # "
        "two parts\n    }\n}\n"
    )
    once = format_source(SourceFile("t.wf", text))
    assert (
        once == "pipeline p {\n    param h: int = 4\n    stage S {\n        memory ~ [h * 2, h]  # "
        "two parts\n    }\n}\n"
    )
    assert format_source(SourceFile("t.wf", once)) == once
    assert format_source(SourceFile("vae.wf", VAE)) == VAE
