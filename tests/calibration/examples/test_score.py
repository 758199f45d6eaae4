"""Scoring a mistake about time (calibration.examples.mistakes.score.time_unjudged): judged where
a size's time is off its fit on clean, replicated evidence, unjudged (with each size's residual
and noise) where a busy neighbour's bursts swamp it. On the virtual clock of
tests/calibration/probes/test_time_evidence.py, so nothing depends on the machine's load."""

from __future__ import annotations

from calibration.examples.mistakes.model import Mistake
from calibration.examples.mistakes.score import time_unjudged
from tests.calibration.probes.kinked import Kink, formula_text
from tests.calibration.probes.test_time_evidence import (
    PROBE,
    TARGET,
    WARMUP,
    WorkClock,
    calibrate,
)


def _mistake(quantities: tuple[str, ...] = ("time",)) -> Mistake:
    return Mistake(
        "kinked-time",
        "wrong time term",
        "kinked",
        "timed.wf",
        "kinked",
        (),
        WARMUP,
        PROBE,
        TARGET,
        stages=("DenoisingStage",),
        direction="height*width",
        why="the steps' time grows with the area squared; the formula says the area",
        quantities=quantities,
        repeat=3,
    )


def _pipeline():
    from dslc.build import load_text

    return load_text(formula_text(Kink("min", 16)), "timed.wf")["kinked"]


def test_a_time_miss_on_clean_replicated_evidence_is_judged():
    cal = calibrate(WorkClock(), repeat=3)
    assert time_unjudged(_mistake(), cal, _pipeline()) is None


def test_the_same_miss_under_bursts_is_unjudged_and_says_why():
    cal = calibrate(WorkClock(burst=True), repeat=3)
    why = time_unjudged(_mistake(), cal, _pipeline())
    assert why is not None
    assert why.startswith("DenoisingStage time residuals") and "ms (noise" in why
    assert "the runs spread" in why
    assert time_unjudged(_mistake(("memory",)), cal, _pipeline()) is None  # not about time
