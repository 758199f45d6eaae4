"""The small grammar `dslc infer` searches: features of one param, monomials of them, and
iteration expressions; each a value with its text, evaluated by our own code (never eval).

A *feature* is one param seen one way: the param itself, the latent count a `P % k == 1` contract
suggests (``(P - 1) // k + 1``) or, for the steps param, a clamp ``max(min(P + o, hi), lo)`` (a
multistep scheduler's history saturates). A *monomial* multiplies features of up to three distinct
params. Both are bounded lists: the limits are the constants below. Each is a `dslc.ast`
expression, printed by the compiler's formatter (``dslc.fmt.format_expr``: the fewest parentheses
the grammar needs), never text spliced together.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from itertools import combinations, product

from attrs import frozen

from artifact.point import Point
from dslc import ast

#: The most params one monomial multiplies ("products of up to three").
MAX_DEGREE = 3
#: Clamp offsets and bounds tried for the steps param's history terms.
CLAMP_OFFSETS = (0, -1)
CLAMP_LOWS = (1, 2)
CLAMP_HIGHS = (2, 3, 4, 5)

_MODULUS = re.compile(r"^(\w+) % (\d+) == (\d+)$")


def text_of(expr: ast.Expr) -> str:
    """An expression as the compiler's formatter writes it."""
    from dslc.fmt import format_expr

    return format_expr(expr)


def num(value: int) -> ast.Num:
    return ast.Num(Fraction(value))


def name(text: str) -> ast.Name:
    return ast.Name(text)


def product_of(factors: Sequence[ast.Expr]) -> ast.Expr:
    """``a * b * c`` (the constant 1 for none)."""
    if not factors:
        return num(1)
    out = factors[0]
    for f in factors[1:]:
        out = ast.Binary("*", out, f)
    return out


def terms_expr(exprs: Sequence[ast.Expr]) -> ast.Expr:
    """One term as itself, several as a list (`memory ~ [a, b]`)."""
    return exprs[0] if len(exprs) == 1 else ast.ListLit(tuple(exprs))


@frozen(cache_hash=True)  # sets of monomials are hashed in every search: once each
class Feature:
    """One param seen one way: its expression, how to compute it, its complexity."""

    param: str
    expr: ast.Expr
    fn: Callable[[int], int]
    rank: int  # 0 the plainest (the param, or the latent count its contract suggests)
    let: str | None = None  # the let a draft declares for it (None: written inline)

    @property
    def text(self) -> str:
        return text_of(self.expr)

    @property
    def written(self) -> ast.Expr:
        """What a formula writes: the let's name, else the expression."""
        return self.expr if self.let is None else name(self.let)

    def at(self, point: Point) -> int:
        return self.fn(int(point[self.param]))


@frozen(cache_hash=True)
class Monomial:
    """A product of features (empty: the constant 1): of distinct params, or such a product
    twice (its square: ``monomials`` never makes one, the time's candidates do)."""

    features: tuple[Feature, ...]

    @property
    def expr(self) -> ast.Expr:
        return product_of([f.written for f in self.features])

    @property
    def text(self) -> str:
        return text_of(self.expr)

    @property
    def rank(self) -> tuple[int, int]:
        return (len(self.features), sum(f.rank for f in self.features))

    def at(self, point: Point) -> int:
        value = 1
        for f in self.features:
            value *= f.at(point)
        return value


def contract_modulus(contracts: Sequence[str], param: str) -> tuple[int, int] | None:
    """``(k, r)`` of a `param % k == r` contract, if the param has one."""
    for contract in contracts:
        found = _MODULUS.match(contract.strip())
        if found and found.group(1) == param:
            return int(found.group(2)), int(found.group(3))
    return None


def _clamp(o: int, lo: int, hi: int) -> Callable[[int], int]:
    return lambda v: max(min(v + o, hi), lo)


def _latent(k: int) -> Callable[[int], int]:
    return lambda v: (v - 1) // k + 1


def features(
    param: str, contracts: Sequence[str], *, steps: bool, latent_name: str | None = None
) -> tuple[Feature, ...]:
    """The ways the grammar sees ``param``: itself, a latent count, clamps (steps only)."""
    out = [Feature(param, name(param), lambda v: v, 0)]
    modulus = contract_modulus(contracts, param)
    if modulus is not None and modulus[1] == 1 and modulus[0] > 1:
        # what a `P % k == 1` contract suggests comes first: a VAE's latent count
        k = modulus[0]
        latent = ast.Binary(
            "+", ast.Binary("//", ast.Binary("-", name(param), num(1)), num(k)), num(1)
        )
        out = [
            Feature(param, latent, _latent(k), 0, latent_name or f"latent_{param}"),
            Feature(param, name(param), lambda v: v, 1),
        ]
    if steps:
        for o, lo, hi in product(CLAMP_OFFSETS, CLAMP_LOWS, CLAMP_HIGHS):
            if lo >= hi:
                continue
            inner = name(param) if o == 0 else ast.Binary("-", name(param), num(-o))
            clamp = ast.Call("max", (ast.Call("min", (inner, num(hi))), num(lo)))
            out.append(Feature(param, clamp, _clamp(o, lo, hi), 2))
    return tuple(out)


def monomials(by_param: Mapping[str, Sequence[Feature]]) -> list[Monomial]:
    """Every product of one feature each of up to ``MAX_DEGREE`` distinct params, simplest
    first (fewest params, then plainest features), ties in the params' declared order."""
    names = list(by_param)
    out: list[Monomial] = []
    for degree in range(1, min(MAX_DEGREE, len(names)) + 1):
        for chosen in combinations(names, degree):
            for picked in product(*(by_param[n] for n in chosen)):
                out.append(Monomial(tuple(picked)))
    return sorted(out, key=lambda m: m.rank)


@frozen
class IterationForm:
    """One candidate iteration formula: its expression and its value at a point."""

    expr: ast.Expr
    fn: Callable[[Point], int]
    let: Feature | None = None  # the let it names (a latent count): the draft must declare it

    @property
    def text(self) -> str:
        return text_of(self.expr)


def iteration_forms(
    ints: Sequence[str],
    let_features: Sequence[Feature],
    lows: Mapping[str, int | None] | None = None,
) -> list[IterationForm]:
    """The iteration grammar, smallest first: a constant, a param +- 1 or 2, a latent count, the
    count of a scheduler that repeats a step (`if P > 1 then P + 1 else 1`); with the params'
    ``lows``, none that goes below 0 in the declared range (`dslc check` refuses a negative
    count)."""

    def never_negative(p: str, o: int) -> bool:
        return lows is None or (lows.get(p) or 0) + o >= 0

    forms: list[IterationForm] = []
    for p in ints:
        if never_negative(p, 0):
            forms.append(IterationForm(name(p), _param(p, 0)))
    for p in ints:
        for o in (-1, 1, -2, 2):
            if never_negative(p, o):
                forms.append(IterationForm(_shifted(p, o), _param(p, o)))
    for f in let_features:
        forms.append(IterationForm(f.written, f.at, f))
    for p in ints:
        for o in (1, -1):
            more = ast.Binary(">", name(p), num(1))
            forms.append(IterationForm(ast.IfElse(more, _shifted(p, o), num(1)), _repeating(p, o)))
        if never_negative(p, 0):
            forms.append(IterationForm(ast.Binary("*", num(2), name(p)), _twice(p)))
    return forms


def _shifted(p: str, o: int) -> ast.Expr:
    return ast.Binary("+" if o > 0 else "-", name(p), num(abs(o)))


def _param(p: str, o: int) -> Callable[[Point], int]:
    return lambda point: int(point[p]) + o


def _twice(p: str) -> Callable[[Point], int]:
    return lambda point: 2 * int(point[p])


def _repeating(p: str, o: int) -> Callable[[Point], int]:
    return lambda point: int(point[p]) + o if int(point[p]) > 1 else 1
