"""One calibration fits each stage once (issue 42, "one modeler"): the tiny FLUX calibrated as
`dslc calibrate --example flux` does, every fit counted where it is made and where the one modeler
(the calibration's ``FitCache``) makes it, keyed by the stage, its policy and its samples: the
findings, the evidence margins, the loop, the time estimate, the memory peaks and the fixed-margin
bounds read those fits instead of fitting the same samples again."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TypeVar

import pytest

from calibration.calibrate.pipeline import calibrate_pipeline
from calibration.examples import EXAMPLES
from calibration.probes import residuals
from runtime import Pipeline
from runtime.estimate import peak_fit, timing
from runtime.estimate.fit.model import FitCache, FitKey
from runtime.kinds import FitRule, Quantity

pytest.importorskip("diffusers")
FLUX = EXAMPLES["flux"]
M = TypeVar("M")


def test_a_calibration_fits_each_stage_and_policy_once(flux: Pipeline, monkeypatch) -> None:
    made: Counter[FitKey] = Counter()  # fits the one modeler made, per key
    fits = Counter[str]()  # fits made anywhere, by the two fitting functions
    caches: list[FitCache] = []

    class Counted(FitCache):
        def __init__(self) -> None:
            super().__init__()
            caches.append(self)

        def fit(self, key: FitKey, model: Callable[[FitKey], M]) -> M:
            def counted(k: FitKey) -> M:
                made[k] += 1
                return model(k)

            return super().fit(key, counted)

    def counting(name: str, function: Callable[..., M]) -> Callable[..., M]:
        def wrapper(*args: object) -> M:
            fits[name] += 1
            return function(*args)

        return wrapper

    monkeypatch.setattr(residuals, "fit_samples", counting("check", residuals.fit_samples))
    monkeypatch.setattr(timing, "fit_time", counting("estimate", timing.fit_time))
    monkeypatch.setattr(peak_fit, "fit_peak", counting("peak", peak_fit.fit_peak))
    monkeypatch.setattr("calibration.calibrate.loop.FitCache", Counted)
    cal = calibrate_pipeline(FLUX.build, flux, FLUX.shapes, call_kwargs=FLUX.call_kwargs, repeat=2)
    assert cal.estimate.request_peak.ok and cal.estimate.timing.seconds is not None
    (cache,) = caches  # one modeler for the whole calibration
    twice = {(k.stage, k.policy): n for k, n in made.items() if n > 1}
    assert not twice, f"fitted again on the same samples: {twice}"
    assert sum(fits.values()) == sum(made.values())  # every fit was the modeler's
    assert cache.reads > sum(made.values())  # and some consumer read a fit made before
    assert {k.stage for k in made} == set(flux.stages)
    policies = {(k.policy.quantity, k.policy.rule) for k in made}
    assert policies == {
        (Quantity.MEMORY, FitRule.EXACT),
        (Quantity.TIME, FitRule.EXACT),
        (Quantity.TIME, FitRule.PLANE),
        (Quantity.MEMORY, FitRule.PEAK),
    }
    peaks = [k for k in made if k.policy.rule == FitRule.PEAK]
    # every peak fit (the estimate's and the fixed-margin bounds') the modeler's, each made once
    assert fits["peak"] == len(peaks) > 0
