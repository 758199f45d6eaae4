"""Differential: the runtime's compiled evaluators agree with the compiler's Fraction oracle."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dslc.compiler import compile_text
from dslc.emit import artifact, dumps
from dslc.interp import Interpreter, as_python
from dslc.testing import admissible_params, sources
from runtime import load_formulas


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(st.data(), sources())
def test_runtime_equals_the_oracle_at_admissible_points(data: st.DataObject, text: str) -> None:
    result = compile_text(text, "generated.wf")
    assert result.ok, [d.message for d in result.errors]
    (resolved,) = result.program.pipelines
    pipeline = load_formulas(dumps(artifact(result.program)))["generated"]
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
            memory = stage.field("memory")
            terms = resolved.terms(memory) if memory is not None else (None,)
            expected_terms = tuple(as_python(oracle.eval(t)) if t is not None else 1 for t in terms)
            assert pipeline.memory_terms(stage.name, **point) == expected_terms, (stage.name, point)
