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
    cal = calibrate(WorkClock(disagree=True), repeat=3)
    why = time_unjudged(_mistake(), cal, _pipeline())
    assert why is not None
    assert why.startswith("DenoisingStage time residuals") and "ms (noise" in why
    assert "the runs spread" in why
    assert time_unjudged(_mistake(("memory",)), cal, _pipeline()) is None  # not about time


def test_a_residual_within_its_own_runs_spread_shows_no_miss_and_one_beyond_it_does():
    """The rule that keeps "unjudged" honest: noise excuses a missed time mistake only where a
    size's runs agree on a miss (its residual beyond their range) that the fit's noise hides."""
    from fractions import Fraction

    from calibration.examples.mistakes.score import _beyond_own_runs
    from calibration.probes.residuals import SizePoint

    def point(value: float, samples: tuple[float, ...]) -> SizePoint:
        return SizePoint({"steps": 2}, (Fraction(1),), value, 0.004, samples, tolerance=0.02)

    assert _beyond_own_runs(point(0.0077, (0.0079, 0.0077, 0.0073)))  # +3.7 ms, runs 0.6 ms apart
    assert not _beyond_own_runs(point(0.0041, (0.0040, 0.0071, 0.0041)))  # +0.1 ms, a 3.1 ms burst
    assert not _beyond_own_runs(point(0.0077, (0.0077,)))  # one run: no spread to judge against
