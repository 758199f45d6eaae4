"""One phase's peak at any request, precomputed from a calibration: the estimator's rules, fast.

``runtime.estimate.peaks`` decides a phase's peak at one target from its measured sizes: a size
that covers the target bounds it (rule 1), else the plane fitted through the sizes (rule 2), else
one size scaled by the largest term ratio (rule 3). A serving worker asks at every request, so
everything that does not depend on the request is done here once: the covering sizes sorted (a
bisection for a one-term measure), the plane as integers over one denominator, the sizes to scale.
With one term the plane is the one the calibration fitted at its own target (a target its sizes
cover: the plane the estimator fits beyond every size), the same line through the two largest
sizes for any request beyond them; with several terms the sizes a plane passes through depend on
the request, so beyond the covering sizes each order of the sizes next to the request has its
planes solved once (``calibration.serve.nearest_plane``). The per-iteration growth of a stage is
carried to the calibration's target, as its estimate carried it.
"""

from __future__ import annotations

import math
import operator
from bisect import bisect_left
from collections.abc import Sequence
from fractions import Fraction

from attrs import field, frozen

from calibration.errors import CalibrationError
from calibration.serve.nearest_plane import NearestPlanes
from calibration.serve.peak_rules import (
    Peak,
    Plane,
    Scalable,
    ratio_weights,
    scaled,
    undominated,
)
from runtime.estimate import MeasuredPoint, PeakEstimate
from runtime.estimate.peaks import peak_from_points
from runtime.estimate.points import show_terms
from runtime.estimate.results import Measure
from runtime.kinds import Method

__all__ = ["Covering", "Peak", "PhaseModel", "Terms", "Unpredictable", "phase_model"]

Terms = tuple[Measure, ...]


class Unpredictable(CalibrationError, ValueError):
    """A request that moves a measure every size the calibration ran left at 0 (e.g. ``cfg`` on a
    calibration that never ran it): nothing measured grows with it, so there is nothing to scale;
    a calibration with a probe that moves it predicts it."""


@frozen
class Covering:
    """A measured size that bounds every request it covers (rule 1): its terms and figures."""

    terms: Terms
    total: Measure  # the sum of its terms (the estimator's tie-break)
    peak: Peak
    first: int = 0  # where its point lies among the measured ones (the estimator's last tie-break)


@frozen
class PhaseModel:
    """A phase's peak as a function of its stage's memory terms at the request."""

    label: str
    stage: str
    single: bool  # a one-term measure: the covering sizes are found by bisection
    measures: tuple[Measure, ...]  # one-term: the distinct measured measures, ascending
    covering: tuple[Covering, ...]  # in ``measures``' order when one-term
    plane: Plane | None
    scalable: tuple[Scalable, ...]
    margin: Fraction
    # several terms: the measured sizes and floor, and the planes through the sizes nearest a
    # request beyond them (which sizes depends on the request: no one plane)
    points: tuple[MeasuredPoint, ...] = field(default=(), eq=False, repr=False)
    floor: int = 0
    nearest: NearestPlanes | None = field(default=None, eq=False, repr=False)
    tops: Terms = field(default=(), eq=False, repr=False)  # each term's largest covering size
    whole: bool = field(default=False, eq=False, repr=False)  # every covering size's terms ints
    # each covering size flat: its terms, measure, (-peak, first point) and peak; and one above
    # every measure (so that ratios and measure compare as one int)
    cover_rows: tuple[tuple[Terms, Measure, tuple[int, int], Peak], ...] = field(
        default=(), eq=False, repr=False
    )
    spread: Measure = field(default=1, eq=False, repr=False)

    @property
    def rules(self) -> tuple[object, ...]:
        """Everything but the label: phases with equal rules have equal peaks at every request."""
        return (
            self.stage,
            self.measures,
            self.covering,
            self.plane,
            self.scalable,
            self.margin,
            self.points,
            self.floor,
        )

    def at(self, terms: Terms) -> Peak:
        """The peak at a request whose stage has ``terms`` (the estimator's rules, in order)."""
        if self.single:
            k = bisect_left(self.measures, terms[0])
            if k < len(self.measures):
                return self.covering[k].peak
        else:
            found = self._covered(terms)
            if found is not None:
                return found
            return self._beyond(terms)
        if self.plane is not None:
            return self.plane.at(terms)
        return self._scaled(terms)

    def _covered(self, terms: Terms) -> Peak | None:
        """The smallest covering size (the estimator's: the sum of its term ratios to the
        request's, then its measure, then the largest peak, then the first measured): whole terms
        compare the ratio sums over their common denominator, in integers; others in floats, and
        exactly among the sizes whose floats come within rounding of the smallest."""
        for g, top in zip(terms, self.tops):
            if g > top:  # beyond every size in this term: none covers
                return None
        weights = ratio_weights(terms) if self.whole else None
        if weights is None:
            return self._covered_inexact(terms)
        best: Peak | None = None
        least, tie = 0, (0, 0)
        spread = self.spread
        for t, total, rest, peak in self.cover_rows:
            if all(map(operator.ge, t, terms)):
                key = sum(map(operator.mul, t, weights)) * spread + total  # (ratios, measure)
                if best is None or key < least or (key == least and rest < tie):
                    best, least, tie = peak, key, rest
        return best

    def _covered_inexact(self, terms: Terms) -> Peak | None:
        """``_covered`` for terms not all whole: ratios in floats, then exactly among the near."""
        found: list[tuple[float, Covering]] = []
        for c in self.covering:
            if all(t >= g for t, g in zip(c.terms, terms)):
                found.append((sum(float(t) / float(g) for t, g in zip(c.terms, terms) if g), c))
        if not found:
            return None
        least = min(size for size, _ in found)
        near = [c for size, c in found if size <= least * (1 + 1e-9) + 1e-12]
        if len(near) == 1:
            return near[0].peak
        return min(
            near,
            key=lambda c: (_exact_size(c.terms, terms), c.total, -c.peak.raw_bytes, c.first),
        ).peak

    def _beyond(self, terms: Terms) -> Peak:
        """Several terms beyond every covering size: the plane through the sizes nearest the
        request (``NearestPlanes``), else one size scaled."""
        assert self.nearest is not None  # set for every several-term model
        return self.nearest.at(terms) or self._scaled(terms)

    def _scaled(self, terms: Terms) -> Peak:
        found = scaled(self.scalable, terms, self.margin)
        if found is None:  # measured only where this request's measure is 0: the estimator's words
            raise Unpredictable(
                f"phase {self.label}: measured only where the measure is 0; cannot scale to "
                f"{show_terms(terms)}"
            )
        return found


def _exact_size(size: Terms, request: Terms) -> Fraction:
    return sum((Fraction(t) / g for t, g in zip(size, request) if g), Fraction(0))


def _covering(points: Sequence[MeasuredPoint], margin: Fraction) -> list[Covering]:
    """Each distinct measured size once, with its largest peak (the estimator keeps the largest)."""
    best: dict[Terms, tuple[int, MeasuredPoint]] = {}
    for k, p in enumerate(points):
        if p.terms not in best or p.adjusted_peak_bytes > best[p.terms][1].adjusted_peak_bytes:
            best[p.terms] = k, p
    out = []
    for terms, (k, p) in best.items():
        bound = p.peak_bytes + math.ceil(p.growth_bytes * margin)
        peak = Peak(Method.MEASUREMENT, p.adjusted_peak_bytes, bound)
        out.append(Covering(terms, sum(terms), peak, k))
    return out


def _one_term(covering: list[Covering]) -> tuple[tuple[Measure, ...], tuple[Covering, ...]]:
    """For a one-term measure: for each measured measure the size the estimator picks at a
    request just at or below it -- the smallest covering one, its largest peak."""
    ordered = sorted(covering, key=lambda c: c.terms[0])
    return tuple(c.terms[0] for c in ordered), tuple(ordered)


def _plane(
    estimate: PeakEstimate, points: Sequence[MeasuredPoint], margin: Fraction, floor: int
) -> Plane | None:
    """The calibration's own plane; for a target its sizes covered, the one fitted beyond them."""
    if estimate.method == Method.FIT and estimate.fit is not None:
        return Plane.of(estimate.fit, margin)
    if estimate.method == Method.SCALED:  # no plane held at the calibration's target
        return None
    width = len(points[0].terms)
    far = tuple(2 * max(p.terms[i] for p in points) + 1 for i in range(width))
    beyond = peak_from_points(points, far if width > 1 else far[0], margin, floor, estimate.stage)
    if beyond.method == Method.FIT and beyond.fit is not None:
        return Plane.of(beyond.fit, margin)
    return None


def phase_model(label: str, estimate: PeakEstimate, margin: Fraction, floor: int) -> PhaseModel:
    """The model of one phase from its estimate at the calibration's target: its measured sizes,
    its margin, and ``floor`` (its active components' weights, the estimator's)."""
    points = estimate.points
    if not estimate.ok or not points or estimate.stage is None:
        raise ValueError(f"phase {label} has no estimate: {estimate.reason}")
    covering = _covering(points, margin)
    single = len(points[0].terms) == 1
    measures, ordered = _one_term(covering) if single else ((), tuple(covering))
    scalable = undominated(  # each size rule 3 may pick, in order
        [
            Scalable(p.terms, f, p.adjusted_peak_bytes - f)
            for p in points
            for f in (min(max(p.baseline_bytes, floor), p.adjusted_peak_bytes),)
        ]
    )
    return PhaseModel(
        label,
        estimate.stage,
        single,
        measures,
        ordered,
        _plane(estimate, points, margin, floor) if single else None,
        scalable,
        margin,
        () if single else tuple(points),
        floor,
        nearest=None if single else NearestPlanes(points, floor, margin),
        tops=() if single else tuple(map(max, zip(*(c.terms for c in ordered)))),
        whole=all(type(t) is int for c in ordered for t in c.terms),
        cover_rows=tuple((c.terms, c.total, (-c.peak.raw_bytes, c.first), c.peak) for c in ordered),
        spread=1 + max(c.total for c in ordered),
    )
