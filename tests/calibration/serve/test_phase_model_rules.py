"""A phase model's peak (``calibration.serve.phase_model``: the covering sizes, the planes through
the sizes nearest the request solved once per order, one size scaled in integers) against the
estimator's own rules (``runtime.estimate.peaks.peak_from_points``) at any request: measured sizes
of one to three memory terms (whole or fractional, some 0), peaks on a plane with a little noise
(slopes of both signs, some negligible) or anywhere; every figure equal, or the same error."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.serve.nearest_plane import SOLVED_AHEAD
from calibration.serve.phase_model import PhaseModel, phase_model
from runtime.estimate import MeasuredPoint
from runtime.estimate.peaks import peak_from_points
from runtime.estimate.results import Measure

Terms = tuple[Measure, ...]


def _term(whole_only: bool) -> st.SearchStrategy[Measure]:
    whole = st.integers(0, 48)
    if whole_only:
        return whole
    return st.one_of(whole, st.fractions(0, 48, max_denominator=4))


@st.composite
def sizes(draw: st.DrawFn) -> tuple[list[MeasuredPoint], int]:
    """Measured sizes (a few repeated) of ``width`` terms, and that width."""
    width = draw(st.integers(1, 3))
    whole = draw(st.booleans())
    count = draw(st.integers(1, SOLVED_AHEAD + 2))  # past SOLVED_AHEAD: orders solved on demand
    terms = draw(st.lists(st.tuples(*[_term(whole)] * width), min_size=count, max_size=count))
    planar = draw(st.booleans())
    constant = draw(st.integers(0, 5000))
    slopes = draw(st.lists(st.integers(-30, 400), min_size=width, max_size=width))
    points = []
    for t in terms:
        if planar:  # a plane and a little noise: some slopes fit negative, some negligibly
            peak = constant + sum(s * x for s, x in zip(slopes, t)) + draw(st.integers(-3, 3))
            above = max(0, int(peak))
        else:
            above = draw(st.integers(0, 100_000))
        baseline = draw(st.integers(0, 3000))
        growth = draw(st.sampled_from([0, 0, draw(st.integers(1, 500))]))
        points.append(MeasuredPoint(sum(t), above, baseline, growth, t))
    repeated = draw(st.lists(st.sampled_from(points), max_size=2))
    return points + repeated, width


def _model(points: list[MeasuredPoint], margin: Fraction, floor: int) -> PhaseModel:
    """The model the predictor builds from an estimate at the first size's terms (covered)."""
    first = points[0].terms
    at = first if len(first) > 1 else first[0]
    return phase_model("p", peak_from_points(points, at, margin, floor, "S"), margin, floor)


def _expected(points: list[MeasuredPoint], terms: Terms, margin: Fraction, floor: int) -> object:
    at = terms if len(terms) > 1 else terms[0]
    peak = peak_from_points(points, at, margin, floor, "S")
    if peak.raw_bytes is None:
        return ValueError, f"phase p: {peak.reason}"
    return peak.method, peak.raw_bytes, peak.bound_bytes


def _got(model: PhaseModel, terms: Terms) -> object:
    try:
        return tuple(model.at(terms))
    except ValueError as exc:
        return ValueError, str(exc)


@settings(max_examples=300, deadline=None)
@given(
    drawn=sizes(),
    data=st.data(),
    margin=st.fractions(1, 2, max_denominator=20),
    floor=st.integers(0, 4000),
)
def test_every_request_the_estimators_peak(
    drawn: tuple[list[MeasuredPoint], int], data: st.DataObject, margin: Fraction, floor: int
) -> None:
    points, width = drawn
    model = _model(points, margin, floor)
    requests = data.draw(st.lists(st.tuples(*[_term(False)] * width), min_size=1, max_size=8))
    for terms in requests:
        for scaled in (terms, tuple(4 * t for t in terms)):  # within the sizes, and beyond them
            assert _got(model, scaled) == _expected(points, scaled, margin, floor), scaled


def test_sizes_equally_near_the_estimators_first_largest_peak() -> None:
    """Two sizes as near a request, their peaks equal but not their bounds (one grows per
    iteration): the estimator takes the first measured point of the largest peak, and so does
    the model, whatever order the distinct sizes were first seen in."""
    points = [
        MeasuredPoint(4, 5, 0, 0, (1, 3)),
        MeasuredPoint(4, 10, 0, 0, (3, 1)),  # the first point of peak 10: bound 10
        MeasuredPoint(4, 5, 0, 5, (1, 3)),  # peak 10 too, but its growth pads the bound: 13
    ]
    margin = Fraction(3, 2)
    model = _model(points, margin, 0)
    for terms in ((1, 1), (Fraction(1, 2), Fraction(1, 2))):  # whole terms, and not (floats)
        assert _got(model, terms) == _expected(points, terms, margin, 0) == ("measurement", 10, 10)
