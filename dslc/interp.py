"""A small exact interpreter over the AST: the compiler's oracle for checks, `eval` and tests."""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from dslc import ast
from dslc.limits import MAX_EXPONENT

Value = Fraction | bool | tuple[Fraction, ...]


class EvalError(Exception):
    """An expression cannot be evaluated at a point (division by zero, a bad operand)."""

    def __init__(self, message: str, node: ast.Expr):
        super().__init__(message)
        self.node = node


class LimitError(EvalError):
    """Evaluating would exceed a resource limit (an exponent over MAX_EXPONENT)."""


class _Failed:
    """A let whose evaluation failed; the failure is raised only where the let is used."""

    def __init__(self, error: EvalError):
        self.error = error


def _num(value: Value, node: ast.Expr) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, Fraction):
        raise EvalError("expected a number", node)
    return value


def _bool(value: Value, node: ast.Expr) -> bool:
    if not isinstance(value, bool):
        raise EvalError("expected a boolean", node)
    return value


def _floordiv(a: Fraction, b: Fraction, node: ast.Expr) -> Fraction:
    if b == 0:
        raise EvalError("division by zero", node)
    return Fraction(math.floor(a / b))


def _binary(op: str, a: Value, b: Value, node: ast.Binary) -> Value:
    if op in ("==", "!="):
        if isinstance(a, bool) != isinstance(b, bool):
            raise EvalError("cannot compare a boolean with a number", node)
        return (a == b) if op == "==" else (a != b)
    x, y = _num(a, node.left), _num(b, node.right)
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if op == "/":
        if y == 0:
            raise EvalError("division by zero", node)
        return x / y
    if op == "//":
        return _floordiv(x, y, node)
    if op == "%":
        return x - y * _floordiv(x, y, node)
    if op == "**":
        if y.denominator == 1 and y > MAX_EXPONENT:
            raise LimitError(f"exponent {y} exceeds the limit of {MAX_EXPONENT}", node.right)
        if y.denominator != 1 or not 0 <= y <= MAX_EXPONENT:
            raise EvalError(f"exponent must be an integer in [0, {MAX_EXPONENT}]", node.right)
        return x ** int(y)
    return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]


def _call(func: str, args: list[Value], node: ast.Call) -> Value:
    if func in ("len", "sum") or (
        func in ("min", "max") and len(args) == 1 and isinstance(args[0], tuple)
    ):
        items = args[0]
        if not isinstance(items, tuple):
            raise EvalError(f"{func}() takes a list", node)
        if func == "len":
            return Fraction(len(items))
        if func == "sum":
            return sum(items, Fraction(0))
        if not items:
            raise EvalError(f"{func}() of an empty list", node)
        return min(items) if func == "min" else max(items)
    numbers = [_num(a, node) for a in args]
    if func == "min":
        return min(numbers)
    if func == "max":
        return max(numbers)
    if len(numbers) != 1:
        raise EvalError(f"{func}() takes exactly one argument", node)
    (x,) = numbers
    if func == "abs":
        return abs(x)
    if func == "floor":
        return Fraction(math.floor(x))
    return Fraction(math.ceil(x))


class Interpreter:
    """Evaluates expressions of one pipeline at one point; lets are computed once, in order."""

    def __init__(self, point: Mapping[str, Value], lets: tuple[ast.Let, ...] = ()):
        self.env: dict[str, Value | _Failed] = dict(point)
        for let in lets:  # dependency order: no recursion through lets
            try:
                self.env[let.name] = self.eval(let.value)
            except EvalError as exc:
                self.env[let.name] = _Failed(exc)

    def eval(self, expr: ast.Expr) -> Value:
        if isinstance(expr, ast.Num):
            return expr.value
        if isinstance(expr, ast.Bool):
            return expr.value
        if isinstance(expr, ast.Name):
            value = self.env.get(expr.id)
            if value is None:
                raise EvalError(f"unknown name '{expr.id}'", expr)
            if isinstance(value, _Failed):
                raise value.error
            return value
        if isinstance(expr, ast.ListLit):
            return tuple(_num(self.eval(item), item) for item in expr.items)
        if isinstance(expr, ast.Unary):
            if expr.op == "not":
                return not _bool(self.eval(expr.operand), expr.operand)
            return -_num(self.eval(expr.operand), expr.operand)
        if isinstance(expr, ast.Binary):
            if expr.op in ("and", "or"):
                left = _bool(self.eval(expr.left), expr.left)
                if left == (expr.op == "or"):
                    return left
                return _bool(self.eval(expr.right), expr.right)
            return _binary(expr.op, self.eval(expr.left), self.eval(expr.right), expr)
        if isinstance(expr, ast.IfElse):
            return self.eval(expr.then if _bool(self.eval(expr.cond), expr.cond) else expr.orelse)
        if isinstance(expr, ast.Call):
            return _call(expr.func, [self.eval(arg) for arg in expr.args], expr)
        raise EvalError("'inf' is only a range's upper bound", expr)


def evaluate(
    expr: ast.Expr, point: Mapping[str, Value] | None = None, lets: tuple[ast.Let, ...] = ()
) -> Value:
    """The exact value of `expr` at `point` (params as Fraction or bool)."""
    return Interpreter(point or {}, lets).eval(expr)


def as_python(value: Value) -> int | Fraction | bool | tuple[Fraction, ...]:
    """An integral Fraction as int; everything else unchanged."""
    if isinstance(value, Fraction) and value.denominator == 1:
        return int(value)
    return value
