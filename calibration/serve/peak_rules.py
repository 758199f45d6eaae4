"""The estimator's figures for one phase at a request, in integers: a peak (``Peak``), one fitted
plane (rule 2, ``Plane``) and one measured size scaled by the largest term ratio (rule 3,
``Scalable``). ``runtime.estimate.peaks`` computes them in ``Fraction``; a serving worker asks
at every request, so these compare and round over whole numbers where the terms are whole.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence
from fractions import Fraction
from typing import NamedTuple

from attrs import frozen

from runtime.estimate import LinearFit, PlaneFit
from runtime.estimate.results import Measure
from runtime.kinds import Method

Terms = tuple[Measure, ...]

_FIT = Method.FIT
_INT = {int}
_SCALED = Method.SCALED


def ceil_div(numerator: Measure, denominator: int) -> int:
    """``ceil(numerator / denominator)`` exactly (integers stay integers: no Fraction made)."""
    if type(numerator) is int:
        return -(-numerator // denominator)
    return math.ceil(Fraction(numerator) / denominator)


def ratio_weights(terms: Terms) -> list[int] | None:
    """Whole ``terms``' weights for a size's term ratios to them, over one common denominator
    (the product of the terms that are not 0): ``Σ t_i / g_i`` is ``Σ t_i × w_i / common``, so
    sizes compare by ``Σ t_i × w_i`` in integers; a term of 0 has no ratio (weight 0). None when
    some term is a Fraction."""
    if set(map(type, terms)) != _INT:
        return None
    common = math.prod(g for g in terms if g)
    return [common // g if g else 0 for g in terms]


class Peak(NamedTuple):
    """One phase's peak at a request: the rule that gave it, the raw figure and the bound (a
    named tuple: one is made per phase and request)."""

    method: Method
    raw_bytes: int
    bound_bytes: int


#: A ``Peak`` from its three values, made in C (a named tuple's ``__new__`` is Python).
new_peak = functools.partial(tuple.__new__, Peak)


@frozen
class Plane:
    """``constant + Σ slope_i × term_i`` over one denominator; the bound pads the linear part by
    ``margin`` (as ``LinearFit.at`` / ``PlaneFit.at`` with the margin, rounded up)."""

    constant: int  # × ``denominator``
    slopes: tuple[int, ...]  # × ``denominator``
    denominator: int
    margin_num: int
    margin_den: int
    padded_constant: int = 0  # ``constant × margin_den``: the bound's, over ``padded_den``
    padded_den: int = 1  # ``denominator × margin_den``

    @classmethod
    def of(cls, fit: LinearFit | PlaneFit, margin: Fraction) -> Plane:
        """The plane of a fit, exact."""
        slopes = (fit.slope,) if isinstance(fit, LinearFit) else fit.slopes
        den = math.lcm(fit.constant.denominator, *(s.denominator for s in slopes))
        constant = int(fit.constant * den)
        return cls(
            constant,
            tuple(int(s * den) for s in slopes),
            den,
            margin.numerator,
            margin.denominator,
            constant * margin.denominator,
            den * margin.denominator,
        )

    def at(self, terms: Terms) -> Peak:
        linear: Measure = sum(map(operator.mul, self.slopes, terms))  # left to right, from 0
        raw = self.constant + linear
        padded = self.padded_constant + self.margin_num * linear
        if type(linear) is int:  # ceil_div inline: the common case, no call
            return new_peak((_FIT, -(-raw // self.denominator), -(-padded // self.padded_den)))
        return new_peak((_FIT, ceil_div(raw, self.denominator), ceil_div(padded, self.padded_den)))


@frozen
class Scalable:
    """A measured size to scale (rule 3): its terms, its floor, and what lies above it."""

    terms: Terms
    floor: int
    above: int


def _largest_ratio(measured: Terms, terms: Terms) -> tuple[Measure, Measure] | None:
    """The largest ``g / t`` of the request's terms to a size's as (g, t), (0, 1) when no term
    was measured; None when the request has a term the size lacks (nothing to scale)."""
    top: Measure = 0
    bottom: Measure = 1
    for t, g in zip(measured, terms):
        if t:
            if g * bottom > top * t:
                top, bottom = g, t
        elif g:
            return None
    return top, bottom


def undominated(sizes: Sequence[Scalable]) -> tuple[Scalable, ...]:
    """``sizes`` less each that an earlier one dominates: rule 3 never picks it at any request."""
    kept: list[Scalable] = []
    for s in sizes:
        if not any(_dominates(k, s) for k in kept):
            kept.append(s)
    return tuple(kept)


def _dominates(a: Scalable, b: Scalable) -> bool:
    """Whether ``a``'s scaled bound is at least ``b``'s at every request: terms in proportion
    (``b``'s = λ × ``a``'s, so ``b``'s ratios are ``a``'s / λ and both skip the same requests),
    a floor at least ``b``'s, and ``above × λ`` at least ``b``'s (``ceil`` is monotone). An
    earlier size wins ties, so ``b`` after ``a`` is never picked."""
    if a.floor < b.floor or len(a.terms) != len(b.terms):
        return False
    k = next((i for i, t in enumerate(a.terms) if t), None)
    if k is None:  # no term measured: both scale by 0 where they scale at all
        return not any(b.terms)
    ta, tb = a.terms[k], b.terms[k]
    if any(x * ta != y * tb for x, y in zip(b.terms, a.terms)):  # b = (tb / ta) a, term by term
        return False
    return tb > 0 and a.above * tb >= b.above * ta


def scaled(sizes: Sequence[Scalable], terms: Terms, margin: Fraction) -> Peak | None:
    """Rule 3 at a request whose stage has ``terms``: the size whose scaled bound is largest (the
    first of equals), its part above its floor times the largest term ratio; None when every size
    was measured where a term the request has is 0. Ratios compare by cross products and round by
    floor division, exact for ints and Fractions alike and without making a Fraction from ints
    (``ceil`` is monotone: the largest ratio gives the largest figures)."""
    num, den = margin.numerator, margin.denominator
    chosen: Scalable | None = None
    most: Measure = 0
    ratio: tuple[Measure, Measure] = (0, 1)
    two = len(terms) == 2
    g0, g1 = terms if two else (0, 0)
    for s in sizes:
        if two and all(s.terms):  # two terms, both measured: the common case, inline
            t0, t1 = s.terms
            top, bottom = (g0, t0) if g0 * t1 >= g1 * t0 else (g1, t1)
        else:
            found = _largest_ratio(s.terms, terms)
            if found is None:
                continue
            top, bottom = found
        bound = s.floor + -(-(s.above * top * num) // (bottom * den))
        if chosen is None or bound > most:
            chosen, most, ratio = s, bound, (top, bottom)
    if chosen is None:
        return None
    raw = chosen.floor + -(-(chosen.above * ratio[0]) // ratio[1])
    return new_peak((_SCALED, raw, most))
