"""Integrality by residues: `frames * 3 / 4` is an integer when `frames % 4 == 0`.

An expression built from integer values with `+ - * **` and division by constants is Q/D for a
polynomial Q with integer coefficients and a constant D, so whether it is an integer depends only on
each value modulo D. Point are enumerated by residue (modulo D times the moduli of their own
`x % m == c` contracts, keeping only residues that satisfy those), every other integer-valued
sub-expression (`(frames - 1) // 4`, `len(l)`) over all residues modulo D: when every combination
gives an integer, the expression is an integer on the whole domain. A sound, sympy-free proof.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction

from dslc import ast
from dslc.interp import EvalError, Interpreter
from dslc.passes.context import Context
from dslc.passes.intervals import Interval

MAX_COMBINATIONS = 4096


class _NotPolynomial(Exception):
    pass


class _Shape:
    """The denominator D of an expression and its variables (params, opaque integer nodes)."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.params: set[str] = set()
        self.opaque: dict[int, ast.Expr] = {}
        self.lets: dict[str, int] = {}

    def denominator(self, expr: ast.Expr) -> int:
        if isinstance(expr, ast.Num):
            return expr.value.denominator
        if isinstance(expr, ast.Name):
            if self.ctx.param_types.get(expr.id) == "int":
                self.params.add(expr.id)
                return 1
            if expr.id in self.ctx.let_exprs:
                if expr.id not in self.lets:
                    self.lets[expr.id] = self.denominator(self.ctx.let_exprs[expr.id])
                return self.lets[expr.id]
            raise _NotPolynomial
        if isinstance(expr, ast.Unary) and expr.op == "-":
            return self.denominator(expr.operand)
        if isinstance(expr, ast.Binary) and expr.op in ("+", "-"):
            return math.lcm(self.denominator(expr.left), self.denominator(expr.right))
        if isinstance(expr, ast.Binary) and expr.op == "*":
            return self.denominator(expr.left) * self.denominator(expr.right)
        if isinstance(expr, ast.Binary) and expr.op in ("/", "**"):
            right = self.ctx.constant(expr.right)
            if not isinstance(right, Fraction) or right == 0:
                raise _NotPolynomial
            left = self.denominator(expr.left)
            if expr.op == "/":
                return left * abs(right.numerator)
            if right.denominator != 1 or not 0 <= right <= 64:
                raise _NotPolynomial
            return left ** int(right)
        value = self.ctx.interval(expr)
        if isinstance(value, Interval) and value.integer:
            self.opaque[id(expr)] = expr
            return 1
        raise _NotPolynomial


def _evaluate(ctx: Context, expr: ast.Expr, values: dict[object, Fraction]) -> Fraction:
    """The polynomial view of `expr` at `values` (params by name, opaque nodes by id; lets are
    added to `values` as they are computed)."""
    if id(expr) in values:
        return values[id(expr)]
    if isinstance(expr, ast.Num):
        return expr.value
    if isinstance(expr, ast.Name):
        if expr.id not in values:
            values[expr.id] = _evaluate(ctx, ctx.let_exprs[expr.id], values)
        return values[expr.id]
    if isinstance(expr, ast.Unary):
        return -_evaluate(ctx, expr.operand, values)
    assert isinstance(expr, ast.Binary)
    left = _evaluate(ctx, expr.left, values)
    if expr.op in ("/", "**"):
        right = ctx.constant(expr.right)
        assert isinstance(right, Fraction)
        return left / right if expr.op == "/" else left ** int(right)
    right = _evaluate(ctx, expr.right, values)
    return left + right if expr.op == "+" else left - right if expr.op == "-" else left * right


def periodic_atoms(
    ctx: Context, contracts: Sequence[ast.Expr]
) -> dict[str, list[tuple[int, ast.Expr]]]:
    """Per int param, the conjuncts of contracts that read `E % m CMP c` with E an integer
    polynomial of that param alone: each holds or fails alike on every residue class modulo m.
    """
    found: dict[str, list[tuple[int, ast.Expr]]] = {}
    stack = list(contracts)
    while stack:
        atom = stack.pop()
        if isinstance(atom, ast.Binary) and atom.op == "and":
            stack += [atom.left, atom.right]
            continue
        if not (isinstance(atom, ast.Binary) and atom.op in ast.COMPARISONS):
            continue
        sides = (atom.left, atom.right)
        for side, other in (sides, sides[::-1]):
            if not (isinstance(side, ast.Binary) and side.op == "%") or ctx.deps(other):
                continue
            modulus = ctx.constant(side.right)
            if not isinstance(modulus, Fraction) or modulus == 0 or modulus.denominator != 1:
                continue
            shape = _Shape(ctx)
            try:
                if shape.denominator(side.left) != 1 or shape.opaque or len(shape.params) != 1:
                    continue
            except (_NotPolynomial, RecursionError):
                continue
            (name,) = shape.params
            found.setdefault(name, []).append((abs(int(modulus)), atom))
            break
    return found


def _holds(ctx: Context, atom: ast.Expr, name: str, value: int) -> bool:
    try:
        return Interpreter({name: Fraction(value)}, ctx.needed_lets(atom)).eval(atom) is True
    except EvalError:
        return False


def prove_integer(
    ctx: Context, expr: ast.Expr, atoms: Mapping[str, list[tuple[int, ast.Expr]]]
) -> bool:
    """True when `expr` is an integer at every point of the domain (False: not shown this way)."""
    shape = _Shape(ctx)
    try:
        d = shape.denominator(expr)
    except (_NotPolynomial, RecursionError):
        return False
    if d == 1:
        return True
    axes: list[tuple[object, list[Fraction]]] = []
    size = 1  # the product of the axes so far: no axis is built past MAX_COMBINATIONS
    for name in sorted(shape.params):
        found = _param_values(ctx, name, d, atoms.get(name, ()), size)
        if found is None:
            return False
        size *= len(found)
        axes.append((name, [Fraction(v) for v in found]))
    for key, node in shape.opaque.items():
        lo, hi = _opaque_range(ctx, node, d)
        size *= hi - lo + 1
        if size > MAX_COMBINATIONS:
            return False
        axes.append((key, [Fraction(v) for v in range(lo, hi + 1)]))
    keys = [key for key, _ in axes]
    try:
        for combo in itertools.product(*(values for _, values in axes)):
            if _evaluate(ctx, expr, dict(zip(keys, combo))).denominator != 1:
                return False
    except RecursionError:
        return False
    return True


def _param_values(
    ctx: Context, name: str, d: int, atoms: Sequence[tuple[int, ast.Expr]], size: int
) -> list[int] | None:
    """The values of a param to try: all of a range shorter than the period (`d` and the atoms'
    moduli), else the residues the atoms admit; None when `size` times them is over the bound."""
    period = d
    for modulus, _ in atoms:
        period = math.lcm(period, modulus)
    domain = ctx.domains[name]
    if (
        isinstance(domain, Interval)
        and not isinstance(domain.hi, float)
        and not isinstance(domain.lo, float)
        and domain.hi - domain.lo < period
    ):
        lo, hi = int(domain.lo), int(domain.hi)
        if size * (hi - lo + 1) > MAX_COMBINATIONS:
            return None
        ok = ctx.admits(name)
        return [v for v in range(lo, hi + 1) if ok is None or ok(v)]
    if size * period > MAX_COMBINATIONS:
        return None
    return [r for r in range(period) if all(_holds(ctx, atom, name, r) for _, atom in atoms)]


def _opaque_range(ctx: Context, node: ast.Expr, d: int) -> tuple[int, int]:
    """The values an opaque subterm is tried at: its interval when shorter than `d`, else every
    residue modulo `d`."""
    value = ctx.interval(node)
    if (
        isinstance(value, Interval)
        and not isinstance(value.lo, float)
        and not isinstance(value.hi, float)
        and value.hi - value.lo < d
    ):
        return int(value.lo), int(value.hi)
    return 0, d - 1
