"""The static cost model at load: every bomb of issue 13 is an ArtifactLimitError before anything is
evaluated, and what loads has generated code linear in the artifact.

Work is bounded without clocks: `read_artifact` validates and bounds costs but never evaluates or
compiles anything, so a bomb it refuses cannot have cost more than a walk over its nodes; loaded
pipelines are measured by the size of their generated source.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from artifact import limits as L
from artifact.cost import node_bounds, param_bits
from artifact.document import read_artifact
from artifact.ir import Expr
from dslc import bombs
from runtime import ArtifactError, ArtifactLimitError, EvaluationError, load_formulas
from tests.runtime.builders import I, P, document, int_param, let, one_stage, op, pipeline, stage
from tests.runtime.test_safety import audit


def refused(doc: dict[str, Any]) -> ArtifactLimitError:
    """Validation alone (no evaluation, no code generation) refuses the document."""
    with pytest.raises(ArtifactLimitError) as caught:
        read_artifact(doc)
    with pytest.raises(ArtifactLimitError):
        load_formulas(doc)
    return caught.value


# --------------------------------------------------------------------------- the bombs


def test_nested_powers_are_refused_at_the_node_that_overflows() -> None:
    load_formulas(bombs.nested_powers_artifact(2))  # x ** 4096 with x <= 1000: 40,960 bits
    error = refused(bombs.nested_powers_artifact(3))  # 10 x 64**3 bits
    assert error.path == "pipelines[0].stages[0].memory.expr"
    assert "bits" in error.problem and f"{L.MAX_VALUE_BITS:,}" in error.problem
    for depth in (5, 6):  # 5: 862 bytes that once took 5-13 s; 6: a MemoryError after 77 s
        deeper = refused(bombs.nested_powers_artifact(depth))
        assert deeper.path == "pipelines[0].stages[0].memory.expr" + ".args[0]" * (depth - 3)


def test_a_squaring_chain_is_refused_at_its_first_costly_let() -> None:
    load_formulas(bombs.squaring_chain_artifact(10))
    for length in (24, 27, 40):  # 4.6 KB: once ~6 s; 27 lets: over 20 s
        error = refused(bombs.squaring_chain_artifact(length))
        assert error.path.startswith("pipelines[0].lets[")
        assert int(error.path.split("[")[2].split("]")[0]) < 24


def test_a_wide_let_fanned_out_to_every_stage_generates_linear_code() -> None:
    small = load_formulas(bombs.let_fan_out_artifact(100, 2))["p"]
    large = load_formulas(bombs.let_fan_out_artifact(2000, 64))["p"]
    # once the let was re-emitted in every function: source ~ args x stages
    per_arg = (len(large.source) - len(small.source)) / (2000 - 100)
    assert per_arg < 40  # one `(p0 + 7)` per arg, in the one shared lets function
    assert large.evaluate()["S63"].memory == 3 + 1999
    assert large.memory("S5", x=10) == 10 + 1999
    audit(large)
    refused(bombs.let_fan_out_artifact(20, 100))  # 100 stages: over MAX_STAGES


def test_contracts_take_only_the_params_they_use() -> None:
    small = load_formulas(bombs.contract_fan_out_artifact(20))["p"]
    large = load_formulas(bombs.contract_fan_out_artifact(500))["p"]
    per_param = (len(large.source) - len(small.source)) / (500 - 20)
    assert per_param < 400  # once every contract's closure took every param: source ~ params^2
    assert large.is_admissible(x7=4) and not large.is_admissible(x7=5)
    assert large.violations(x499=3) == ("x499 = 3 violates `x499 % 2 == 0`",)
    assert large.iterations("S", x7=4) == 2
    audit(large)
    assert "params, lets and stages" in refused(bombs.contract_fan_out_artifact(2000)).problem


@pytest.mark.parametrize(
    ("doc", "words"),
    [
        (bombs.many_pipelines_artifact(L.MAX_PIPELINES + 1), "pipelines"),
        (bombs.many_params_artifact(40_000), "params, lets and stages"),
        (bombs.let_fan_out_artifact(20_000, 65), "stages"),
    ],
    ids=["20k-pipelines", "40k-params", "stages"],
)
def test_counts_are_bounded_before_anything_is_read(doc: dict[str, Any], words: str) -> None:
    assert words in refused(doc).problem


def test_a_name_over_the_limit_is_a_limit_error() -> None:
    doc = one_stage(iterations=P("s" * (L.MAX_NAME_LENGTH + 1)))
    doc["pipelines"][0]["params"] = [int_param("s" * (L.MAX_NAME_LENGTH + 1), 1, 1, 10)]
    assert refused(doc).path == "pipelines[0].params[0].name"
    doc = one_stage(iterations=P("s" * L.MAX_NAME_LENGTH))
    doc["pipelines"][0]["params"] = [int_param("s" * L.MAX_NAME_LENGTH, 1, 1, 10)]
    load_formulas(doc)


def test_load_work_is_bounded_across_the_artifact() -> None:
    # each pipeline is fine alone; together they would take too long to evaluate at load
    x = P("x")
    heavy = op("pow", op("mul", x, x), exp=64)  # 2 * 64 * 60 bits: a costly power
    one = pipeline("p0", [int_param("x", 3, 0, 2**60)], [stage("S", memory=heavy)])
    alone = read_artifact(document(one)).pipelines[0].stages[0].memory.expr.work
    assert alone <= L.MAX_CALL_WORK
    count = L.MAX_LOAD_WORK // alone + 1
    assert count <= L.MAX_PIPELINES
    many = [dict(one, name=f"p{i}") for i in range(count)]
    error = refused(document(*many))
    assert "word operations" in error.problem and error.path.startswith(f"pipelines[{count - 1}]")


def test_an_unbounded_param_counts_as_the_largest_request_value() -> None:
    assert param_bits(0, None, False) == L.UNBOUNDED_BITS == (10**L.MAX_INT_DIGITS).bit_length()
    assert param_bits(-5, 3, False) == 3 and param_bits(None, None, True) == 1
    doc = one_stage(memory=op("pow", P("n"), exp=10), params=[int_param("n", 2, 0, None)])
    assert "bits" in refused(doc).problem  # 10 x 14,286 bits
    n = [int_param("n", 2, 0, None)]
    quotient = op("floordiv", op("pow", P("n"), exp=9), op("add", op("pow", P("n"), exp=8), I(1)))
    assert "word operations" in refused(one_stage(memory=quotient, params=n)).problem
    assert (
        load_formulas(one_stage(memory=op("pow", P("n"), exp=8), params=n))["p"].memory("S") == 256
    )
    doc = one_stage(memory=op("pow", P("n"), exp=2), params=[int_param("n", 2, 0, None)])
    assert load_formulas(doc)["p"].memory("S", n=10**4000) == 10**8000


# --------------------------------------------------------------------------- the model itself


def leaf(value: int | None = None, bits: int = 1, dbits: int = 0) -> Expr:
    if value is not None:
        bits = abs(value).bit_length()
    return Expr("int", "int", (), value, None, None, bits, dbits, 1)


@pytest.mark.parametrize("seed", range(200))
def test_bit_bounds_hold_for_random_values(seed: int) -> None:
    """Each rule bounds the bit lengths of the exact result (numerator and denominator)."""
    from fractions import Fraction

    rng = random.Random(seed)
    a = Fraction(rng.randint(-(2**70), 2**70), rng.choice([1, 1, rng.randint(1, 2**40)]))
    b = Fraction(rng.randint(-(2**70), 2**70), rng.choice([1, 1, rng.randint(1, 2**40)]))
    if b == 0:
        b = Fraction(1)

    def node(v: Fraction) -> Expr:
        return Expr(
            "frac", "rat", (), v, None, None,
            abs(v.numerator).bit_length(), v.denominator.bit_length() if v.denominator > 1 else 0,
        )  # fmt: skip

    x, y = node(a), node(b)
    exp = rng.randint(0, 5)
    results = {
        "add": a + b, "sub": a - b, "mul": a * b, "div": a / b,
        "floordiv": Fraction(a // b), "mod": a % b, "neg": -a, "abs": abs(a),
        "floor": Fraction(a.__floor__()), "ceil": Fraction(a.__ceil__()), "min": min(a, b),
        "max": max(a, b), "pow": a**exp,
    }  # fmt: skip
    for kind, value in results.items():
        args = (x,) if kind in ("neg", "abs", "floor", "ceil", "pow") else (x, y)
        bits, dbits, work = node_bounds(kind, args, exp if kind == "pow" else None)
        assert abs(value.numerator).bit_length() <= bits, kind
        assert (value.denominator.bit_length() if value.denominator > 1 else 0) <= dbits, kind
        assert work >= 1


def test_if_takes_the_costlier_branch_and_the_larger_value() -> None:
    cond = Expr("bool", "bool", (), True, None, None, 1, 0, 1)
    cheap, costly = leaf(3), Expr("int", "int", (), 1, None, None, 900, 0, 500)
    bits, dbits, work = node_bounds("if", (cond, cheap, costly), None)
    assert (bits, dbits) == (900, 0) and work == 1 + 1 + 500


def test_the_default_workload_is_checked_with_one_call_per_pipeline() -> None:
    """Division by zero and negative values at the defaults still name the field (via `every`)."""
    lets = [let("zero", op("sub", P("steps"), P("steps")))]
    doc = one_stage(memory=op("div", I(1), {"k": "let", "name": "zero"}), lets=lets)
    with pytest.raises(ArtifactError) as caught:
        load_formulas(doc)
    assert caught.value.path == "pipelines[0].stages[0].memory.expr"
    assert "division by zero" in caught.value.problem
    ok = one_stage(
        memory=op(
            "if", op("gt", P("steps"), I(1)), I(1), op("div", I(1), op("sub", P("steps"), I(1)))
        )
    )
    p = load_formulas(ok)["p"]
    with pytest.raises(EvaluationError, match=r"division by zero evaluating p\.S\.memory"):
        p.evaluate(steps=1)
