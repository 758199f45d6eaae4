"""AST -> sympy, node by node (never by parsing text), with lets inlined.

Int params become integer symbols carrying what their range allows sympy to know (nonnegative,
positive); bool params become plain symbols used as conditions. `//` is floor(a/b), `%` is sympy's
Mod (the divisor's sign, as in Python), `if` is a Piecewise, `and`/`or`/`not` are sympy booleans.
Importing this module imports sympy: keep it out of the runtime and import it lazily elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

import sympy
from sympy.core.relational import Relational
from sympy.logic.boolalg import BooleanAtom, BooleanFunction

from dslc import ast
from dslc.model import ResolvedParam, ResolvedPipeline

_COMPARE = {
    "==": sympy.Eq,
    "!=": sympy.Ne,
    "<": sympy.Lt,
    "<=": sympy.Le,
    ">": sympy.Gt,
    ">=": sympy.Ge,
}


#: What an expression lowers to: a sympy value, or a list's items (a memory's terms).
Lowered: TypeAlias = "sympy.Basic | tuple[Lowered, ...]"


class LowerError(Exception):
    """An expression that has no sympy form here (a list where a number is needed, a bad
    exponent).
    """


def param_symbol(param: ResolvedParam) -> sympy.Symbol:
    if param.type == "bool":
        return sympy.Symbol(param.name)
    lo = param.lo if param.lo is not None else 0
    if lo >= 1:
        return sympy.Symbol(param.name, integer=True, positive=True)
    if lo >= 0:
        return sympy.Symbol(param.name, integer=True, nonnegative=True)
    return sympy.Symbol(param.name, integer=True)


class Lowerer:
    """Lowers expressions of one pipeline; each let is lowered once, on first use."""

    def __init__(
        self, pipeline: ResolvedPipeline, symbols: Mapping[str, sympy.Basic] | None = None
    ):
        self.symbols: dict[str, sympy.Basic] = (
            dict(symbols)
            if symbols is not None
            else {p.name: param_symbol(p) for p in pipeline.params}
        )
        self.bool_symbols = {
            self.symbols[p.name]
            for p in pipeline.params
            if p.type == "bool" and isinstance(self.symbols.get(p.name), sympy.Symbol)
        }
        self.let_exprs = {let.name: let.value for let in pipeline.lets}
        self.order = [let.name for let in pipeline.lets]  # dependency order
        self.lets: dict[str, Lowered] = {}

    def name(self, ident: str) -> Lowered:
        if ident in self.symbols:
            return self.symbols[ident]
        if ident not in self.lets:
            if ident not in self.let_exprs:
                raise LowerError(f"unknown name '{ident}'")
            for used in self._uses(ident):  # in order, so no let recurses into another
                if used not in self.lets:
                    self.lets[used] = self.lower(self.let_exprs[used])
        return self.lets[ident]

    def _uses(self, ident: str) -> list[str]:
        """`ident` and the lets it uses, directly or not, in dependency order."""
        seen = {ident}
        stack = [ident]
        while stack:
            for node in ast.names(self.let_exprs[stack.pop()]):
                if (
                    node.id in self.let_exprs
                    and node.id not in seen
                    and node.id not in self.symbols
                ):
                    seen.add(node.id)
                    stack.append(node.id)
        return [name for name in self.order if name in seen]

    def lower(self, expr: ast.Expr) -> Lowered:
        if isinstance(expr, ast.Num):
            return sympy.Rational(expr.value.numerator, expr.value.denominator)
        if isinstance(expr, ast.Bool):
            return sympy.true if expr.value else sympy.false
        if isinstance(expr, ast.Name):
            return self.name(expr.id)
        if isinstance(expr, ast.ListLit):
            return tuple(self.lower(item) for item in expr.items)
        if isinstance(expr, ast.Unary):
            operand = self.lower(expr.operand)
            return sympy.Not(operand) if expr.op == "not" else -self.number(operand)
        if isinstance(expr, ast.Binary):
            return self._binary(expr)
        if isinstance(expr, ast.IfElse):
            cond = self.lower(expr.cond)
            then, orelse = self.lower(expr.then), self.lower(expr.orelse)
            if cond is sympy.true:
                return then
            if cond is sympy.false:
                return orelse
            if self.boolean(then):  # a boolean `if`: sympy's Piecewise holds numbers only
                return sympy.ITE(cond, then, orelse)
            return sympy.Piecewise((then, cond), (orelse, True))
        if isinstance(expr, ast.Call):
            return self._call(expr)
        raise LowerError("'inf' has no value")

    def boolean(self, value: Lowered) -> bool:
        """Whether a lowered value is a boolean (a bool param's symbol is a plain Symbol)."""
        return value in self.bool_symbols or isinstance(
            value, (BooleanAtom, BooleanFunction, Relational)
        )

    @staticmethod
    def number(value: Lowered) -> sympy.Basic:
        if isinstance(value, tuple):
            raise LowerError("a list where a number is needed")
        return value

    def _binary(self, expr: ast.Binary) -> sympy.Basic:
        op = expr.op
        left, right = self.lower(expr.left), self.lower(expr.right)
        if op == "and":
            return sympy.And(left, right)
        if op == "or":
            return sympy.Or(left, right)
        if op in ("==", "!=") and self.boolean(left):  # Eq(x < 3, b) is not a sympy boolean
            same = sympy.Equivalent(left, right)
            return same if op == "==" else sympy.Not(same)
        if op in _COMPARE:
            return _COMPARE[op](left, right)
        a, b = self.number(left), self.number(right)
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            return a / b
        if op == "//":
            return sympy.floor(a / b)
        if op == "%":
            return sympy.Mod(a, b)
        if not (b.is_Integer and 0 <= b <= 64):
            raise LowerError("the exponent must be a constant integer in [0, 64]")
        return a**b

    def _call(self, expr: ast.Call) -> sympy.Basic:
        args = [self.lower(arg) for arg in expr.args]
        func = expr.func
        if len(args) == 1 and isinstance(args[0], tuple):
            items = args[0]
            if func == "len":
                return sympy.Integer(len(items))
            if func == "sum":
                return sympy.Add(*items)
            args = list(items)
        args = [self.number(a) for a in args]
        if func == "min":
            return sympy.Min(*args)
        if func == "max":
            return sympy.Max(*args)
        if func == "abs":
            return sympy.Abs(args[0])
        if func == "floor":
            return sympy.floor(args[0])
        if func == "ceil":
            return sympy.ceiling(args[0])
        raise LowerError(f"unknown function '{func}'")


def lower_field(pipeline: ResolvedPipeline, expr: ast.Expr) -> sympy.Expr:
    """`expr` of `pipeline` as a sympy expression over its params (lets inlined, not simplified).

    A list (a memory's terms) is never one expression: lower `pipeline.field_value(field)` or each
    of `pipeline.terms(field)`; a list here is a LowerError.
    """
    return Lowerer.number(Lowerer(pipeline).lower(expr))
