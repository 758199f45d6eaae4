"""Sympy formulas back into the language's own syntax tree, so `explain` prints what re-parses.

`to_ast` handles exactly what `dslc.to_sympy` produces and sympy's automatic evaluation keeps (sums,
products, integer powers, `floor`, `ceiling`, `Min`, `Max`, `Abs`, `Mod`, `Piecewise`, relations and
boolean connectives); anything else (an infinity, a fractional power, a literal longer than the
parser allows) raises `Untranslatable`, and the caller falls back to the unsimplified formula.
Printing the tree is `dslc.fmt.format_expr`'s job: it parenthesises by the grammar's precedence.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import TYPE_CHECKING

from dslc import ast
from dslc.limits import MAX_EXPONENT, MAX_LITERAL_DIGITS

if TYPE_CHECKING:
    import sympy  # imported where used: sympy is slow to import

__all__ = ["Untranslatable", "to_ast"]


class Untranslatable(Exception):
    """A sympy expression with no faithful form in the language."""


_CALLS = {"floor": "floor", "ceiling": "ceil", "Min": "min", "Max": "max", "Abs": "abs"}
_RELATIONS = {"==", "!=", "<", "<=", ">", ">="}


def to_ast(expr: sympy.Basic) -> ast.Expr:
    """`expr` (a sympy expression or boolean) as a language expression with the same value."""
    import sympy

    if expr is sympy.true or expr is sympy.false:
        return ast.Bool(bool(expr))
    if isinstance(expr, sympy.Symbol):
        return ast.Name(expr.name)
    if isinstance(expr, sympy.Rational):
        return _number(Fraction(int(expr.p), int(expr.q)))
    if isinstance(expr, sympy.Add):
        return _sum(expr)
    if isinstance(expr, sympy.Mul):
        return _product(expr)
    if isinstance(expr, sympy.Pow):
        return _power(expr.base, expr.exp)
    if isinstance(expr, sympy.Mod):
        return ast.Binary("%", to_ast(expr.args[0]), to_ast(expr.args[1]))
    if isinstance(expr, sympy.Piecewise):
        return _piecewise(expr.args)
    if isinstance(expr, sympy.ITE):
        condition, then, orelse = (to_ast(a) for a in expr.args)
        return ast.IfElse(condition, then, orelse)
    name = type(expr).__name__
    if name == "floor" and (division := _division(expr.args[0])) is not None:
        return division
    if name in _CALLS:
        return ast.Call(_CALLS[name], tuple(to_ast(a) for a in expr.args))
    if isinstance(expr, sympy.core.relational.Relational) and expr.rel_op in _RELATIONS:
        return ast.Binary(expr.rel_op, to_ast(expr.lhs), to_ast(expr.rhs))
    return _logic(expr)


def _division(quotient: sympy.Basic) -> ast.Expr | None:
    """``a // k`` for ``floor(a / k)`` with a whole ``k`` above 1, the integer division as a
    formula writes it (``(frames - 1) // 4``, not ``floor(frames / 4 - 1 / 4)``); None else."""
    import sympy

    numerator, denominator = sympy.fraction(sympy.together(quotient))
    if not isinstance(denominator, sympy.Integer) or denominator <= 1:
        return None
    return ast.Binary("//", to_ast(sympy.expand(numerator)), _number(Fraction(int(denominator))))


def _logic(expr: sympy.Basic) -> ast.Expr:
    """`and`, `or`, `not`; `Xor` as `!=` and `Equivalent` as `==` between booleans."""
    import sympy

    args = [to_ast(a) for a in expr.args]
    if isinstance(expr, sympy.Not):
        return ast.Unary("not", args[0])
    if isinstance(expr, (sympy.And, sympy.Or, sympy.Xor)) and len(args) >= 2:
        op = {sympy.And: "and", sympy.Or: "or", sympy.Xor: "!="}[type(expr)]
        return _chain(op, args)
    if isinstance(expr, sympy.Equivalent) and len(args) >= 2:  # all equal: a == b and b == c
        return _chain("and", [ast.Binary("==", a, b) for a, b in itertools.pairwise(args)])
    raise Untranslatable(f"no language form for {type(expr).__name__}")


def _chain(op: str, args: list[ast.Expr]) -> ast.Expr:
    """`a op b op c`, grouped from the left."""
    result = args[0]
    for arg in args[1:]:
        result = ast.Binary(op, result, arg)
    return result


def _number(value: Fraction) -> ast.Expr:
    """A literal the parser accepts (at most MAX_LITERAL_DIGITS digits), negated when negative."""
    size = abs(value)
    for part in (size.numerator, size.denominator):
        if part.bit_length() > 4 * MAX_LITERAL_DIGITS or len(str(part)) > MAX_LITERAL_DIGITS:
            raise Untranslatable("a constant too long to write as a literal")
    if size.denominator == 1:
        literal: ast.Expr = ast.Num(size)
    else:
        numerator, denominator = Fraction(size.numerator), Fraction(size.denominator)
        literal = ast.Binary("/", ast.Num(numerator), ast.Num(denominator))
    return ast.Unary("-", literal) if value < 0 else literal


def _sum(expr: sympy.Basic) -> ast.Expr:
    """Terms in sympy's printing order; a negative term after the first is subtracted."""
    terms = expr.as_ordered_terms()
    result = to_ast(terms[0])
    for term in terms[1:]:
        if term.could_extract_minus_sign():
            result = ast.Binary("-", result, to_ast(-term))
        else:
            result = ast.Binary("+", result, to_ast(term))
    return result


def _product(expr: sympy.Basic) -> ast.Expr:
    """`-a * b / (c * d)`: the coefficient's sign outside, negative powers in the denominator."""
    import sympy

    coefficient, rest = expr.as_coeff_Mul()
    if coefficient < 0:
        return ast.Unary("-", to_ast(-expr))
    top: list[ast.Expr] = []
    bottom: list[ast.Expr] = []
    if coefficient.p != 1:
        top.append(_number(Fraction(int(coefficient.p))))
    if coefficient.q != 1:
        bottom.append(_number(Fraction(int(coefficient.q))))
    for factor in sympy.Mul.make_args(rest):
        if factor.is_Pow and factor.exp.is_Integer and factor.exp < 0:
            bottom.append(_power(factor.base, -factor.exp))
        elif factor != 1:
            top.append(to_ast(factor))
    numerator = _chain("*", top) if top else ast.Num(Fraction(1))
    return ast.Binary("/", numerator, _chain("*", bottom)) if bottom else numerator


def _power(base: sympy.Basic, exponent: sympy.Basic) -> ast.Expr:
    """`b ** n` for 0 <= n <= MAX_EXPONENT, `1 / b ** n` for a negative n."""
    if not exponent.is_Integer:
        raise Untranslatable("a power with a non-integer exponent")
    n = int(exponent)
    if n < 0:
        return ast.Binary("/", ast.Num(Fraction(1)), _power(base, -exponent))
    if n > MAX_EXPONENT:
        raise Untranslatable(f"an exponent above {MAX_EXPONENT}")
    if n == 1:
        return to_ast(base)
    return ast.Binary("**", to_ast(base), ast.Num(Fraction(n)))


def _piecewise(pairs: tuple[sympy.Basic, ...]) -> ast.Expr:
    """`if c1 then v1 else if c2 then v2 else v3`; the last condition must be `True`."""
    import sympy

    *guarded, last = pairs
    if last.cond is not sympy.true:
        raise Untranslatable("a Piecewise without an otherwise branch")
    result = to_ast(last.expr)
    for value, condition in reversed(guarded):
        result = ast.IfElse(to_ast(condition), to_ast(value), result)
    return result
