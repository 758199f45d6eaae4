"""`Pipeline.point` and `Pipeline.measures`: every stage's fields and memory terms in one call,
equal to `evaluate` and `memory_terms` at every point, value and type, or the same error."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import FormulaError, Pipeline

from .builders import F, I, P, op, stage
from .video_formulas import AREA, NOT_FOUR, RISKY_TERMS, load, video


@pytest.fixture(scope="module")
def mixed() -> Pipeline:
    """S: memory ~ [area, 100 / (height - 2), width - 3] (divides by zero at height 2, a negative
    term below width 3); Half: iterations height / 2 (a Fraction at odd heights), memory a
    Fraction; Clock: time ~ [area, width - 3] (a negative time term, never checked); Idle."""
    return load(
        video(
            stage("S", memory_terms=RISKY_TERMS),
            stage(
                "Half",
                iterations=op("div", P("height"), I(2)),
                memory=op("mul", P("frames"), F(1, 3)),
            ),
            stage("Clock", memory=AREA, time_terms=[AREA, op("sub", P("width"), I(3))]),
            stage("Idle"),
            contracts=[NOT_FOUR],
        )
    )


def outcome(call: Callable[[], Any]) -> object:
    """What ``call`` returns (each value with its type), or its error's type, text and fields."""
    try:
        values = call()
    except FormulaError as exc:
        fields = tuple(getattr(exc, a, None) for a in ("pipeline", "what", "violations", "param"))
        return type(exc), str(exc), fields
    return tuple((type(v), v) for v in values)


def reference(p: Pipeline, params: dict[str, Any]) -> tuple[object, ...]:
    """`evaluate`'s three values per stage, then each listed stage's `memory_terms`."""
    values = p.evaluate(**params)
    flat: list[object] = []
    for s in p.stages:
        flat += (values[s].iterations, values[s].memory, values[s].time)
    for s in p.stages:
        if p.measure_slots[s].listed:
            flat += p.memory_terms(s, **params)
    return tuple(flat)


POINTS = st.fixed_dictionaries(
    {},
    optional={
        "frames": st.integers(0, 12),
        "height": st.integers(-1, 9),
        "width": st.integers(0, 9),
    },
)


@settings(max_examples=200, deadline=None)
@given(POINTS)
def test_measures_are_evaluate_and_memory_terms(mixed: Pipeline, params: dict[str, int]) -> None:
    got = outcome(lambda: mixed.measures(mixed.point(params)))
    assert got == outcome(lambda: reference(mixed, params))


def test_the_slots_name_each_stages_values(mixed: Pipeline) -> None:
    values = mixed.measures(mixed.point({"height": 6, "width": 7}))
    slots = mixed.measure_slots
    assert values[slots["S"].terms] == mixed.memory_terms("S", height=6, width=7) == (42, 25, 4)
    assert slots["S"].listed == 3 and slots["Half"].listed == 0
    assert values[slots["Half"].terms] == (mixed.memory("Half", height=6, width=7),)
    assert values[slots["Half"].iterations] == 3
    assert values[slots["Clock"].time] == 42 + 4


def test_a_point_is_the_defaults_overridden_and_refuses_as_evaluate(mixed: Pipeline) -> None:
    assert mixed.point({}) == (9, 4, 5)
    assert mixed.point({"width": 6}) == (9, 4, 6)
    bad: dict[str, Any]
    for bad in ({"width": 4}, {"widht": 1}, {"width": True}, {"frames": 0}):
        refused = outcome(functools.partial(mixed.point, bad))
        assert refused == outcome(functools.partial(mixed.evaluate, **bad))
