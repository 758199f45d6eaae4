"""Differential tests: compiled evaluators against a naive recursive Fraction interpreter.

The oracle below is written independently of runtime/evaluator.py: it walks the artifact JSON
directly, substituting lets where they are used (so lets are as lazy as inline text).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from artifact.document import parse_artifact
from runtime import ArtifactError, EvaluationError, InadmissibleError, Pipeline, load_formulas
from runtime.defaults import lets_at, result_at, value_at
from runtime.evaluator import UNDEFINED, compile_pipeline

from .builders import I, bool_param, contract, document, int_param, let, pipeline, stage

INT_PARAMS = {"a": (-6, 6), "b": (-3, 9), "c": (0, 12)}
PARAMS = [int_param(n, 1, lo, hi) for n, (lo, hi) in INT_PARAMS.items()] + [
    bool_param("flag", True)
]
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# ---------------------------------------------------------------- the oracle


def oracle(
    node: dict[str, Any], env: dict[str, Any], lets: dict[str, dict[str, Any]]
) -> Fraction | bool:
    """Evaluate an artifact expression the slow, obvious way; raises ZeroDivisionError as maths
    does.
    """
    kind = node["k"]
    if kind == "int":
        return Fraction(node["v"])
    if kind == "frac":
        return Fraction(node["n"], node["d"])
    if kind == "bool":
        return node["v"]
    if kind == "param":
        return env[node["name"]]
    if kind == "let":
        return oracle(lets[node["name"]], env, lets)
    args = node["args"]

    def ev(i: int) -> Any:
        return oracle(args[i], env, lets)

    if kind == "if":
        return ev(1) if ev(0) else ev(2)
    if kind == "and":
        return ev(0) and ev(1)
    if kind == "or":
        return ev(0) or ev(1)
    if kind == "not":
        return not ev(0)
    values = [ev(i) for i in range(len(args))]
    x = values[0]
    y = values[1] if len(values) > 1 else None
    if kind in ("floordiv", "mod") and y == 0:
        raise ZeroDivisionError
    table = {
        "neg": lambda: -x,
        "abs": lambda: abs(x),
        "floor": lambda: Fraction(math.floor(x)),
        "ceil": lambda: Fraction(math.ceil(x)),
        "add": lambda: x + y,
        "sub": lambda: x - y,
        "mul": lambda: x * y,
        "div": lambda: x / y,
        "floordiv": lambda: Fraction(math.floor(x / y)),
        "mod": lambda: x - y * math.floor(x / y),
        "pow": lambda: x ** node["exp"],
        "min": lambda: min(values),
        "max": lambda: max(values),
        "eq": lambda: x == y,
        "ne": lambda: x != y,
        "lt": lambda: x < y,
        "le": lambda: x <= y,
        "gt": lambda: x > y,
        "ge": lambda: x >= y,
    }
    return table[kind]()


def outcome(fn: Any, *args: Any) -> Any:
    """The value of `fn(*args)`, or the marker 'ZeroDivisionError'."""
    try:
        return fn(*args)
    except ZeroDivisionError:
        return "ZeroDivisionError"


def truth(fn: Any, *args: Any) -> bool:
    return bool(fn(*args))


# ---------------------------------------------------------------- random trees


@st.composite
def number(draw: Any, depth: int, lets: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    leaves = [
        st.integers(-7, 7).map(I),
        st.sampled_from(list(INT_PARAMS)).map(lambda n: {"k": "param", "name": n}),
        st.tuples(st.integers(-9, 9), st.integers(2, 7))
        .filter(lambda t: math.gcd(*t) == 1)
        .map(lambda t: {"k": "frac", "n": t[0], "d": t[1]}),
    ]
    numeric_lets = [name for name, typ in lets if typ == "num"]
    if numeric_lets:
        leaves.append(st.sampled_from(numeric_lets).map(lambda n: {"k": "let", "name": n}))
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.one_of(leaves))
    kind = draw(
        st.sampled_from(
            [
                "neg",
                "abs",
                "floor",
                "ceil",
                "add",
                "sub",
                "mul",
                "div",
                "floordiv",
                "mod",
                "pow",
                "min",
                "max",
                "if",
            ]
        )
    )
    sub = number(depth - 1, lets)
    if kind in ("neg", "abs", "floor", "ceil"):
        return {"k": kind, "args": [draw(sub)]}
    if kind == "pow":
        return {"k": "pow", "args": [draw(sub)], "exp": draw(st.integers(0, 3))}
    if kind in ("min", "max"):
        return {"k": kind, "args": draw(st.lists(sub, min_size=1, max_size=3))}
    if kind == "if":
        return {"k": "if", "args": [draw(boolean(depth - 1, lets)), draw(sub), draw(sub)]}
    return {"k": kind, "args": [draw(sub), draw(sub)]}


@st.composite
def boolean(draw: Any, depth: int, lets: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    leaves = [
        st.booleans().map(lambda v: {"k": "bool", "v": v}),
        st.just({"k": "param", "name": "flag"}),
    ]
    bool_lets = [name for name, typ in lets if typ == "bool"]
    if bool_lets:
        leaves.append(st.sampled_from(bool_lets).map(lambda n: {"k": "let", "name": n}))
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.one_of(leaves))
    kind = draw(st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "if"]))
    nums, bools = number(depth - 1, lets), boolean(depth - 1, lets)
    if kind == "not":
        return {"k": "not", "args": [draw(bools)]}
    if kind in ("and", "or"):
        return {"k": kind, "args": [draw(bools), draw(bools)]}
    if kind == "if":
        return {"k": "if", "args": [draw(bools), draw(bools), draw(bools)]}
    if kind in ("eq", "ne") and draw(st.booleans()):
        return {"k": kind, "args": [draw(bools), draw(bools)]}
    return {"k": kind, "args": [draw(nums), draw(nums)]}


@st.composite
def let_list(draw: Any) -> list[dict[str, Any]]:
    lets: list[tuple[str, str]] = []
    out = []
    for i in range(draw(st.integers(0, 3))):
        typ = draw(st.sampled_from(["num", "num", "bool"]))
        maker = number if typ == "num" else boolean
        out.append(let(f"v{i}", draw(maker(3, tuple(lets)))))
        lets.append((f"v{i}", typ))
    return out


def typed_lets(lets: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    return tuple(
        (entry["name"], "bool" if _is_bool(entry["expr"], lets) else "num") for entry in lets
    )


def _is_bool(node: dict[str, Any], lets: list[dict[str, Any]]) -> bool:
    kind = node["k"]
    if kind == "let":
        return _is_bool(next(e["expr"] for e in lets if e["name"] == node["name"]), lets)
    if kind == "param":
        return node["name"] == "flag"
    if kind == "if":
        return _is_bool(node["args"][1], lets)
    return kind in ("bool", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not")


points = st.fixed_dictionaries(
    {n: st.integers(lo, hi) for n, (lo, hi) in INT_PARAMS.items()} | {"flag": st.booleans()}
)


@st.composite
def case(draw: Any) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    lets = draw(let_list())
    scope = typed_lets(lets)
    return lets, draw(number(4, scope)), draw(boolean(3, scope))


def env_of(point: dict[str, Any]) -> dict[str, Any]:
    return {k: (v if k == "flag" else Fraction(v)) for k, v in point.items()}


# ---------------------------------------------------------------- the tests


# Every code layout (runtime/codegen.py): lets inline or shared (`_L`), params spelled out or `*_a`.
LAYOUTS = st.sampled_from(
    [{}, {"inline_nodes": 0}, {"positional": 0}, {"inline_nodes": 0, "positional": 0}]
)


@SETTINGS
@given(case(), st.lists(points, min_size=1, max_size=4), LAYOUTS)
def test_raw_closures_match_the_oracle(
    tree: Any, sample: list[dict[str, Any]], layout: dict[str, int]
) -> None:
    lets, num, cond = tree
    doc = document(
        pipeline(
            "p",
            PARAMS,
            [stage("S", iterations=num, memory=num)],
            lets,
            [contract("a", "random", cond)],
        )
    )
    decl = parse_artifact(doc).pipelines[0]
    compiled = compile_pipeline(decl, (None, None, None), **layout)  # type: ignore[arg-type]
    let_table = {e["name"]: e["expr"] for e in lets}
    for point in sample:
        args = [point[n] for n in ("a", "b", "c", "flag")]
        expected = outcome(oracle, num, env_of(point), let_table)
        for fn in (
            compiled.fields[0][0],
            compiled.fields[0][1],
            lambda *a: compiled.iterations(*a)[0],
        ):
            got = outcome(fn, *args)
            assert got == expected
            if got != "ZeroDivisionError":  # exact, normalised: an integral value is an int
                assert (type(got) is int) == (expected.denominator == 1)
        expected_ok = outcome(truth, oracle, cond, env_of(point), let_table)
        assert outcome(truth, compiled.contracts[0], *args) == expected_ok
        assert outcome(truth, compiled.admissible, *args) == expected_ok
        # the loader's tree walk (its check of the default workload) computes the same values
        let_values = lets_at(decl, tuple(args))
        walked = result_at(decl.stages[0].iterations.expr, tuple(args), let_values)
        assert ("ZeroDivisionError" if walked is UNDEFINED else walked) == expected
        if walked is not UNDEFINED:
            assert type(walked) is type(outcome(compiled.fields[0][0], *args))
        contract_expr = decl.contracts[0].expr
        assert outcome(truth, value_at, contract_expr, tuple(args), let_values) == expected_ok


@SETTINGS
@given(case(), st.lists(points, min_size=1, max_size=4))
def test_checked_paths_match_the_oracle(tree: Any, sample: list[dict[str, Any]]) -> None:
    lets, num, _ = tree
    doc = document(pipeline("p", PARAMS, [stage("S", iterations=num, memory=num)], lets))
    try:
        p = load_formulas(doc)["p"]
    except ArtifactError:  # invalid at the default workload: nothing to compare
        assume(False)
        return
    let_table = {e["name"]: e["expr"] for e in lets}
    for point in sample:
        expected = outcome(oracle, num, env_of(point), let_table)
        for call in (p.iterations, lambda s, **kw: Pipeline.iterations(p, s, **kw)):
            if expected == "ZeroDivisionError" or expected < 0 or expected.denominator != 1:
                try:
                    call("S", **point)
                except EvaluationError:
                    continue
                raise AssertionError(f"expected an EvaluationError at {point}")
            assert call("S", **point) == expected
        if expected == "ZeroDivisionError" or expected < 0:
            continue
        assert p.memory("S", **point) == expected
        if expected.denominator == 1:
            assert p.evaluate(**point)["S"].memory == expected


@st.composite
def terms_case(draw: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Lets and 2 or 3 memory terms (half of them under `abs`, so more documents load)."""
    lets = draw(let_list())
    scope = typed_lets(lets)
    terms = []
    for _ in range(draw(st.integers(2, 3))):
        term = draw(number(3, scope))
        terms.append({"k": "abs", "args": [term]} if draw(st.booleans()) else term)
    return lets, terms


@SETTINGS
@given(terms_case(), st.lists(points, min_size=1, max_size=4))
def test_memory_terms_match_the_oracle(tree: Any, sample: list[dict[str, Any]]) -> None:
    lets, terms = tree
    doc = document(pipeline("p", PARAMS, [stage("S", memory_terms=terms)], lets))
    try:
        p = load_formulas(doc)["p"]
    except ArtifactError:  # a term or the sum invalid at the default workload
        assume(False)
        return
    let_table = {e["name"]: e["expr"] for e in lets}
    for point in sample:
        expected = [outcome(oracle, t, env_of(point), let_table) for t in terms]
        # terms are evaluated in order: the first that divides by zero or is negative is the error
        bad = next((j for j, v in enumerate(expected) if v == "ZeroDivisionError" or v < 0), None)
        if bad is not None:
            try:
                p.memory_terms("S", **point)
            except EvaluationError as exc:
                assert exc.what == f"S.memory[{bad}]"
                assert str(exc).startswith(
                    "division by zero"
                    if expected[bad] == "ZeroDivisionError"
                    else f"p.S.memory[{bad}] is "
                )
                continue
            raise AssertionError(f"expected an EvaluationError at {point}")
        got = p.memory_terms("S", **point)
        assert got == tuple(expected)
        assert [type(v) is int for v in got] == [v.denominator == 1 for v in expected]
        assert p.memory("S", **point) == sum(expected)


WAN_STAGES = ["TextEncodingStage", "DenoisingStage", "DecodingStage", "Denoising", "nope"]
values = st.one_of(
    st.integers(-5, 1100), st.sampled_from([True, False, None, 4.0, "4", 81, 720, 1280])
)
wan_points = st.dictionaries(
    st.sampled_from(["steps", "frames", "height", "width", "cfg", "step"]), values, max_size=4
)


def result(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - comparing exact outcomes, whatever they are
        return (type(exc).__name__, str(exc))


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(WAN_STAGES), wan_points)
def test_fast_entries_behave_exactly_like_the_reference_methods(
    stage_name: str, point: dict[str, Any]
) -> None:
    from .conftest import WAN_PATH

    wan = _WAN.get("wan") or _WAN.setdefault("wan", load_formulas(WAN_PATH)["wan2_2_t2v_a14b"])
    for field in ("iterations", "memory", "time"):
        fast = result(getattr(wan, field), stage_name, **point)
        slow = result(getattr(Pipeline, field), wan, stage_name, **point)
        assert fast == slow
        if fast[0] == "ok" and field == "iterations":
            assert type(fast[1]) is int


_WAN: dict[str, Pipeline] = {}


def test_lets_are_lazy_like_inline_text() -> None:
    # let r = 12 / b; memory = if b == 0 then 0 else r: fine at b = 0, as if r were written inline
    from .builders import P, op

    lets = [
        let("r", op("div", I(12), P("b"))),
        let("s", op("add", {"k": "let", "name": "r"}, I(1))),
    ]
    memory = op("if", op("eq", P("b"), I(0)), I(0), {"k": "let", "name": "s"})
    doc = document(
        pipeline("p", PARAMS, [stage("S", memory=memory, time={"k": "let", "name": "r"})], lets)
    )
    p = load_formulas(doc)["p"]
    assert p.memory("S", b=0) == 0
    assert p.memory("S", b=4) == 4
    assert p.memory("S", b=5) == Fraction(17, 5)
    with pytest.raises(EvaluationError) as caught:
        p.time("S", b=0)
    assert caught.value.what == "S.time"
    with pytest.raises(InadmissibleError):  # b's range is [-3, 9]
        p.iterations("S", b=-4)
