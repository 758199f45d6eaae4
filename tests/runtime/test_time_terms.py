"""A time measure with several terms (`time ~ [t1, t2, ...]`): loading, `time_terms`, errors."""

from __future__ import annotations

import copy
import re

import pytest

from artifact.document import MAX_MEASURE_TERMS
from runtime import ArtifactError, EvaluationError, Pipeline

from .builders import I, P, left_sum, op, stage
from .video_formulas import AREA, load, video

SQUARED = op("mul", AREA, AREA)  # an attention-like term
AT = "pipelines[0].stages[0]"


@pytest.fixture(scope="module")
def p() -> Pipeline:
    """Attend: time [area, area^2] and memory [area, frames*area]; Plain: time area; Idle: none."""
    return load(
        video(
            stage(
                "Attend",
                time_terms=[AREA, SQUARED],
                memory_terms=[AREA, op("mul", P("frames"), AREA)],
            ),
            stage("Plain", time=AREA),
            stage("Idle"),
        )
    )


def test_time_terms_and_their_sum(p: Pipeline) -> None:
    assert p.time_terms("Attend") == (20, 400)
    assert p.time("Attend") == 420
    assert p.time_terms("Attend", height=2, width=3) == (6, 36)
    assert p.memory_terms("Attend") == (20, 180)  # memory's terms stay memory's


def test_a_plain_time_is_one_term(p: Pipeline) -> None:
    assert p.time_terms("Plain", width=7) == (28,)
    assert p.time_terms("Idle") == (1,)  # time left out: its default, 1


def test_evaluate_sums_the_time_terms(p: Pipeline) -> None:
    values = p.evaluate(height=3)
    assert values["Attend"].time == sum(p.time_terms("Attend", height=3)) == 15 + 225


def test_an_unknown_stage_is_refused(p: Pipeline) -> None:
    with pytest.raises(KeyError, match="Nope"):
        p.time_terms("Nope")


def test_a_negative_time_term_names_the_term() -> None:
    negative = op("sub", P("width"), I(6))  # -1 at the defaults: the loader refuses it there
    with pytest.raises(ArtifactError, match=r"stages\[0\]\.time\.terms\[1\]\.expr"):
        load(video(stage("S", time_terms=[AREA, negative])))
    risky = load(video(stage("S", time_terms=[AREA, op("sub", P("width"), I(2))])))
    with pytest.raises(EvaluationError, match=r"S\.time\[1\]"):
        risky.time_terms("S", width=1)


def test_the_loader_checks_the_sum_and_the_count() -> None:
    doc = video(stage("S", time_terms=[AREA, SQUARED]))
    wrong_order = copy.deepcopy(doc)
    wrong_order["pipelines"][0]["stages"][0]["time"]["expr"] = left_sum([SQUARED, AREA])
    with pytest.raises(ArtifactError, match=r"time\.expr must be the sum of time\.terms"):
        load(wrong_order)
    too_many = [op("mul", I(k + 1), P("width")) for k in range(MAX_MEASURE_TERMS + 1)]
    with pytest.raises(ArtifactError, match=f"expected 2 to {MAX_MEASURE_TERMS} terms"):
        load(video(stage("S", time_terms=too_many)))
    sixteen = load(video(stage("S", time_terms=too_many[:MAX_MEASURE_TERMS])))
    assert len(sixteen.time_terms("S")) == MAX_MEASURE_TERMS


def test_time_terms_are_charged_to_the_cost_model() -> None:
    """A term whose values grow past the bound is refused (here already in the total it sums to)."""
    huge = op("pow", op("pow", op("pow", P("width"), exp=64), exp=64), exp=64)
    with pytest.raises(
        ArtifactError, match=re.escape(f"{AT}.time.expr.args[1]: this value may reach")
    ):
        load(video(stage("S", time_terms=[AREA, huge])))
