"""Sizes that do not depend on a clock: calibrate run twice with clocks that lie differently (one
steady, one jumping at random) measures time differently, may add different sizes for time, and
predicts the same memory bit for bit (calibration.calibrate.run: sizes chosen from measured times
join the time estimate only)."""

from __future__ import annotations

import random
from collections.abc import Callable

from calibration.calibrate.run import Calibration, calibrate_session
from calibration.core.session import Session
from runtime.estimate.fit import Quantity
from tests.calibration.probes.kinked import Kink, Kinked, formula_text

TARGET = {"steps": 2, "frames": 24, "height": 96, "width": 96}
PROBE = {"steps": 1, "frames": 16, "height": 32, "width": 32}
WARMUP = {"steps": 1, "frames": 4, "height": 16, "width": 16}


def steady() -> Callable[[], float]:
    """A clock that advances one millisecond a reading, whatever runs in between."""
    now = [0.0]

    def clock() -> float:
        now[0] += 1e-3
        return now[0]

    return clock


def jumping(seed: int) -> Callable[[], float]:
    """A clock that jumps by up to half a second a reading, at random."""
    rng, now = random.Random(seed), [0.0]

    def clock() -> float:
        now[0] += rng.uniform(0.0, 0.5)
        return now[0]

    return clock


def calibrate(clock: Callable[[], float]) -> Calibration:
    from dslc.build import load_text

    kink = Kink("min", 16)
    pipeline = load_text(formula_text(kink), "kinked.wf")["kinked"]
    pipe = Kinked(kink)
    session = Session(pipe, pipeline, "cpu", clock=clock)  # type: ignore[arg-type]  # a __call__ of its own keywords
    return calibrate_session(
        session, target=TARGET, probe=PROBE, warmup=WARMUP, verify=True, repeat=2
    )


def memory(cal: Calibration) -> tuple[object, ...]:
    """Every memory figure a calibration gives: phases, the request, margins, memory findings."""
    peak = cal.estimate.request_peak
    return (
        tuple(
            (p.label, p.peak.method, p.peak.raw_bytes, p.peak.bound_bytes, p.peak.reason)
            for p in cal.estimate.phases
        ),
        (peak.raw_bytes, peak.bound_bytes, peak.reason),
        tuple((m.stage, m.margin, m.source, m.reason) for m in cal.margins),
        tuple((f.kind, f.stage, f.message) for f in cal.findings if f.quantity != Quantity.TIME),
    )


def test_two_lying_clocks_give_the_same_memory_predictions():
    calm, wild = calibrate(steady()), calibrate(jumping(7))
    assert calm.estimate.timing.seconds != wild.estimate.timing.seconds  # the clocks do differ
    assert memory(calm) == memory(wild)
    again = calibrate(jumping(8))
    assert memory(again) == memory(calm)
