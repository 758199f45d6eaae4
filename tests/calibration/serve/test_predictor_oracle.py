"""The predictor's fast path (one flat evaluation, figures kept by point and placement) against
the straightforward one it replaced, kept here as the oracle: ``evaluate``, then ``memory_terms``
of every several-term stage, every phase model at its stage's terms, the weights each placement
keeps, each stage's clock. On the tiny FLUX's shared calibration and the tiny Wan's (a decoder of
two memory terms), at random requests, under no placement and under plans: every field equal,
or the same error."""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import MappingProxyType

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from artifact.point import Point
from calibration.lifecycle.steps import plan_inputs
from calibration.plan.model import Device, Plan
from calibration.plan.solver import solve
from calibration.serve.phase_model import Unpredictable
from calibration.serve.predictor import (
    PhasePrediction,
    RequestPrediction,
    RequestPredictor,
    from_calibration,
)
from runtime import FormulaError, Pipeline
from runtime.estimate.results import Measure
from tests.budget import count_calls
from tests.calibration.examples.calibrated import calibrated_example
from tests.calibration.lifecycle_setup import STREAMING, calibration, formulas


@functools.cache
def case(name: str) -> tuple[RequestPredictor, tuple[Plan | None, ...]]:
    """A predictor of the example's calibration and the placements to predict under: none, a
    device four times its weights, one half its weights, and (FLUX) the 1 MiB streaming plan."""
    if name == "flux":
        cal, pipeline = calibration(), formulas()
    else:
        cal, pipeline = calibrated_example(name)
    components, targets = plan_inputs(cal)
    weights = sum(cal.component_weight_bytes.values())
    devices = [Device(4 * weights), Device(weights // 2, reserve_bytes=0)]
    plans = tuple(solve(components, targets, d) for d in devices)
    streaming = (solve(components, targets, STREAMING),) if name == "flux" else ()
    return from_calibration(cal, pipeline), (None, *plans, *streaming)


def oracle(predictor: RequestPredictor, params: Point, placement: Plan | None) -> object:
    """The prediction as the predictor computed it before its fast path, step by step."""
    pipeline = predictor.pipeline
    values = pipeline.evaluate(**params)
    terms: dict[str, tuple[Measure, ...]] = {s: (v.memory,) for s, v in values.items()}
    for stage in predictor.multi_term:
        terms[stage] = pipeline.memory_terms(stage, **params)
    peaks = [m.at(terms[m.stage]) for m in predictor.models]
    if placement is None:
        always, onload = sum(predictor.weights.values()), {}
    else:
        placed = {p.component: p for p in placement.placements}
        always = sum(p.device_bytes for p in placed.values())
        always += sum(w for n, w in predictor.weights.items() if n not in placed)
        onload = {n: p.onload_bytes for n, p in placed.items() if p.onload_bytes}
    out = []
    for p in predictor.phases:
        weights = always + sum(onload.get(n, 0) for n in p.members)
        method, raw, bound = peaks[p.model_index]
        raw = max(0, raw - p.calibrated_weights)
        bound = max(0, bound + p.risk_bytes - p.calibrated_weights)
        out.append(
            PhasePrediction(
                p.model.label, p.model.stage, method, raw + weights, bound + weights, bound, weights
            )
        )
    transfer = 0.0
    if placement is not None and placement.feasible:
        transfer = placement.times[0].exposed_s if placement.times else placement.transfer_s
    seconds = None
    if predictor.untracked_s is not None:
        compute = sum(c.seconds(values[c.stage]) for c in predictor.clocks)
        seconds = compute + predictor.untracked_s + transfer
    return RequestPrediction(MappingProxyType(dict(params)), tuple(out), seconds, transfer)


def outcome(call: Callable[[], object]) -> object:
    """What ``call`` returns with its time's type, or its error's type and text."""
    try:
        got = call()
    except (FormulaError, ValueError) as exc:
        return type(exc), str(exc)
    assert isinstance(got, RequestPrediction)
    return got, type(got.seconds)


def requests(pipeline: Pipeline, snapped: bool) -> st.SearchStrategy[dict[str, int | bool]]:
    """Some of the pipeline's params, each int up to three times its default (``snapped``: moved
    down to its largest admissible value with the others, else as drawn, admissible or not)."""
    drawn: dict[str, st.SearchStrategy[int | bool]] = {}
    for name, info in pipeline.params.items():
        if info.type == "bool":
            drawn[name] = st.booleans()
        else:
            low = 0 if info.min is None else info.min
            drawn[name] = st.integers(low - (not snapped), max(low, 3 * int(info.default)))
    params = st.fixed_dictionaries({}, optional=drawn)  # type: ignore[arg-type]
    if not snapped:
        return params
    return params.map(lambda p: _snapped(pipeline, p))


def _snapped(pipeline: Pipeline, params: dict[str, int | bool]) -> dict[str, int | bool]:
    out = dict(params)
    for name, value in params.items():
        if type(value) is int:
            others = {k: v for k, v in out.items() if k != name}
            found = pipeline.largest_admissible(name, value, **others)
            if found is None:
                return {**out, name: -1}  # inadmissible: the test assumes it away
            out[name] = found
    return out


def _check(name: str, params: dict[str, int | bool], pick: int) -> None:
    predictor, placements = case(name)
    placement = placements[pick % len(placements)]
    expected = outcome(lambda: oracle(predictor, params, placement))
    predictor.forget()
    assert outcome(lambda: predictor.predict(params, placement)) == expected  # computed
    assert outcome(lambda: predictor.predict(params, placement)) == expected  # remembered


@pytest.mark.parametrize("name", ["flux", "wan"])
@settings(max_examples=60, deadline=None)
@given(data=st.data(), pick=st.integers(0, 3))
def test_every_field_equals_the_straightforward_path(
    name: str, data: st.DataObject, pick: int
) -> None:
    pipeline = case(name)[0].pipeline
    params = data.draw(requests(pipeline, snapped=True))
    assume(pipeline.is_admissible(**params))
    _check(name, params, pick)


@pytest.mark.parametrize("name", ["flux", "wan"])
@settings(max_examples=40, deadline=None)
@given(data=st.data(), pick=st.integers(0, 3))
def test_any_request_the_same_prediction_or_error(
    name: str, data: st.DataObject, pick: int
) -> None:
    _check(name, data.draw(requests(case(name)[0].pipeline, snapped=False)), pick)


@pytest.mark.parametrize("name", ["flux", "wan"])
@settings(max_examples=30, deadline=None)
@given(data=st.data(), pick=st.integers(0, 3))
def test_a_shape_never_seen_solves_nothing(name: str, data: st.DataObject, pick: int) -> None:
    """A cold prediction is a few dozen Python calls whatever the shape (a work budget, not a
    clock): no fit is solved per request, no Fraction made from whole terms. The estimator's own
    rules per new shape, which Wan's two-term decoder ran before, made up to ~1,200."""
    predictor, placements = case(name)
    pipeline = predictor.pipeline
    params = data.draw(requests(pipeline, snapped=True))
    assume(pipeline.is_admissible(**params))
    placement = placements[pick % len(placements)]
    predictor.predict({}, placement)  # the placement's weights, kept as for the one in force
    predictor.forget()

    def cold() -> RequestPrediction | None:  # a request no size moved raises, as cheaply
        try:
            return predictor.predict(params, placement)
        except Unpredictable:
            return None

    assert count_calls(cold)[1] <= 80
