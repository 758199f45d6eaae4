"""Rule 2 of ``runtime.estimate.peaks`` for a measure of several terms, fast: the plane through the
measured sizes nearest a request, without solving anything per request.

The estimator orders the distinct sizes by their size next to the request (the sum of their term
ratios, then their measure: ``relative_size``), keeps the first that add a direction, solves the
plane through them exactly, and uses it only where their span holds the request's row; a negative
slope worth at most 1 % at the request is left out and the others fitted again
(``runtime.estimate.peak_fit.fit_peak``). Everything but the span test and that 1 % test depends on
the order alone, and a few sizes have few orders: each order's chain of planes is solved once
(when the phase is built, for up to ``SOLVED_AHEAD`` sizes), with the span as the integer normals
of its orthogonal complement. A request then costs its order (integer products: the term ratios
over one common denominator), a dot product per normal, and the plane's value.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Sequence
from fractions import Fraction

from attrs import frozen

from calibration.serve.peak_rules import Peak, Plane, ratio_weights
from runtime.estimate import MeasuredPoint, PlaneFit
from runtime.estimate.fit.exact import basic_solution, independent_rows, row, row_reduce
from runtime.estimate.peak_fit import NEGLIGIBLE, relative_size
from runtime.estimate.results import Measure

Terms = tuple[Measure, ...]
#: How many orders of the sizes a phase keeps the chain of (3 sizes have 6; 5 have 120).
ORDERS_KEPT = 1024
#: Up to this many distinct sizes every order's chain is solved when the phase is built (5: 120
#: chains, ~30 ms), so no request waits for one; beyond, each the first time a request brings it.
SOLVED_AHEAD = 5


@frozen
class _Step:
    """One plane of an order's chain: the terms it keeps, the normals of its sizes' span, its
    unfloored constant and slopes over one denominator (for the 1 % test), the terms whose slope
    is negative, and the plane to read (floored) when none is."""

    keep: tuple[int, ...]
    # the span's normals: each a constant's coefficient and one per term (0 for a term left out)
    normals: tuple[tuple[int, tuple[int, ...]], ...]
    constant: int  # x ``denominator``, unfloored
    slopes: tuple[int, ...]  # x ``denominator``, one per term (0 where left out)
    negative: tuple[int, ...]
    plane: Plane | None  # None: some slope is negative


#: An order's planes, in the estimator's order of trying them.
_Chain = tuple[_Step, ...]


class NearestPlanes:
    """The several-term fit of one phase's measured sizes at any request beyond them (a plain
    class: it remembers each order's chain, bounded by ``ORDERS_KEPT``)."""

    __slots__ = (
        "chains",
        "floor",
        "indices",
        "integral",
        "margin",
        "only",
        "outside",
        "peaks",
        "sized",
        "spread",
        "terms",
    )

    def __init__(self, points: Sequence[MeasuredPoint], floor: int, margin: Fraction) -> None:
        largest: dict[Terms, int] = {}  # each size once, its largest peak, first seen first
        for p in points:
            if p.terms not in largest or p.adjusted_peak_bytes > largest[p.terms]:
                largest[p.terms] = p.adjusted_peak_bytes
        self.terms = tuple(largest)
        self.peaks = tuple(largest.values())
        self.sized = tuple((t, sum(t)) for t in self.terms)  # the measure: the tie-break
        self.spread = 1 + max((s for _, s in self.sized), default=0)
        self.indices = range(len(self.terms))
        self.integral = all(type(x) is int for t in self.terms for x in t)
        self.floor = floor
        self.margin = margin
        rows = [row(t) for t in self.terms]
        everywhere = [rows[i] for i in independent_rows(rows)] if rows else []
        # the normals of all the sizes' span: a request off it is off every plane's (rule 3)
        self.outside = tuple((n[0], n[1:]) for n in _normals(everywhere)) if rows else ()
        self.chains: dict[tuple[int, ...], _Chain] = {}
        self.only: _Chain | None = None  # the one chain of every order, when they agree
        if len(self.terms) <= SOLVED_AHEAD:
            for order in itertools.permutations(range(len(self.terms))):
                self.chains[order] = self._chain(order)
            if len(set(self.chains.values())) == 1:  # no request needs its order
                self.only = next(iter(self.chains.values()))

    def at(self, target: Terms) -> Peak | None:
        """The fit's peak at ``target`` (a request no size covers), or None where the estimator
        finds no plane (it then scales one size: rule 3)."""
        for first, rest in self.outside:  # every plane's span lies in all the sizes' span
            if first + sum(map(operator.mul, rest, target)):
                return None
        chain = self.only
        if chain is None:
            chain = self._chain_at(target)
        for step in chain:
            for first, rest in step.normals:
                if first + sum(map(operator.mul, rest, target)):
                    return None  # the sizes' span misses the request: not estimable
            if step.plane is not None:
                return step.plane.at(target)
            if len(step.negative) == len(step.keep) or _too_negative(step, target):
                return None
        return None

    def _chain_at(self, target: Terms) -> _Chain:
        """The chain of the sizes' order next to ``target``, solved now if not yet."""
        order = self._order(target)
        chain = self.chains.get(order)
        if chain is None:
            chain = self._chain(order)
            if len(self.chains) >= ORDERS_KEPT:
                self.chains.pop(next(iter(self.chains)))
            self.chains[order] = chain
        return chain

    def _order(self, target: Terms) -> tuple[int, ...]:
        """The sizes nearest ``target`` first (``relative_size``, descending, ties in order): with
        whole terms, the ratio sums over their common denominator, in integers."""
        weights = ratio_weights(target) if self.integral else None
        keys: list[tuple[Fraction, Fraction]] | list[Measure]
        if weights is None:
            keys = [relative_size(terms, target) for terms in self.terms]
        elif len(weights) == 2:  # two terms, the common case: no call per size
            w0, w1 = weights
            keys = [(a * w0 + b * w1) * self.spread + s for (a, b), s in self.sized]
        else:  # (ratios, measure) as one int: the measure lies in [0, spread)
            keys = [sum(map(operator.mul, t, weights)) * self.spread + s for t, s in self.sized]
        return tuple(sorted(self.indices, key=keys.__getitem__, reverse=True))

    def _chain(self, order: tuple[int, ...]) -> _Chain:
        """The planes the estimator tries for sizes in ``order``: each through the first sizes
        that add a direction over the terms kept, the next without the terms of negative slope."""
        width = len(self.terms[order[0]])
        keep = tuple(range(width))
        steps: list[_Step] = []
        while True:
            rows = [row([self.terms[k][i] for i in keep]) for k in order]
            chosen = independent_rows(rows)
            if len(chosen) < 2:
                return tuple(steps)  # no plane at all: rule 3
            solution = basic_solution(
                [rows[c] for c in chosen], [Fraction(self.peaks[order[c]]) for c in chosen]
            )
            slopes = [Fraction(0)] * width
            for i, slope in zip(keep, solution[1:]):
                slopes[i] = slope
            negative = tuple(i for i in keep if slopes[i] < 0)
            plane = None
            if not negative:
                least = Fraction(min(self.floor, self.peaks[order[chosen[0]]]))
                fit = PlaneFit(max(solution[0], least), tuple(slopes), ())
                plane = Plane.of(fit, self.margin)
            den = math.lcm(solution[0].denominator, *(s.denominator for s in slopes))
            steps.append(
                _Step(
                    keep,
                    tuple(
                        (n[0], _spread(n[1:], keep, width))
                        for n in _normals([rows[c] for c in chosen])
                    ),
                    int(solution[0] * den),
                    tuple(int(s * den) for s in slopes),
                    negative,
                    plane,
                )
            )
            if plane is not None or len(negative) == len(keep):
                return tuple(steps)
            keep = tuple(i for i in keep if i not in negative)


def _spread(values: Sequence[int], keep: Sequence[int], width: int) -> tuple[int, ...]:
    """``values`` of the terms in ``keep`` at their places among ``width`` terms, 0 elsewhere."""
    out = [0] * width
    for i, v in zip(keep, values):
        out[i] = v
    return tuple(out)


def _too_negative(step: _Step, target: Terms) -> bool:
    """Whether a negative slope is worth more than ``NEGLIGIBLE`` of the fit at ``target`` (all
    over the step's denominator, which cancels)."""
    value: Measure = step.constant + sum(map(operator.mul, step.slopes, target))
    limit = NEGLIGIBLE.numerator * _abs(value)
    return any(
        NEGLIGIBLE.denominator * _abs(step.slopes[i] * target[i]) > limit for i in step.negative
    )


def _abs(value: Measure) -> Measure:
    return value if value >= 0 else -value


def _normals(rows: Sequence[Sequence[Fraction]]) -> tuple[tuple[int, ...], ...]:
    """Integer vectors spanning the orthogonal complement of independent ``rows``: a row lies in
    their span exactly when its dot product with each is 0."""
    width = len(rows[0])
    reduced, pivots = row_reduce([list(r) for r in rows], width)
    out = []
    for free in (c for c in range(width) if c not in pivots):
        vector = [Fraction(0)] * width
        vector[free] = Fraction(1)
        for line, column in enumerate(pivots):
            vector[column] = -reduced[line][free]
        scale = math.lcm(*(x.denominator for x in vector))
        out.append(tuple(int(x * scale) for x in vector))
    return tuple(out)
