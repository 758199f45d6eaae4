"""The loader's check of each pipeline's default workload, by walking its validated trees.

Checking the defaults needs every formula's value at one point, once: walking the trees takes
far less than generating and compiling code for every pipeline, so the loader finds a broken
artifact at load while code waits for a pipeline's first use (runtime/formulas.py). The walk
computes exactly what the generated code computes (the same Python operations, in the same
order, each let once, only the taken branch of an `if`), so its cost is the one the loader
bounded (artifact/cost.py), and it agrees with the compiled closures at every point.
"""

from __future__ import annotations

from fractions import Fraction
from math import ceil, floor

from artifact.errors import ArtifactError
from artifact.ir import Expr, PipelineDecl
from artifact.spelling import file_value
from runtime.evaluator import FIELD_NAMES, UNDEFINED, valid_value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    #: A formula's value mid-walk: an int, a Fraction, a bool, or UNDEFINED (a let that divided by
    #: zero, raising where it is used). Deliberately dynamic: the walk applies Python's own
    #: operators to whatever the validated tree combines, and what makes each operation valid is
    #: the loader's type check of that tree, which no static type of this walker can follow.
    Value = Any

__all__ = ["check_defaults", "lets_at", "result_at", "value_at"]

_BINARY: dict[str, Callable[[Value, Value], Value]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "div": Fraction,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}


def value_at(e: Expr, params: tuple[int | bool, ...], lets: list[Value]) -> Value:
    """`e`'s value at a point (`lets` computed before); raises ZeroDivisionError as the generated
    code does, and passes UNDEFINED (a let that divided by zero) on where the code would."""
    kind = e.kind
    if kind == "param":
        return params[e.ref]  # type: ignore[index]
    if kind == "let":
        return lets[e.ref]  # type: ignore[index]
    if kind in ("int", "frac", "bool"):
        return e.value
    args = e.args
    if kind == "if":
        chosen = args[1] if value_at(args[0], params, lets) else args[2]
        return value_at(chosen, params, lets)
    if kind == "and":
        return value_at(args[0], params, lets) and value_at(args[1], params, lets)
    if kind == "or":
        return value_at(args[0], params, lets) or value_at(args[1], params, lets)
    first = value_at(args[0], params, lets)
    if kind in _BINARY:
        return _BINARY[kind](first, value_at(args[1], params, lets))
    if kind == "not":
        return not first
    if kind == "neg":
        return -first
    if kind == "abs":
        return abs(first)
    if kind in ("floor", "ceil"):  # the code calls them only on rationals
        if args[0].type == "int":
            return first
        return floor(first) if kind == "floor" else ceil(first)
    if kind == "pow":
        return first**e.exp
    values = [first]
    for arg in args[1:]:  # min, max: a plain loop, one Python frame per tree level
        values.append(value_at(arg, params, lets))
    if len(values) == 1:
        return first
    return min(values) if kind == "min" else max(values)


def lets_at(decl: PipelineDecl, params: tuple[int | bool, ...]) -> list[Value]:
    """Every let's value at a point, each once, in order; one dividing by zero is UNDEFINED (it
    raises only where a taken branch uses it, as in the generated code)."""
    lets: list[Value] = []
    for let in decl.lets:
        try:
            lets.append(value_at(let.expr, params, lets))
        except ZeroDivisionError:
            lets.append(UNDEFINED)
    return lets


def result_at(e: Expr, params: tuple[int | bool, ...], lets: list[Value]) -> Value:
    """A formula's final value: UNDEFINED where it divides by zero, integral Fractions as ints."""
    try:
        value = value_at(e, params, lets)
    except ZeroDivisionError:
        return UNDEFINED
    if type(value) is Fraction and value.denominator == 1:
        return value.numerator
    return value


def check_defaults(decl: PipelineDecl) -> tuple[int, ...]:
    """Each stage's iterations at the default workload, which must be admissible and evaluable;
    else ArtifactError naming the first broken contract, field, memory term or the calls."""
    where = f"pipelines[{decl.index}]"
    params = tuple(p.default for p in decl.params)
    lets = lets_at(decl, params)
    for k, contract in enumerate(decl.contracts):
        try:
            ok = bool(value_at(contract.expr, params, lets))
        except ZeroDivisionError:
            ok = False
        if not ok:
            message = f"the default workload violates `{contract.text}`"
            raise ArtifactError(f"{where}.contracts[{k}]", message)
    iterations = []
    checks = []  # (field, expr, path): every stage's fields, then memory terms, then time terms
    for s, stage in enumerate(decl.stages):
        for k, field in enumerate((stage.iterations, stage.memory, stage.time)):
            checks.append((k, field.expr, f"{where}.stages[{s}].{FIELD_NAMES[k]}.expr"))
    for s, stage in enumerate(decl.stages):
        for j, term in enumerate(stage.memory_terms):
            checks.append((1, term.expr, f"{where}.stages[{s}].memory.terms[{j}].expr"))
    for s, stage in enumerate(decl.stages):
        for j, term in enumerate(stage.time_terms):
            checks.append((2, term.expr, f"{where}.stages[{s}].time.terms[{j}].expr"))
    for k, expr, path in checks:
        value = result_at(expr, params, lets)
        if value is UNDEFINED or not valid_value(k, value):
            problem = "division by zero" if value is UNDEFINED else file_value(value)
            message = f"at the default workload this is {problem}, which is invalid"
            raise ArtifactError(path, message)
        if k == 0:
            iterations.append(value)
    for call in decl.calls:  # values of any type; only a division by zero is invalid
        if result_at(call.expr, params, lets) is UNDEFINED:
            message = "at the default workload this is division by zero, which is invalid"
            raise ArtifactError(f"{where}.calls", message)
    return tuple(iterations)
