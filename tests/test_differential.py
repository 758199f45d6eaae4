"""Differential: the runtime's compiled evaluators agree with the compiler's Fraction oracle."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dslc import ast
from dslc.build import load_program
from dslc.compiler import compile_text
from dslc.fmt import format_expr
from dslc.interp import Interpreter, as_python
from dslc.testing import admissible_params, expressions, sources
from tests.examples import program_of


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(st.data(), sources())
def test_runtime_equals_the_oracle_at_admissible_points(data: st.DataObject, text: str) -> None:
    result = compile_text(text, "generated.wf")
    program = program_of(result)
    (resolved,) = program.pipelines
    pipeline = load_program(program)["generated"]
    for _ in range(5):
        point = data.draw(admissible_params(pipeline))
        oracle = Interpreter(
            {k: v if isinstance(v, bool) else Fraction(v) for k, v in point.items()}, resolved.lets
        )
        values = pipeline.evaluate(**point)
        for stage in resolved.stages:
            for name in ("iterations", "memory", "time"):
                field = stage.field(name)
                expected = (
                    as_python(oracle.eval(resolved.field_value(field))) if field is not None else 1
                )
                assert getattr(values[stage.name], name) == expected, (stage.name, name, point)
            for name, terms_of in (
                ("memory", pipeline.memory_terms),
                ("time", pipeline.time_terms),
            ):
                measure = stage.field(name)
                terms = resolved.terms(measure) if measure is not None else (None,)
                expected_terms = tuple(
                    as_python(oracle.eval(t)) if t is not None else 1 for t in terms
                )
                assert terms_of(stage.name, **point) == expected_terms, (stage.name, name, point)


@st.composite
def _with_calls(draw: st.DrawFn) -> str:
    """A generated pipeline plus `call` lines: numeric expressions (safe divisors) and
    comparisons.
    """
    text = draw(sources())
    names = [line.split()[1].rstrip(":") for line in text.splitlines()[1:-1]]
    names = [n for n in names if not n.startswith("S")]  # params and lets, not stages
    numeric = [n for n in names if n != "flag"]
    calls = [
        f"call a{i} = {format_expr(draw(expressions(numeric)))}"
        for i in range(draw(st.integers(1, 3)))
    ]
    left, right = draw(expressions(numeric)), draw(expressions(numeric))
    calls.append(f"call b = {format_expr(ast.Binary('<', left, right))}")
    if "flag" in names:
        choice = ast.IfElse(ast.Name("flag"), left, ast.Num(Fraction(7)))
        calls.append(f"call c = {format_expr(choice)}")
    body = "".join(f"    {line}\n" for line in calls)
    return text.removesuffix("}\n") + body + "}\n"


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(st.data(), _with_calls())
def test_call_arguments_equal_the_oracle_at_admissible_points(
    data: st.DataObject, text: str
) -> None:
    program = program_of(compile_text(text, "generated.wf"))
    (resolved,) = program.pipelines
    pipeline = load_program(program)["generated"]
    assert pipeline.call_names == tuple(call.arg for call in resolved.calls)
    for _ in range(5):
        point = data.draw(admissible_params(pipeline))
        oracle = Interpreter(
            {k: v if isinstance(v, bool) else Fraction(v) for k, v in point.items()}, resolved.lets
        )
        expected = {call.arg: as_python(oracle.eval(call.value)) for call in resolved.calls}
        got = pipeline.call_arguments(**point)
        assert got == expected, point
        assert [type(v) for v in got.values()] == [type(v) for v in expected.values()], point
