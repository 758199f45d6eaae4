"""Any valid param name works through the whole API (no collision with method arguments), and
huge request values give typed errors with short messages."""

from __future__ import annotations

import pytest

from dslc.build import load_program
from dslc.compiler import compile_text
from runtime import InadmissibleError, ParamTypeError, Pipeline

# Every argument name the Pipeline methods and their generated entries use.
NAMES = ("self", "at_most", "name", "stage", "params", "probe", "target", "others", "_")


def pipeline(text: str) -> Pipeline:
    result = compile_text(text)
    assert result.ok and result.program is not None, result.diagnostics
    (name,) = (p.name for p in result.program.pipelines)
    return load_program(result.program)[name]


@pytest.fixture(scope="module")
def awkward() -> Pipeline:
    params = "\n".join(f"    param {n}: int = 4 in [0, 100]" for n in NAMES)
    return pipeline(
        f"pipeline p {{\n{params}\n    param flag: bool = true\n"
        f"    stage S {{ iterations = self + at_most + stage + params + _ }}\n}}\n"
    )


def test_every_method_takes_params_named_like_its_arguments(awkward: Pipeline) -> None:
    point = dict.fromkeys(NAMES, 5)
    assert awkward.evaluate(**point)["S"].iterations == 25
    assert awkward.iterations("S", **point) == 25
    assert Pipeline.iterations(awkward, "S", **point) == 25  # the reference path
    assert awkward.memory("S", **point) == 1
    assert awkward.time("S", **point) == 1
    assert awkward.memory_terms("S", **point) == (1,)
    assert awkward.is_admissible(**point)
    assert awkward.violations(**{**point, "self": 101}) == ("self = 101 is outside [0, 100]",)
    assert awkward.stage_iterations(point, point) == {"S": (25, 25)}


def test_largest_admissible_with_a_param_named_at_most(awkward: Pipeline) -> None:
    # The bound by position: `at_most=` is then the param.
    assert awkward.largest_admissible("self", 50, at_most=7) == 50
    assert awkward.largest_admissible("at_most", 60, self=3) == 60
    # The bound by keyword, as documented for every other pipeline.
    assert awkward.largest_admissible("self", at_most=200) == 100
    with pytest.raises(InadmissibleError):
        awkward.iterations("S", at_most=101)
    with pytest.raises(TypeError, match="needs the bound"):
        awkward.largest_admissible("self")


HUGE = 10**5000  # str() refuses ints over 4,300 digits


@pytest.fixture(scope="module")
def small() -> Pipeline:
    return pipeline(
        "pipeline p {\n    param n: int = 4 in [0, 100]\n    param b: bool = true\n"
        "    stage S { iterations = n }\n}\n"
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda p: p.evaluate(n=HUGE),
        lambda p: p.iterations("S", n=HUGE),
        lambda p: Pipeline.iterations(p, "S", n=HUGE),
        lambda p: p.memory_terms("S", n=-HUGE),
        lambda p: p.stage_iterations({"n": HUGE}),
    ],
)
def test_a_huge_value_is_inadmissible_with_a_short_message(small: Pipeline, call) -> None:
    with pytest.raises(InadmissibleError) as err:
        call(small)
    assert "n = <an integer of 16,610 bits> is outside [0, 100]" in str(err.value)
    assert len(str(err.value)) < 200


def test_a_huge_value_for_a_bool_is_a_type_error_with_a_short_message(small: Pipeline) -> None:
    with pytest.raises(ParamTypeError) as err:
        small.evaluate(b=HUGE)
    assert "got <an integer of 16,610 bits> (int)" in str(err.value)
    assert small.violations(n=HUGE) == ("n = <an integer of 16,610 bits> is outside [0, 100]",)
    assert small.largest_admissible("n", HUGE) == 100
