"""Static types: booleans never mix with numbers, lists only where allowed, `**` and arity
checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from dslc import ast
from dslc.codes import Code
from dslc.diagnostics import Diagnostic, did_you_mean, error
from dslc.fmt import format_expr
from dslc.interp import EvalError, LimitError, evaluate
from dslc.limits import (
    MAX_CONSTANT_BITS,
    MAX_DEGREE,
    MAX_EXPONENT,
    MAX_LIST_ITEMS,
    MAX_MEASURE_TERMS,
)
from dslc.model import (
    BOOL,
    INT,
    LIST,
    RAT,
    ResolvedParam,
    ResolvedPipeline,
    ResolvedStage,
    list_items,
)
from dslc.passes.members import Members

_NUMERIC = (RAT, INT)
_LIST_FUNCTIONS = ("len", "sum", "min", "max")


def _describe(kind: str) -> str:
    return {INT: "an integer", RAT: "a number", BOOL: "a boolean", LIST: "a list"}[kind]


def constant_exponent(node: ast.Binary) -> tuple[int | None, Diagnostic | None]:
    """The value of a `**` exponent, which must be a constant integer in [0, MAX_EXPONENT]."""
    if any(isinstance(n, ast.Name) for n in ast.walk(node.right)):
        return None, error(
            Code.TYPE,
            "the exponent of '**' must be a constant",
            node.right.span,
            hints=["multiply it out, or use a constant such as 'x ** 2'"],
        )
    try:
        value = evaluate(node.right)
    except LimitError as exc:
        return None, error(Code.LIMIT, f"the exponent of '**' is too large: {exc}", exc.node.span)
    except EvalError as exc:
        return None, error(
            Code.TYPE, f"the exponent of '**' cannot be evaluated: {exc}", node.right.span
        )
    if not isinstance(value, Fraction):
        return None, error(Code.TYPE, "the exponent of '**' must be a number", node.right.span)
    if value.denominator != 1 or value < 0:
        return None, error(
            Code.TYPE,
            f"the exponent of '**' must be a non-negative integer, not {value}",
            node.right.span,
        )
    if value > MAX_EXPONENT:
        return None, error(
            Code.LIMIT, f"exponent {value} exceeds the limit of {MAX_EXPONENT}", node.right.span
        )
    return int(value), None


HINT_OPERAND_CHARS = 40  # a longer operand is called "it" in a hint


def _operand_hint(expr: ast.Expr, kind: str, wanted: tuple[str, ...]) -> tuple[str, ...]:
    """How to turn the operand itself (named by its own text) into what was wanted."""
    text = format_expr(expr)
    if len(text) > HINT_OPERAND_CHARS:
        text = "..."
    if kind == BOOL:
        return (f"use 'if {text} then 1 else 0' for a number",)
    if BOOL in wanted and isinstance(expr, ast.Num):
        return ("write 'true' or 'false'",)
    if BOOL in wanted and kind in _NUMERIC:
        return (f"compare it, e.g. '{f'({text})' if isinstance(expr, ast.IfElse) else text} > 0'",)
    return ()


class TypeChecker:
    """Infers the type of each expression of a pipeline and collects every misuse."""

    def __init__(self, env: Mapping[str, str], list_sizes: Mapping[str, int] | None = None):
        self.env = dict(env)
        self.list_sizes = dict(list_sizes or {})
        self.degrees: dict[str, int] = {}
        self.problems: list[Diagnostic] = []

    def _fail(self, code: Code, message: str, node: ast.Expr, hints: tuple[str, ...] = ()) -> None:
        self.problems.append(error(code, message, node.span, hints=hints))

    def expect(self, expr: ast.Expr, wanted: tuple[str, ...], what: str) -> str | None:
        kind = self.infer(expr)
        if kind is not None and kind not in wanted:
            hint = _operand_hint(expr, kind, wanted)
            self._fail(
                Code.TYPE,
                f"{what} must be {_describe(wanted[0])}, not {_describe(kind)}",
                expr,
                hint,
            )
            return None
        return kind

    def infer(self, expr: ast.Expr, *, list_ok: bool = False) -> str | None:
        """The type of `expr`, or None when it is ill-typed (already reported)."""
        if isinstance(expr, ast.Num):
            return INT if expr.value.denominator == 1 else RAT
        if isinstance(expr, ast.Bool):
            return BOOL
        if isinstance(expr, ast.Inf):
            self._fail(Code.TYPE, "'inf' may only be a range's upper bound", expr)
            return None
        if isinstance(expr, ast.Name):
            kind = self.env.get(expr.id)
            if kind == LIST and not list_ok:
                self._fail(
                    Code.TYPE,
                    f"'{expr.id}' is a list; use it in len(), sum(), min() or max()",
                    expr,
                )
                return None
            return kind
        if isinstance(expr, ast.ListLit):
            if not list_ok:
                self._fail(
                    Code.TYPE,
                    "a list may only be a let's value, a memory or time measure's terms or the "
                    "argument of len, sum, min or max",
                    expr,
                )
                return None
            if len(expr.items) > MAX_LIST_ITEMS:
                self._fail(
                    Code.LIMIT,
                    f"list has {len(expr.items):,} items; the limit is {MAX_LIST_ITEMS}",
                    expr,
                )
            for item in expr.items:
                self.expect(item, _NUMERIC, "a list item")
            return LIST
        if isinstance(expr, ast.Unary):
            if expr.op == "not":
                return BOOL if self.expect(expr.operand, (BOOL,), "the operand of 'not'") else None
            return self.expect(expr.operand, _NUMERIC, "the operand of '-'")
        if isinstance(expr, ast.Binary):
            return self._binary(expr)
        if isinstance(expr, ast.IfElse):
            self.expect(expr.cond, (BOOL,), "an 'if' condition")
            then, orelse = self.infer(expr.then), self.infer(expr.orelse)
            if then is None or orelse is None:
                return None
            if (then == BOOL) != (orelse == BOOL):
                self._fail(
                    Code.TYPE,
                    f"'if' branches must have one type, not {_describe(then)} and "
                    f"{_describe(orelse)}",
                    expr,
                )
                return None
            return then if then == orelse else RAT
        if isinstance(expr, ast.Call):
            return self._call(expr)
        return None

    def _binary(self, expr: ast.Binary) -> str | None:
        op = expr.op
        if op in ("and", "or"):
            left = self.expect(expr.left, (BOOL,), f"an operand of '{op}'")
            right = self.expect(expr.right, (BOOL,), f"an operand of '{op}'")
            return BOOL if left and right else None
        if op in ("==", "!="):
            left, right = self.infer(expr.left), self.infer(expr.right)
            if left and right and (left == BOOL) != (right == BOOL):
                self._fail(
                    Code.TYPE, f"cannot compare {_describe(left)} with {_describe(right)}", expr
                )
            return BOOL
        if op == "**":
            base = self.expect(expr.left, _NUMERIC, "the base of '**'")
            exponent, problem = constant_exponent(expr)
            if problem is not None:
                self.problems.append(problem)
                return None
            if exponent and constant_bits(expr.left) * exponent > MAX_CONSTANT_BITS:
                self._fail(
                    Code.LIMIT, f"this power of a constant exceeds {MAX_CONSTANT_BITS:,} bits", expr
                )
                return None
            return base
        left = self.expect(expr.left, _NUMERIC, f"an operand of '{op}'")
        right = self.expect(expr.right, _NUMERIC, f"an operand of '{op}'")
        if left is None or right is None:
            return None
        if op in ast.COMPARISONS:
            return BOOL
        if op == "//":
            return INT
        if op == "/":
            return RAT
        return INT if left == right == INT else RAT

    def _call(self, expr: ast.Call) -> str | None:
        func, args = expr.func, expr.args
        if func not in ast.FUNCTIONS:
            return None  # reported by name resolution
        single_list = len(args) == 1 and (
            isinstance(args[0], ast.ListLit)
            or (isinstance(args[0], ast.Name) and self.env.get(args[0].id) == LIST)
        )
        if func in _LIST_FUNCTIONS and (func in ("len", "sum") or single_list):
            if len(args) != 1:
                self._fail(
                    Code.TYPE, f"{func}() takes exactly one list, got {len(args)} arguments", expr
                )
                return None
            if self.infer(args[0], list_ok=True) != LIST:
                self._fail(
                    Code.TYPE,
                    f"{func}() takes a list",
                    args[0],
                    (f"write {func}([a, b, ...])",) if func == "sum" else (),
                )
                return None
            size = self._list_size(args[0])
            if func in ("min", "max") and size == 0:
                self._fail(Code.TYPE, f"{func}() of an empty list", expr)
                return None
            if func == "len":
                return INT
            return self._list_item_type(args[0])
        if func in ("ceil", "floor", "abs") and len(args) != 1:
            self._fail(Code.TYPE, f"{func}() takes exactly one argument, got {len(args)}", expr)
            return None
        if not args:
            self._fail(Code.TYPE, f"{func}() takes at least one argument", expr)
            return None
        kinds = [self.expect(arg, _NUMERIC, f"an argument of {func}()") for arg in args]
        if None in kinds:
            return None
        if func in ("ceil", "floor"):
            return INT
        return INT if all(k == INT for k in kinds) else RAT

    def _list_size(self, node: ast.Expr) -> int:
        if isinstance(node, ast.ListLit):
            return len(node.items)
        return self.list_sizes.get(node.id, 1) if isinstance(node, ast.Name) else 1

    def _list_item_type(self, node: ast.Expr) -> str:
        if isinstance(node, ast.Name):
            return self.env.get(node.id + "[]", RAT)
        kinds = (
            {self.infer(item) for item in node.items} if isinstance(node, ast.ListLit) else {RAT}
        )
        return INT if kinds <= {INT} else RAT


def constant_bits(expr: ast.Expr) -> int:
    """An upper bound of the bit length of a constant expression's value (0 when it names
    anything).
    """
    if isinstance(expr, ast.Num):
        return max(expr.value.numerator.bit_length(), expr.value.denominator.bit_length())
    if isinstance(expr, (ast.Name, ast.Bool, ast.Inf)):
        return 0
    kids = [constant_bits(child) for child in ast.children(expr)]
    if isinstance(expr, ast.Binary):
        if expr.op == "**":
            exponent, _ = constant_exponent(expr)
            return kids[0] * (exponent or 0)
        if expr.op in ("*", "/", "//", "%"):
            return kids[0] + kids[1]
        return max(kids) + 1
    return max(kids, default=0) + 1


def degree(expr: ast.Expr, let_degrees: Mapping[str, int]) -> int:
    """An upper bound of the polynomial degree of `expr` with lets inlined (bounds blow-ups)."""
    if isinstance(expr, ast.Name):
        return let_degrees.get(expr.id, 1)
    if isinstance(expr, (ast.Num, ast.Bool, ast.Inf)):
        return 0
    kids = [degree(child, let_degrees) for child in ast.children(expr)]
    if isinstance(expr, ast.Binary):
        if expr.op == "**":
            exponent, _ = constant_exponent(expr)
            return kids[0] * (exponent or 0)
        if expr.op in ("*", "/", "//", "%"):
            return kids[0] + kids[1]
    return max(kids, default=0)


def check_types(
    pipeline: ResolvedPipeline, members: Members | None = None
) -> tuple[dict[str, str], list[Diagnostic]]:
    """Type every param, let (in order), contract and stage field; return the name -> type map
    (`members`: fields the compilation typed already, reused where what they read is the same)."""
    env: dict[str, str] = {}
    problems: list[Diagnostic] = []
    for param in pipeline.params:
        if param.type not in ast.TYPES:
            problems.append(
                error(
                    Code.TYPE,
                    f"unknown type '{param.type}'; a param is 'int' or 'bool'",
                    param.decl.type_span,
                    hints=did_you_mean(param.type, ast.TYPES),
                )
            )
            continue
        env[param.name] = param.type
    checker = TypeChecker(env)
    degrees: dict[str, int] = {}
    for let in pipeline.lets:
        kind = checker.infer(let.value, list_ok=True)
        if kind is not None:
            checker.env[let.name] = kind
            if kind == LIST and isinstance(let.value, ast.ListLit):
                checker.list_sizes[let.name] = len(let.value.items)
                checker.env[let.name + "[]"] = checker._list_item_type(let.value)
        degrees[let.name] = degree(let.value, degrees)
        if degrees[let.name] > MAX_DEGREE:
            problems.append(
                error(
                    Code.LIMIT,
                    f"'{let.name}' has polynomial degree {degrees[let.name]:,}; the "
                    f"limit is {MAX_DEGREE}",
                    let.name_span,
                )
            )
            degrees[let.name] = 0
    for param in pipeline.params:
        if param.where is not None:
            checker.expect(param.where, (BOOL,), "a 'where' contract")
        _check_constants(checker, param)
    lets = {let.name: let.value for let in pipeline.lets}
    for stage in pipeline.stages:
        for field in stage.fields.values():
            problems += _field_once(checker, stage, field, lets, degrees, members)
    for call in pipeline.calls:  # a number or a boolean: infer reports a list
        if checker.infer(call.value) is not None:
            problems += _degree_limit(call.value, f"call '{call.arg}'", degrees)
    return {
        k: v for k, v in checker.env.items() if not k.endswith("[]")
    }, problems + checker.problems


def _field_once(
    checker: TypeChecker,
    stage: ResolvedStage,
    field: ast.Field,
    lets: Mapping[str, ast.Expr],
    degrees: Mapping[str, int],
    members: Members | None,
) -> list[Diagnostic]:
    """`_check_field`, or what it found for the same field in a stage of the same name where each
    name it reads had the same type, list, size and degree (an inherited field: issue 23)."""
    if members is None:
        return _check_field(checker, stage, field, lets, degrees)
    names, _ = members.names(field.value)
    env, sizes = checker.env, checker.list_sizes
    reads = tuple(
        (n, env.get(n), env.get(n + "[]"), sizes.get(n), degrees.get(n), id(lets.get(n)))
        for n in sorted(names)
    )
    key = (id(field), stage.name, reads)
    found = members.fields.get(key)
    if found is not None and found[0] is field:
        checker.problems += found[1]
        return list(found[2])
    before = len(checker.problems)
    returned = _check_field(checker, stage, field, lets, degrees)
    members.fields[key] = (field, tuple(checker.problems[before:]), tuple(returned))
    return returned


def _check_field(
    checker: TypeChecker,
    stage: ResolvedStage,
    field: ast.Field,
    lets: Mapping[str, ast.Expr],
    degrees: Mapping[str, int],
) -> list[Diagnostic]:
    """A field is a number; only a measure (`memory`, `time`) may be a list (literal or list let)
    of numeric terms."""
    value = field.value
    is_list = isinstance(value, ast.ListLit) or (
        isinstance(value, ast.Name) and checker.env.get(value.id) == LIST
    )
    if is_list and field.name not in ast.MEASURES:
        checker._fail(
            Code.TYPE,
            f"'{field.name}' cannot be a list: only a memory or time measure takes a list of terms",
            value,
            ("use the list in len(), sum(), min() or max()",),
        )
        return []
    if not is_list:
        checker.expect(value, _NUMERIC, f"'{field.name}'")
        return _degree_limit(value, f"'{field.name}' of stage '{stage.name}'", degrees)
    items = list_items(value, lets) or ()
    if not items:
        checker._fail(Code.TYPE, f"a {field.name} measure needs at least one term", value)
        return []
    if len(items) > MAX_MEASURE_TERMS:
        return [
            error(
                Code.LIMIT,
                f"'{field.name}' of stage '{stage.name}' has {len(items)} terms; the limit is "
                f"{MAX_MEASURE_TERMS}",
                value.span,
            )
        ]
    if not isinstance(value, ast.ListLit):
        return []  # a list let's items are typed and bounded at the let
    problems = []
    for index, item in enumerate(items, 1):
        label = f"term {index} of '{field.name}'" if len(items) > 1 else f"'{field.name}'"
        checker.expect(item, _NUMERIC, label)
        problems += _degree_limit(item, f"{label} of stage '{stage.name}'", degrees)
    return problems


def _degree_limit(expr: ast.Expr, what: str, degrees: Mapping[str, int]) -> list[Diagnostic]:
    """A field's (or term's) degree bound, lets inlined: keeps sympy and the prover from blowing
    up.
    """
    if degree(expr, degrees) > MAX_DEGREE:
        return [error(Code.LIMIT, f"{what} has a polynomial degree above {MAX_DEGREE}", expr.span)]
    return []


def _check_constants(checker: TypeChecker, param: ResolvedParam) -> None:
    """Defaults and bounds are numbers for int params (integrality is the domain pass's)."""
    default = param.default_decl.default
    if param.type == "bool":
        checker.expect(default, (BOOL,), f"the default of bool param '{param.name}'")
        if param.decl.lo is not None:
            checker._fail(
                Code.TYPE, f"bool param '{param.name}' cannot have a range", param.decl.lo
            )
        return
    if param.type != "int":
        return
    checker.expect(default, _NUMERIC, f"the default of int param '{param.name}'")
    if param.decl.lo is not None:
        checker.expect(param.decl.lo, _NUMERIC, "a range's lower bound")
    if param.decl.hi is not None and not isinstance(param.decl.hi, ast.Inf):
        checker.expect(param.decl.hi, _NUMERIC, "a range's upper bound")
