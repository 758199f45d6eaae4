"""`explain` prints formulas in the language that re-parse to the value printed beside them, and
never raises on a valid program (generated programs, property-tested, and known regressions)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dslc import ast
from dslc.build import load_program
from dslc.compiler import compile_text
from dslc.explain import MAX_SHOWN_NODES, Explanation, explain
from dslc.interp import Interpreter
from dslc.model import ResolvedPipeline
from dslc.parse import parse_text
from dslc.testing import admissible_params, sources
from runtime import Pipeline


def compiled(text: str) -> tuple[ResolvedPipeline, Pipeline]:
    result = compile_text(text, "explained.wf")
    assert result.ok and result.program is not None, result.diagnostics
    (resolved,) = result.program.pipelines
    return resolved, load_program(result.program)[resolved.name]


def reparsed(formula: str) -> ast.Expr:
    """The formula as the parser reads it back (any syntax error raises)."""
    module = parse_text(f"pipeline t {{ stage S {{ iterations = {formula} }} }}")
    return module.pipelines[0].members[0].fields[0].value  # type: ignore[union-attr]


def runtime_value(pipeline: Pipeline, stage: str, field: str, term: int | None, point: dict):
    if term is not None:
        terms_of = pipeline.memory_terms if field == "memory" else pipeline.time_terms
        return terms_of(stage, **point)[term]
    return getattr(pipeline.evaluate(**point)[stage], field)


def assert_round_trips(explained: Explanation, pipeline: Pipeline, points: list[dict]) -> None:
    for f in explained.fields:
        if f.formula.startswith("(a formula of more than"):
            continue
        tree = reparsed(f.formula)
        for point in points:
            exact = {k: v if isinstance(v, bool) else Fraction(v) for k, v in point.items()}
            want = runtime_value(pipeline, f.stage, f.field, f.term, point)
            assert Interpreter(exact).eval(tree) == want, (f.label, f.formula, point)


# A generated program is slow to draw (~0.1 s), so generation alone can exceed too_slow's limit.
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), sources(max_params=2, max_stages=2, booleans=True))
def test_explained_formulas_reparse_to_the_same_value(data: st.DataObject, text: str) -> None:
    resolved, pipeline = compiled(text)
    explained = explain(resolved, pipeline, {})
    points = [data.draw(admissible_params(pipeline)) for _ in range(3)]
    assert_round_trips(explained, pipeline, [pipeline.default_workload, *points])


REGRESSIONS = {
    # sympy's Eq(x < 3, b0) raised TypeError (an internal error, exit 3)
    "bool-eq": "if (x < 3) == b0 then 1 else 2",
    # printed `x < 3 != x > 5` (comparisons do not chain) and `true == not b0`
    "bool-ne": "if (x < 3) != (x > 5) then 1 else 2",
    "eq-not": "if true == (not b0) then 1 else 2",
    "if-in-compare": "if (if b0 then x < 3 else x > 5) == b0 then x else 1",
    "not-and": "if not (b0 and x > 1) then 1 else 2",
    "neg-mod": "(-x) % 3 + -(x % 3) + 3",
    "neg-power": "(-x) ** 3 + x ** 3 + (0 - x) ** 2",
    "fractions": "x / 3 - x // 2 + 0.725 * x + (x + 1) / (x + 2)",
    "nested-if": "1 + (if x > 3 then 2 else if b0 then 3 else 4) * 2",
}


@pytest.mark.parametrize("formula", REGRESSIONS.values(), ids=REGRESSIONS.keys())
def test_known_regressions_round_trip(formula: str) -> None:
    resolved, pipeline = compiled(
        "pipeline p {\n    param x: int = 2 in [0, 10]\n    param b0: bool = true\n"
        f"    stage S {{ iterations = max(0, floor({formula})) }}\n}}\n"
    )
    explained = explain(resolved, pipeline, {"x": 7})
    points = [{"x": x, "b0": b} for x in range(11) for b in (True, False)]
    assert_round_trips(explained, pipeline, points)


def formula_of(text: str, field: str = "memory") -> str:
    resolved, pipeline = compiled(text)
    return next(f.formula for f in explain(resolved, pipeline, {}).fields if f.field == field)


def test_a_simplification_the_language_cannot_write_falls_back_to_the_source() -> None:
    # sympy folds x**40 * x**40 into x**80, over the exponent limit
    text = "pipeline p {\n    param x: int = 2 in [0, 10]\n    let a = x ** 40\n"
    assert formula_of(text + "    stage S { memory ~ a * a }\n}\n") == "x ** 40 * x ** 40"
    # ... and a product of literals into one longer than a literal may be
    big = "99999999999999999999"
    text = (
        "pipeline p {\n    param x: int = 2 in [0, 10]\n"
        f"    stage S {{ memory ~ {big} * {big} * x }}\n}}\n"
    )
    assert formula_of(text) == f"{big} * {big} * x"


def test_a_huge_formula_is_summarised() -> None:
    lets = "\n".join(f"    let a{i} = a{i - 1} * x + a{i - 1}" for i in range(1, 14))
    text = f"pipeline p {{\n    param x: int = 2 in [0, 3]\n    let a0 = x\n{lets}\n"
    formula = formula_of(text + "    stage S { memory ~ a13 }\n}\n")
    assert formula == f"(a formula of more than {MAX_SHOWN_NODES} nodes; too large to show)"


@pytest.mark.parametrize(
    ("formula", "shown"),
    [
        ("(x - 1) // 4", "(x - 1) // 4"),  # printed floor(x / 4 - 1 / 4) before
        ("(x + 7) // 8 + x // 16", "x // 16 + (x + 7) // 8"),  # in sympy's order
        ("3 * (x // 2)", "3 * (x // 2)"),
        ("floor(x / (y + 1))", "floor(x / (y + 1))"),  # a divisor that is no number stays
        ("ceil(x / 8)", "ceil(x / 8)"),
    ],
)
def test_an_integer_division_is_printed_as_written(formula: str, shown: str) -> None:
    text = (
        "pipeline p {\n    param x: int = 2 in [1, 100]\n    param y: int = 2 in [1, 100]\n"
        f"    stage S {{ memory ~ {formula} }}\n}}\n"
    )
    assert formula_of(text) == shown
