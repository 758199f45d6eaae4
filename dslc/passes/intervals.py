"""Interval arithmetic over exact Fractions: the prover's cheap, sound over-approximation.

An expression's abstract value is an `Interval` (numbers, with an integrality flag), a frozenset of
the booleans it may take, or a tuple of intervals (a list). Conditions refine the environment: the
`then` branch of `if steps > 3 then ...` sees `steps` in [4, hi], the right operand of `a and b`
sees `a` true. Every result contains every value the expression can take where it is defined (a
division by zero is not a value), so a bound proved here holds on the whole domain.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

import attrs

from dslc import ast
from dslc.interp import EvalError, evaluate

INF = float("inf")
MAX_BITS = 1 << 16  # a bound past this many bits is widened to infinity rather than computed
Bound = Fraction | float  # a Fraction, or -inf / +inf


@attrs.frozen
class Interval:
    """The closed interval [lo, hi]; `integer` when every value in it that occurs is an integer."""

    lo: Bound
    hi: Bound
    integer: bool = False

    @staticmethod
    def make(lo: Bound, hi: Bound, integer: bool = False) -> Interval | None:
        """The interval, with integer bounds tightened; None when empty."""
        if integer:
            lo, hi = _ceil(lo), _floor(hi)
        return Interval(lo, hi, integer) if lo <= hi else None

    @staticmethod
    def point(value: Fraction) -> Interval:
        return Interval(value, value, value.denominator == 1)

    def contains(self, value: Fraction) -> bool:
        return self.lo <= value <= self.hi

    @property
    def is_point(self) -> bool:
        return self.lo == self.hi


BOTH = frozenset({True, False})
TOP = Interval(-INF, INF)
Abstract = Interval | frozenset | tuple


def _floor(b: Bound) -> Bound:
    return b if isinstance(b, float) else Fraction(math.floor(b))


def _ceil(b: Bound) -> Bound:
    return b if isinstance(b, float) else Fraction(math.ceil(b))


# Bounds never meet Python's mixed Fraction/float arithmetic, which converts the Fraction to a
# float (and overflows past 1e308); comparisons between them are exact.


def _plus(a: Bound, b: Bound) -> Bound:
    """a + b, where a lower bound is never +inf and an upper bound never -inf."""
    if isinstance(a, float):
        return a
    return b if isinstance(b, float) else a + b


def _mul(a: Bound, b: Bound) -> Bound:
    if a == 0 or b == 0:
        return Fraction(0)
    if isinstance(a, float) or isinstance(b, float):
        return INF if (a > 0) == (b > 0) else -INF
    return a * b


def _recip(b: Bound) -> Bound:
    return Fraction(0) if isinstance(b, float) else 1 / b


def hull(a: Abstract, b: Abstract) -> Abstract:
    if isinstance(a, Interval) and isinstance(b, Interval):
        return Interval(min(a.lo, b.lo), max(a.hi, b.hi), a.integer and b.integer)
    if isinstance(a, frozenset) and isinstance(b, frozenset):
        return a | b
    return TOP


def add(a: Interval, b: Interval) -> Interval:
    return Interval(_plus(a.lo, b.lo), _plus(a.hi, b.hi), a.integer and b.integer)


def neg(a: Interval) -> Interval:
    return Interval(-a.hi, -a.lo, a.integer)


def mul(a: Interval, b: Interval) -> Interval:
    ends = [_mul(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    return Interval(min(ends), max(ends), a.integer and b.integer)


def nonzero(b: Interval) -> Interval | None:
    """`b` without 0 at its ends (for an integer: without the integer 0); None when it is {0}."""
    if b.integer:
        lo = Fraction(1) if b.lo == 0 else b.lo
        hi = Fraction(-1) if b.hi == 0 else b.hi
        return Interval(lo, hi, True) if lo <= hi else None
    return None if b.lo == b.hi == 0 else b


def div(a: Interval, b: Interval) -> Interval:
    """a / b where b != 0 (a division by zero has no value)."""
    nz = nonzero(b)
    if nz is None:
        return TOP
    if nz.lo > 0 or nz.hi < 0:
        ends = [_recip(nz.lo), _recip(nz.hi)]
        return mul(a, Interval(min(ends), max(ends)))
    return TOP


def floordiv(a: Interval, b: Interval) -> Interval:
    q = div(a, b)
    return Interval(_floor(q.lo), _floor(q.hi), True)


def mod(a: Interval, b: Interval) -> Interval:
    """a % b takes the divisor's sign: in [0, b) for b > 0, in (b, 0] for b < 0."""
    integer = a.integer and b.integer
    nz = nonzero(b) or b
    if nz.lo > 0:
        top = nz.hi - 1 if integer else nz.hi
        if a.lo >= 0:
            top = min(top, a.hi)
        return Interval(Fraction(0), top, integer)
    if nz.hi < 0:
        bottom = nz.lo + 1 if integer else nz.lo
        if a.hi <= 0:
            bottom = max(bottom, a.lo)
        return Interval(bottom, Fraction(0), integer)
    return Interval(nz.lo, nz.hi, integer)


def _bits(b: Bound) -> int:
    return 0 if isinstance(b, float) else max(b.numerator.bit_length(), b.denominator.bit_length())


def power(a: Interval, n: int) -> Interval:
    if n == 0:
        return Interval(Fraction(1), Fraction(1), True)
    if (
        max(_bits(a.lo), _bits(a.hi)) * n > MAX_BITS
    ):  # `((7 ** 64) ** 64) ** 64`: widen, do not compute
        return (
            Interval(Fraction(0), INF, a.integer) if n % 2 == 0 else Interval(-INF, INF, a.integer)
        )
    lo, hi = a.lo**n, a.hi**n
    if n % 2:
        return Interval(lo, hi, a.integer)
    if a.lo <= 0 <= a.hi:
        return Interval(Fraction(0), max(lo, hi), a.integer)
    return Interval(min(lo, hi), max(lo, hi), a.integer)


def compare(op: str, a: Abstract, b: Abstract) -> frozenset:
    """The truth values `a op b` may take."""
    if not (isinstance(a, Interval) and isinstance(b, Interval)):
        if isinstance(a, frozenset) and isinstance(b, frozenset) and len(a) == len(b) == 1:
            return frozenset({(a == b) == (op == "==")})
        return BOTH
    if op in (">", ">="):
        a, b, op = b, a, "<" if op == ">" else "<="
    if op == "<":
        return frozenset({True}) if a.hi < b.lo else frozenset({False}) if a.lo >= b.hi else BOTH
    if op == "<=":
        return frozenset({True}) if a.hi <= b.lo else frozenset({False}) if a.lo > b.hi else BOTH
    if a.is_point and b.is_point and a.lo == b.lo:
        equal = frozenset({True})
    elif a.hi < b.lo or b.hi < a.lo:
        equal = frozenset({False})
    else:
        equal = BOTH
    return equal if op == "==" else frozenset(not v for v in equal)


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


class Env:
    """Abstract values of params (given) and lets (computed lazily); refinement makes a new Env."""

    def __init__(
        self,
        params: Mapping[str, Abstract],
        lets: Mapping[str, ast.Expr],
        fixed: Mapping[str, Abstract] | None = None,
        needs: Mapping[str, tuple[str, ...]] | None = None,
    ):
        self.params = dict(params)
        self.let_exprs = lets
        self.fixed = dict(fixed or {})  # lets narrowed by a condition
        self.needs = needs or {}  # per let, the lets it uses, in dependency order
        self.cache: dict[str, Abstract] = {}

    def lookup(self, name: str) -> Abstract:
        if name in self.params:
            return self.params[name]
        if name in self.fixed:
            return self.fixed[name]
        if name not in self.cache:
            for used in self.needs.get(name, ()):  # in order, so no let recurses into another
                if used not in self.cache and used not in self.fixed:
                    self._compute(used)
            self._compute(name)
        return self.cache[name]

    def _compute(self, name: str) -> None:
        self.cache[name] = TOP  # a guard; lets never form a cycle
        expr = self.let_exprs.get(name)
        self.cache[name] = TOP if expr is None else self.eval(expr)

    def narrowed(self, name: str, value: Abstract) -> Env:
        if name in self.params:
            return Env({**self.params, name: value}, self.let_exprs, self.fixed, self.needs)
        return Env(self.params, self.let_exprs, {**self.fixed, name: value}, self.needs)

    def with_params(self, params: Mapping[str, Abstract]) -> Env:
        """The same lets over other param values (narrowed lets forgotten)."""
        return Env(params, self.let_exprs, None, self.needs)

    # -- evaluation --------------------------------------------------------------------------

    def eval(self, expr: ast.Expr) -> Abstract:
        if isinstance(expr, ast.Num):
            return Interval.point(expr.value)
        if isinstance(expr, ast.Bool):
            return frozenset({expr.value})
        if isinstance(expr, ast.Name):
            return self.lookup(expr.id)
        if isinstance(expr, ast.ListLit):
            return tuple(self.number(item) for item in expr.items)
        if isinstance(expr, ast.Unary):
            if expr.op == "not":
                value = self.eval(expr.operand)
                return frozenset(not v for v in value) if isinstance(value, frozenset) else BOTH
            return neg(self.number(expr.operand))
        if isinstance(expr, ast.Binary):
            return self._binary(expr)
        if isinstance(expr, ast.IfElse):
            cond = self.eval(expr.cond)
            cond = cond if isinstance(cond, frozenset) else BOTH
            parts = []
            for truth, branch in ((True, expr.then), (False, expr.orelse)):
                if truth in cond:
                    env = self.refine(expr.cond, truth)
                    if env is not None:
                        parts.append(env.eval(branch))
            if not parts:
                return self.eval(expr.then)  # unreachable; any sound value will do
            return parts[0] if len(parts) == 1 else hull(parts[0], parts[1])
        if isinstance(expr, ast.Call):
            return self._call(expr)
        return TOP

    def number(self, expr: ast.Expr) -> Interval:
        value = self.eval(expr)
        return value if isinstance(value, Interval) else TOP

    def _binary(self, expr: ast.Binary) -> Abstract:
        op = expr.op
        if op in ("and", "or"):
            left = self.eval(expr.left)
            left = left if isinstance(left, frozenset) else BOTH
            short = op == "or"  # the value that decides without the right operand
            out = {short} if short in left else set()
            if (not short) in left:
                env = self.refine(expr.left, not short)
                if env is not None:
                    right = env.eval(expr.right)
                    out |= right if isinstance(right, frozenset) else BOTH
            return frozenset(out) or BOTH
        if op in ast.COMPARISONS:
            return compare(op, self.eval(expr.left), self.eval(expr.right))
        if op == "*" and expr.left == expr.right:
            return power(self.number(expr.left), 2)
        if op == "**":
            try:
                exponent = evaluate(expr.right)
            except EvalError:
                return TOP
            if isinstance(exponent, Fraction) and exponent.denominator == 1 and 0 <= exponent <= 64:
                return power(self.number(expr.left), int(exponent))
            return TOP
        a, b = self.number(expr.left), self.number(expr.right)
        if op == "+":
            return add(a, b)
        if op == "-":
            return add(a, neg(b))
        if op == "*":
            return mul(a, b)
        if op == "/":
            return div(a, b)
        if op == "//":
            return floordiv(a, b)
        if op == "%":
            return mod(a, b)
        return TOP

    def _call(self, expr: ast.Call) -> Abstract:
        args = [self.eval(arg) for arg in expr.args]
        func = expr.func
        if len(args) == 1 and isinstance(args[0], tuple):
            items = args[0]
            if func == "len":
                return Interval.point(Fraction(len(items)))
            if func == "sum":
                total = Interval(Fraction(0), Fraction(0), True)
                for item in items:
                    total = add(total, item)
                return total
            args = list(items)
            if not args:
                return TOP
        nums = [a if isinstance(a, Interval) else TOP for a in args]
        if not nums:
            return TOP
        integer = all(n.integer for n in nums)
        if func == "min":
            return Interval(min(n.lo for n in nums), min(n.hi for n in nums), integer)
        if func == "max":
            return Interval(max(n.lo for n in nums), max(n.hi for n in nums), integer)
        x = nums[0]
        if func == "floor":
            return Interval(_floor(x.lo), _floor(x.hi), True)
        if func == "ceil":
            return Interval(_ceil(x.lo), _ceil(x.hi), True)
        if func == "abs":
            if x.lo >= 0:
                return x
            if x.hi <= 0:
                return neg(x)
            return Interval(Fraction(0), max(-x.lo, x.hi), x.integer)
        return TOP

    # -- refinement by conditions --------------------------------------------------------------

    def refine(self, cond: ast.Expr, truth: bool) -> Env | None:
        """This environment where `cond` evaluates to `truth`; None when that cannot happen."""
        if isinstance(cond, ast.Bool):
            return self if cond.value == truth else None
        if isinstance(cond, ast.Unary) and cond.op == "not":
            return self.refine(cond.operand, not truth)
        if isinstance(cond, ast.Name):
            value = self.lookup(cond.id)
            if isinstance(value, frozenset):
                if truth not in value:
                    return None
                return self.narrowed(cond.id, frozenset({truth}))
            return self
        if not isinstance(cond, ast.Binary):
            return self
        if cond.op in ("and", "or"):
            if truth == (cond.op == "and"):  # both operands take `truth`
                first = self.refine(cond.left, truth)
                return None if first is None else first.refine(cond.right, truth)
            left, right = self.refine(cond.left, truth), self.refine(cond.right, truth)
            if left is None or right is None:
                return right if left is None else left
            return self
        if cond.op not in ast.COMPARISONS:
            return self
        value = self.eval(cond)
        if isinstance(value, frozenset) and truth not in value:
            return None
        op = cond.op if truth else _NEGATE[cond.op]
        env: Env | None = self
        if isinstance(cond.left, ast.Name):
            env = self._narrow(cond.left.id, op, self.eval(cond.right))
        if env is not None and isinstance(cond.right, ast.Name):
            env = env._narrow(cond.right.id, _FLIP[op], env.eval(cond.left))
        return env

    def _narrow(self, name: str, op: str, other: Abstract) -> Env | None:
        """Narrow `name` knowing `name op other`."""
        value = self.lookup(name)
        if not isinstance(value, Interval) or not isinstance(other, Interval):
            return self
        lo, hi, integer = value.lo, value.hi, value.integer
        if op == "<":
            hi = min(hi, other.hi - 1 if integer and other.hi == _floor(other.hi) else other.hi)
        elif op == "<=":
            hi = min(hi, other.hi)
        elif op == ">":
            lo = max(lo, other.lo + 1 if integer and other.lo == _floor(other.lo) else other.lo)
        elif op == ">=":
            lo = max(lo, other.lo)
        elif op == "==":
            lo, hi = max(lo, other.lo), min(hi, other.hi)
        elif op == "!=" and other.is_point and integer:
            if lo == other.lo:
                lo += 1
            if hi == other.lo:
                hi -= 1
        narrowed = Interval.make(lo, hi, integer)
        if narrowed is None:
            return None
        return self if narrowed == value else self.narrowed(name, narrowed)
