"""Differential: the sympy lowering (used by the prover and `explain`) equals the Fraction
oracle.
"""

from __future__ import annotations

from fractions import Fraction

import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dslc.build import load_program
from dslc.compiler import compile_text
from dslc.interp import Interpreter
from dslc.testing import admissible_params, sources
from dslc.to_sympy import lower_field, param_symbol


# A generated program is slow to draw (~0.1 s), so generation alone can exceed too_slow's limit.
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), sources(max_params=2, max_stages=2))
def test_sympy_lowering_equals_the_oracle(data: st.DataObject, text: str) -> None:
    result = compile_text(text, "generated.wf")
    assert result.ok and result.program is not None
    (resolved,) = result.program.pipelines
    pipeline = load_program(result.program)["generated"]
    symbols = {p.name: param_symbol(p) for p in resolved.params}
    for _ in range(3):
        point = data.draw(admissible_params(pipeline))
        oracle = Interpreter(
            {k: v if isinstance(v, bool) else Fraction(v) for k, v in point.items()}, resolved.lets
        )
        substitution = {
            symbols[k]: (
                sympy.true if v is True else sympy.false if v is False else sympy.Integer(v)
            )
            for k, v in point.items()
        }
        for stage in resolved.stages:
            for field in stage.fields.values():
                for expr in (
                    resolved.field_value(field),
                    *resolved.terms(field),
                ):  # a memory: sum, terms
                    expected = oracle.eval(expr)
                    value = lower_field(resolved, expr).subs(substitution)
                    if (
                        not value.is_Rational
                    ):  # nsimplify only what is not already exact: it can turn
                        value = sympy.nsimplify(value)  # 29/3400 into a product of radicals
                    assert value.is_Rational, (field.name, value)
                    assert Fraction(int(value.p), int(value.q)) == expected, (
                        stage.name,
                        field.name,
                        point,
                    )
