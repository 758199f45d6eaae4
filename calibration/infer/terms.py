"""The small grammar `dslc infer` searches: features of one param, monomials of them, and
iteration expressions; each a value with its text, evaluated by our own code (never eval).

A *feature* is one param seen one way: the param itself, the latent count a `P % k == 1` contract
suggests (``(P - 1) // k + 1``) or, for the steps param, a clamp ``max(min(P + o, hi), lo)`` (a
multistep scheduler's history saturates). A *monomial* multiplies features of up to three distinct
params. Both are bounded lists: the limits are the constants below.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from itertools import combinations, product

from attrs import frozen

Point = Mapping[str, int | bool]

#: The most params one monomial multiplies ("products of up to three").
MAX_DEGREE = 3
#: Clamp offsets and bounds tried for the steps param's history terms.
CLAMP_OFFSETS = (0, -1)
CLAMP_LOWS = (1, 2)
CLAMP_HIGHS = (2, 3, 4, 5)

_MODULUS = re.compile(r"^(\w+) % (\d+) == (\d+)$")


@frozen
class Feature:
    """One param seen one way: its text in a formula, how to compute it, its complexity."""

    param: str
    text: str
    fn: Callable[[int], int]
    rank: int  # 0 the plainest (the param, or the latent count its contract suggests)
    let: str | None = None  # the let a draft declares for it (None: written inline)
    let_text: str | None = None

    def at(self, point: Point) -> int:
        return self.fn(int(point[self.param]))


@frozen
class Monomial:
    """A product of features (empty: the constant 1): of distinct params, or such a product
    twice (its square: ``monomials`` never makes one, the time's candidates do)."""

    features: tuple[Feature, ...]

    @property
    def text(self) -> str:
        if not self.features:
            return "1"
        return " * ".join(f.let or _wrapped(f.text) for f in self.features)

    @property
    def rank(self) -> tuple[int, int]:
        return (len(self.features), sum(f.rank for f in self.features))

    def at(self, point: Point) -> int:
        value = 1
        for f in self.features:
            value *= f.at(point)
        return value


def _wrapped(text: str) -> str:
    if text.startswith("if "):
        return f"({text})"
    return f"({text})" if (" + " in text or " - " in text) and not text.startswith("max(") else text


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
    out = [Feature(param, param, lambda v: v, 0)]
    modulus = contract_modulus(contracts, param)
    if modulus is not None and modulus[1] == 1 and modulus[0] > 1:
        # what a `P % k == 1` contract suggests comes first: a VAE's latent count
        k = modulus[0]
        name = latent_name or f"latent_{param}"
        text = f"({param} - 1) // {k} + 1"
        out = [
            Feature(param, text, _latent(k), 0, name, text),
            Feature(param, param, lambda v: v, 1),
        ]
    if steps:
        for o, lo, hi in product(CLAMP_OFFSETS, CLAMP_LOWS, CLAMP_HIGHS):
            if lo >= hi:
                continue
            inner = param if o == 0 else f"{param} - {-o}"
            out.append(Feature(param, f"max(min({inner}, {hi}), {lo})", _clamp(o, lo, hi), 2))
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
    """One candidate iteration formula: its text and its value at a point."""

    text: str
    fn: Callable[[Point], int]


def iteration_forms(ints: Sequence[str], let_features: Sequence[Feature]) -> list[IterationForm]:
    """The iteration grammar, smallest first: a constant, a param +- 1 or 2, a latent count, the
    count of a scheduler that repeats a step (`if P > 1 then P + 1 else 1`)."""
    forms: list[IterationForm] = []
    for p in ints:
        forms.append(IterationForm(p, _param(p, 0)))
    for p in ints:
        for o in (-1, 1, -2, 2):
            forms.append(IterationForm(f"{p} {'+' if o > 0 else '-'} {abs(o)}", _param(p, o)))
    for f in let_features:
        forms.append(IterationForm(f.let or f.text, f.at))
    for p in ints:
        for o in (1, -1):
            sign = "+" if o > 0 else "-"
            forms.append(IterationForm(f"if {p} > 1 then {p} {sign} 1 else 1", _repeating(p, o)))
        forms.append(IterationForm(f"2 * {p}", _twice(p)))
    return forms


def _param(p: str, o: int) -> Callable[[Point], int]:
    return lambda point: int(point[p]) + o


def _twice(p: str) -> Callable[[Point], int]:
    return lambda point: 2 * int(point[p])


def _repeating(p: str, o: int) -> Callable[[Point], int]:
    return lambda point: int(point[p]) + o if int(point[p]) > 1 else 1
