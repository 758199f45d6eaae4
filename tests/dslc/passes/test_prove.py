"""The prover: proofs on the common path, counterexamples that are real, `unproven` otherwise."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dslc import ast
from dslc.compiler import compile_text
from dslc.diagnostics import Diagnostic
from dslc.interp import EvalError, Interpreter
from dslc.model import ResolvedPipeline
from dslc.passes.obligations import Obligation, collect
from dslc.passes.prove import Prover
from tests.examples import LANGUAGE_EXAMPLE, ROOT


def diagnostics(text: str) -> list[Diagnostic]:
    return list(compile_text(text, "t.wf").diagnostics)


def one(body: str) -> list[tuple[str, str, str]]:
    """(severity, code, message) of every diagnostic of a one-pipeline file."""
    return [(d.severity, d.code, d.message) for d in diagnostics("pipeline p {\n" + body + "\n}\n")]


def resolved(text: str) -> ResolvedPipeline:
    from dslc.compiler import compile_sources
    from dslc.source import SourceFile

    result = compile_sources([SourceFile("t.wf", text)], prove=False)
    assert result.program is not None, result.diagnostics
    return result.program.pipelines[0]


# -- the contract's example -----------------------------------------------------------------------


def test_language_example_has_no_diagnostics_at_all() -> None:
    assert diagnostics(LANGUAGE_EXAMPLE) == []


def test_language_example_is_proved_without_sympy_or_search() -> None:
    result = compile_text(LANGUAGE_EXAMPLE, "wan.wf")
    assert result.program is not None
    for pipeline in result.program.pipelines:
        prover = Prover(pipeline, symbolic=False)
        assert prover.run() == []
        assert all(ob.proved for ob in prover.results)
        assert not prover.searched


# -- planted violations ---------------------------------------------------------------------------


def test_negative_iterations_at_the_low_end() -> None:
    assert one("param steps: int = 5 in [0, 10]\nstage S { iterations = steps - 1 }") == [
        ("error", "negative", "'iterations' of stage 'S' is -1 at steps = 0")
    ]


def test_half_steps_is_not_an_integer_at_an_odd_point() -> None:
    [(severity, code, message)] = one(
        "param steps: int = 4 in [0, 10]\nstage S { iterations = steps / 2 }"
    )
    assert (severity, code) == ("error", "non-integer")
    steps = int(re.search(r"at steps = (\d+)$", message).group(1))  # type: ignore[union-attr]
    assert (
        steps % 2 == 1
        and message == f"'iterations' of stage 'S' is {Fraction(steps, 2)} at steps = {steps}"
    )


def test_half_steps_is_proved_under_an_even_contract() -> None:
    assert (
        one(
            "param steps: int = 4 in [0, 10] where steps % 2 == 0\nstage S { iterations = steps "
            "/ 2 }"
        )
        == []
    )


def test_residues_prove_integrality_over_an_infinite_range() -> None:
    assert (
        one("param frames: int = 8 where frames % 4 == 0\nstage S { iterations = frames * 3 / 4 }")
        == []
    )
    assert one("param n: int = 8\nstage S { iterations = n * (n + 1) / 2 }") == []


def test_division_by_zero_is_found_at_its_point() -> None:
    found = one(
        "param steps: int = 4 in [1, 10]\nstage S { iterations = 100 // (steps - 3) + 100 }"
    )
    assert found == [
        ("error", "division-by-zero", "division by zero in 'iterations' of stage 'S' at steps = 3")
    ]


def test_a_guarded_division_is_fine() -> None:
    assert (
        one(
            "param steps: int = 4 in [1, 10]\n"
            "stage S { iterations = if steps > 3 then 100 // (steps - 3) else 0 }"
        )
        == []
    )


@pytest.mark.parametrize(
    "guard", ["steps != 3", "not (steps == 3)", "steps - 3 != 0", "steps < 3 or steps > 3"]
)
def test_guards_in_many_spellings_over_a_large_range(guard: str) -> None:
    text = (
        f"param steps: int = 4 in [1, 100000]\nstage S {{ memory ~ if {guard} then 1 / (steps "
        "- 3) ** 2 else 0 }"
    )
    assert one(text) == []


def test_and_or_short_circuit_guards_a_contract() -> None:
    assert one("param steps: int = 4 in [0, 100000] where steps == 0 or 100 % steps == 0") == []
    assert one("param steps: int = 4 in [0, 100000] where steps > 0 and 100 % steps == 0") == []


def test_a_square_is_never_reported_negative() -> None:
    found = one(
        "param steps: int = 4 in [0, 1000000]\nstage S { memory ~ (steps - 5) * (steps - 5) }"
    )
    assert all(severity == "warning" for severity, _, _ in found)
    assert (
        one("param steps: int = 4 in [0, 10]\nstage S { memory ~ steps * steps - 10 * steps + 25 }")
        == []
    )


def test_a_contract_excludes_the_bad_point() -> None:
    assert (
        one(
            "param steps: int = 4 in [0, 10] where steps != 3\nstage S { memory ~ 1 / (steps - "
            "3) ** 2 }"
        )
        == []
    )


def test_a_contract_that_divides_by_zero() -> None:
    assert one("param steps: int = 4 in [0, 10] where 100 % steps == 0") == [
        ("error", "division-by-zero", "modulo by zero in the contract of 'steps' at steps = 0")
    ]


def test_a_let_is_checked_where_it_is_defined() -> None:
    assert one(
        "param steps: int = 4 in [0, 10]\nlet r = 1 / (steps - 3)\nstage S { memory ~ 1 }"
    ) == [("error", "division-by-zero", "division by zero in let 'r' at steps = 3")]


def test_a_counterexample_past_any_sampled_value_is_shrunk_to_the_edge() -> None:
    assert one("param n: int = 4\nstage S { iterations = 10 ** 20 - n }") == [
        ("error", "negative", "'iterations' of stage 'S' is -1 at n = 100000000000000000001")
    ]


def test_the_point_names_only_the_params_used_in_declaration_order() -> None:
    found = one(
        "param a: int = 5 in [0, 100000]\nparam unused: int = 1\nparam c: bool = true\n"
        "stage S { memory ~ if c then a else a - 10 }"
    )
    assert found == [("error", "negative", "'memory' of stage 'S' is -5 at a = 5, c = false")]


def test_a_constant_formula() -> None:
    assert one("stage S { iterations = 1 - 2 }") == [
        ("error", "negative", "'iterations' of stage 'S' is always -1")
    ]


def test_an_inherited_field_names_the_child() -> None:
    text = (
        "pipeline p {\nparam a: int = 5 in [1, 10]\nstage S { memory ~ a - 1 }\n}\n"
        "pipeline q extends p {\nparam a: int = 5 in [0, 10]\n}\n"
    )
    assert [d.message for d in diagnostics(text)] == [
        "'memory' of stage 'S' in pipeline 'q' is -1 at a = 0"
    ]


def test_true_but_unprovable_is_a_warning() -> None:
    found = one("param a: int = 4\nstage S { memory ~ a * a * a - a * a }")
    assert found == [("warning", "unproven", "cannot prove that 'memory' of stage 'S' is >= 0")]
    found = one(
        "param a: int = 4 where a % 2 == 0\nparam b: int = 2 where b % 2 == 0\n"
        "stage S { iterations = max(a, b) / 2 }"
    )
    assert found == [
        ("warning", "unproven", "cannot prove that 'iterations' of stage 'S' is an integer")
    ]


def test_small_domains_are_proved_exhaustively() -> None:
    assert one("param a: int = 4 in [0, 60]\nstage S { memory ~ a * a * a - a * a }") == []


def test_a_deep_chain_of_lets_does_not_recurse() -> None:
    lets = "\n".join(f"let l{i} = l{i - 1} + 1" for i in range(1, 400))
    assert (
        one(
            f"param a: int = 4 in [0, 10]\nlet l0 = a\n{lets}\nstage S {{ iterations = l399 // 2 }}"
        )
        == []
    )


def test_the_prover_does_not_import_sympy_on_the_common_path() -> None:
    code = (
        "import sys; from dslc.compiler import compile_text; from tests.examples import "
        "LANGUAGE_EXAMPLE; "
        "assert not compile_text(LANGUAGE_EXAMPLE).diagnostics; print('sympy' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


# -- properties -----------------------------------------------------------------------------------

NAMES = ("a", "b")
_CODES = {"divisor": "division-by-zero", "nonneg": "negative", "integer": "non-integer"}
ATOMS = ("a", "b", "0", "1", "2", "3", "5", "0.5")


def _formula(depth: int, atoms: tuple[str, ...] = ATOMS + ("l",)) -> st.SearchStrategy[str]:
    if depth == 0:
        return st.sampled_from(atoms)
    sub = _formula(depth - 1, atoms)
    binary = st.tuples(sub, st.sampled_from(["+", "-", "*", "/", "//", "%"]), sub).map(
        lambda t: f"({t[0]} {t[1]} {t[2]})"
    )
    call = st.tuples(
        st.sampled_from(["min", "max", "abs", "floor", "ceil", "square"]), sub, sub
    ).map(
        lambda t: (
            f"({t[1]}) ** 2"
            if t[0] == "square"
            else f"{t[0]}({t[1]}, {t[2]})"
            if t[0] in ("min", "max")
            else f"{t[0]}({t[1]})"
        )
    )
    atom = st.tuples(sub, st.sampled_from(["<", "<=", "!=", "==", ">"]), sub).map(
        lambda t: f"{t[0]} {t[1]} {t[2]}"
    )
    cond = st.one_of(
        atom,
        st.just("c"),
        st.just("not c"),
        st.tuples(atom, st.sampled_from(["and", "or"]), atom).map(
            lambda t: f"{t[0]} {t[1]} {t[2]}"
        ),
    )
    guarded = st.tuples(cond, sub, sub).map(lambda t: f"(if {t[0]} then {t[1]} else {t[2]})")
    return st.one_of(sub, binary, call, guarded)


@st.composite
def pipelines(draw: st.DrawFn, infinite: bool = False) -> tuple[str, dict[str, tuple[int, int]]]:
    """A pipeline over params a and b, and the window of their values a brute force checks (their
    whole ranges, or the first values of an infinite range)."""
    ranges = {}
    lines = []
    for name in NAMES:
        lo = draw(st.integers(-3, 4))
        hi = lo + draw(st.integers(0, 12))
        default = draw(st.integers(lo, hi))
        contract = draw(
            st.sampled_from(
                ["", f" where {name} % 2 == {default % 2}", f" where {name} != {default + 1}"]
            )
        )
        lines.append(
            f"param {name}: int = {default} in [{lo}, {'inf' if infinite else hi}]{contract}"
        )
        ranges[name] = (lo, hi)
    lines.append(f"param c: bool = {draw(st.sampled_from(['true', 'false']))}")
    lines.append(f"let l = {draw(_formula(1, ATOMS))}")
    lines.append(f"stage S {{ iterations = {draw(_formula(2))}\nmemory ~ {draw(_formula(2))} }}")
    return "pipeline p {\n" + "\n".join(lines) + "\n}\n", ranges


def _brute_force(
    pipeline: ResolvedPipeline, ranges: dict[str, tuple[int, int]]
) -> set[tuple[str, int, int]]:
    """Every (code, line, column) a perfect checker would report as an error (within `ranges`)."""
    expected: set[tuple[str, int, int]] = set()
    prover = Prover(pipeline)
    obligations = collect(pipeline, prover.ctx)
    for values in itertools.product(
        *(range(lo, hi + 1) for lo, hi in ranges.values()), (False, True)
    ):
        point: dict[str, Fraction | bool] = {name: Fraction(v) for name, v in zip(ranges, values)}
        point["c"] = bool(values[-1])
        for ob in obligations:
            if prover.violates_at(ob, point) is not None:
                expected.add(_where(ob))
    return expected


def _where(ob: Obligation) -> tuple[str, int, int]:
    """The (code, line, column) of `ob`'s diagnostic: a division's divisor, else the node."""
    node = ob.node.right if ob.kind == "divisor" and isinstance(ob.node, ast.Binary) else ob.node
    assert node.span is not None
    return _CODES[ob.kind], node.span.line, node.span.column


def _admissible_and_violating(pipeline: ResolvedPipeline, ob: Obligation, point: dict) -> bool:
    """An independent check of a reported counterexample."""
    for param in pipeline.params:
        value = point[param.name]
        if param.type == "bool":
            continue
        if not (
            param.lo <= value and (param.hi is None or value <= param.hi) and value.denominator == 1
        ):
            return False
    interp = Interpreter(point, pipeline.lets)
    try:
        if not all(interp.eval(where) is True for _, where in pipeline.contracts):
            return False
    except EvalError:
        return False
    try:
        value = interp.eval(ob.expr)
    except EvalError as exc:
        return ob.kind == "divisor" and exc.node is ob.node
    assert isinstance(value, Fraction), value
    if ob.kind == "nonneg":
        return value < 0
    if ob.kind == "integer":
        return value.denominator != 1
    return False


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pipelines())
def test_every_counterexample_is_real_and_no_violation_is_missed(case: tuple[str, dict]) -> None:
    _check_against_brute_force(*case, symbolic=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pipelines(infinite=True))
def test_proofs_over_infinite_ranges_are_sound(case: tuple[str, dict]) -> None:
    _check_against_brute_force(*case, symbolic=True)


def _check_against_brute_force(
    text: str, ranges: dict[str, tuple[int, int]], *, symbolic: bool
) -> None:
    result = compile_text(text, "t.wf")
    if result.program is None and any(
        d.code not in ("negative", "non-integer", "division-by-zero", "unproven")
        for d in result.diagnostics
    ):
        return  # e.g. the default workload divides by zero in a contract: not the prover's
    pipeline = resolved(text)
    prover = Prover(pipeline, exhaustive=0, symbolic=symbolic)
    reported = prover.run()
    for ob in prover.results:
        if ob.refuted is not None:
            assert _admissible_and_violating(pipeline, ob, ob.refuted[0]), (
                text,
                ob.what,
                ob.refuted,
            )
    errors = {(d.code, d.span.line, d.span.column) for d in reported if d.is_error and d.span}
    warned = {(d.span.line, d.span.column) for d in reported if not d.is_error and d.span}
    truth = _brute_force(pipeline, ranges)
    finite = all(p.hi is not None for p in pipeline.params)  # the brute force sees every value
    assert errors <= truth or not finite, (text, errors - truth)
    for ob in prover.results:  # a real violation is never proved away
        if ob.proved:
            assert _where(ob) not in truth, (text, ob.what, ob.kind)
    for code, line, column in truth - errors:
        assert (line, column) in warned, (text, code, line, column)


@settings(max_examples=60, deadline=None)
@given(
    lo=st.integers(-50, 50),
    width=st.integers(0, 10**6),
    data=st.data(),
    modulus=st.sampled_from([None, 2, 3, 16]),
)
def test_a_planted_negative_is_always_found(
    lo: int, width: int, data: st.DataObject, modulus: int | None
) -> None:
    hi = lo + width
    step = modulus or 1
    first = lo + (-lo) % step  # the first admissible value
    if first > hi:
        return
    default = data.draw(st.integers(first, hi).map(lambda v: v - (v - first) % step))
    k = data.draw(st.integers(first + 1, first + 10**7))  # steps = first gives first - k < 0
    contract = f" where steps % {modulus} == 0" if modulus else ""
    found = one(
        f"param steps: int = {default} in [{lo}, {hi}]{contract}\nstage S {{ iterations = steps "
        f"- {k} }}"
    )
    [(severity, code, message)] = found
    assert (severity, code) == ("error", "negative")
    steps = int(re.search(r"is (-\d+) at steps = (-?\d+)$", message).group(2))  # type: ignore[union-attr]
    assert lo <= steps <= hi and steps < k and steps % step == 0
    assert message == f"'iterations' of stage 'S' is {steps - k} at steps = {steps}"
